import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@testable import plugind

/// A statistics page is a file any user writes into their own runtime directory, and root's
/// `plugind top` reads every user's: counters chosen to overflow (answered 2^64−1 and failed 1)
/// once trapped `top` for everyone.
@Suite("plugind top reads hostile statistics pages without trapping", .tags(.process), .timeLimit(.minutes(5)))
struct HostileStatisticsPageTests {
    static func page(started: UInt64, answered: UInt64, failed: UInt64, memoryLimit: UInt64 = .max) -> WorkerStatistics {
        WorkerStatistics(
            state: .running, hostPID: getpid(), workerPID: getpid(), startedNanoseconds: .max, requestsStarted: started,
            requestsAnswered: answered, requestsFailed: failed, memoryLimit: memoryLimit, plugin: "org.hostile.page",
            pluginVersion: "1", hostIdentifier: "org.hostile", hostExecutable: "/bin/false")
    }

    @Test(
        "counters at the bounds: ended saturates, in flight is never below 0",
        arguments: [
            (UInt64(0), UInt64.max, UInt64(1)), (UInt64.max, UInt64.max, UInt64.max), (UInt64(5), UInt64(3), UInt64(9)),
            (UInt64.max, UInt64(0), UInt64(0)),
        ])
    func counters(started: UInt64, answered: UInt64, failed: UInt64) throws {
        let read = try #require(WorkerStatistics(page: Self.page(started: started, answered: answered, failed: failed).encoded))
        let (sum, overflow) = answered.addingReportingOverflow(failed)
        #expect(read.requestsEnded == (overflow ? .max : sum))
        #expect(read.requestsInFlight == (started > read.requestsEnded ? started - read.requestsEnded : 0))
        var model = TopModel()
        model.sort = .requests
        model.rows = [
            TopAndSinceTests.row("org.a", cpu: 0, memory: 0, answered: .max, host: 1),
            TopAndSinceTests.row("org.b", cpu: 0, memory: 0, answered: answered, host: 2),
        ]
        model.rows[1].requestsFailed = failed
        model.rows[1].memoryLimitBytes = .max
        model.rows[1].uptimeSeconds = .greatestFiniteMagnitude
        #expect(model.tableLines(showUser: true).count == 3)
    }

    @Test("top --json and the table show a page of 2^64−1 answered and 1 failed request, and nothing in flight")
    func hostilePage() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let directory = test.host.runtimeDirectory.appendingPathComponent("workers").path
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let bytes = Self.page(started: 0, answered: .max, failed: 1).encoded + [UInt8](repeating: 0, count: 4096 - 896)
        let path = directory + "/\(getpid())-\(getpid())" + WorkerStatisticsLayout.fileSuffix
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))

        let json = try await plugind(["top", "--json"], in: test)
        #expect(json.status == 0, "\(json.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput))
        let rows = (document as? [[String: Any]]) ?? ((document as? [String: Any])?["workers"] as? [[String: Any]]) ?? []
        let row = try #require(rows.first { $0["plugin"] as? String == "org.hostile.page" }, "\(json.stdout)")
        #expect((row["requestsInFlight"] as? NSNumber)?.uint64Value == 0, "\(row)")
        #expect((row["requestsFailed"] as? NSNumber)?.uint64Value == 1, "\(row)")

        // A pages directory that is a link, or that others may write, is not read: root's `top`
        // reads every user's, and must not be pointed at files that are not theirs.
        let elsewhere = test.directory.path + "/elsewhere"
        try FileManager.default.moveItem(atPath: directory, toPath: elsewhere)
        try FileManager.default.createSymbolicLink(atPath: directory, withDestinationPath: elsewhere)
        let linked = try await plugind(["top", "--json"], in: test)
        #expect(linked.status == 0 && !linked.stdout.contains("org.hostile.page"), "\(linked.stdout)")
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.moveItem(atPath: elsewhere, toPath: directory)
        #expect(chmod(directory, 0o777) == 0)
        let shared = try await plugind(["top", "--json"], in: test)
        #expect(shared.status == 0 && !shared.stdout.contains("org.hostile.page"), "\(shared.stdout)")
        #expect(chmod(directory, 0o700) == 0)

        let table = try await plugind(["top"], in: test)
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("org.hostile.page"), "\(table.stdout)")
    }

    @Test("a sample reads at most 4,096 pages, however many a user writes; a FIFO among them is passed over at once")
    func boundedSample() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let page = Data(Self.page(started: 1, answered: 1, failed: 0).encoded)
        func directory(_ name: String, pages: Int) throws -> WorkerTable.PageDirectory {
            let path = try scratch.subdirectory(name)
            for index in 0..<pages {
                #expect(FileManager.default.createFile(atPath: path + "/\(index)" + WorkerStatisticsLayout.fileSuffix, contents: page))
            }
            return WorkerTable.PageDirectory(base: path, components: [], owner: geteuid())
        }
        let crowded = try directory("crowded", pages: WorkerTable.maximumPages + 10)
        #expect(WorkerTable.sample([crowded]).count == WorkerTable.maximumPages)

        let few = try directory("few", pages: 1)
        let fifo = few.base + "/fifo" + WorkerStatisticsLayout.fileSuffix
        try HostileFile.makeFIFO(at: fifo)
        let samples = try await HostileFile.readPromptly("a sample to be taken", unblocking: [fifo]) { WorkerTable.sample([few]).count }
        #expect(samples == 1)
    }
}
