import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindFuzzing
import PlugindHostFuzzing
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

/// The corpora of the fuzz targets of what hosts and the CLI read that a plugin or another user
/// can write, replayed: statistics pages (`top`), the plugin log and journal entries (`logs`),
/// activity records (`info`), the crash log (`crashes`, and every launch), workers' stack
/// reports and sandbox refusals. Each keeps its target's invariants, never trapping.
@Suite("Fuzz corpus replay: what hosts and the CLI read from plugins and other users", .tags(.unit))
struct HostReaderFuzzTests {
    static let root = BuiltProducts.packageRoot + "/Fuzz/Corpus/"

    private func replay(_ target: String, atLeast count: Int, _ body: ([UInt8]) throws -> Void) {
        let inputs = FuzzReplay.inputs(in: [Self.root + target])
        #expect(inputs.count >= count, "\(target)")
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try body(bytes) }
        }
    }

    private func page(_ name: String) throws -> WorkerStatistics {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.root + "statistics-page/" + name)))
        return try #require(WorkerStatistics(page: Array(bytes.prefix(1024))), "\(name)")
    }

    @Test("statistics pages: read as top reads them, counters at any value, in flight never above started")
    func statisticsPages() throws {
        replay("statistics-page", atLeast: 8, StatisticsPageFuzzing.run)
        let overflowing = try page("hostile-answered-max-failed-1")
        #expect(overflowing.requestsAnswered == .max && overflowing.requestsFailed == 1)
        #expect(overflowing.requestsEnded == .max && overflowing.requestsInFlight == 0)
        let negative = try page("hostile-in-flight-negative")
        #expect(negative.requestsStarted < negative.requestsAnswered + negative.requestsFailed)
        #expect(negative.requestsInFlight == 0)
        #expect(try page("seed-running").requestsInFlight == 2)
    }

    @Test("the plugin log and journal entries: complete lines only, inert, and recorded again as exactly their fields")
    func pluginLog() throws {
        replay("plugin-log", atLeast: 4, PluginLogFuzzing.run)
        // The seeds reach entries, so the fuzzer starts past the JSON.
        let directory = try FuzzScratch.emptyDirectory()
        let file = PluginLogFile(directory: directory)
        let seed = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.root + "plugin-log/seed-file")))
        try FuzzScratch.write(Array(seed.dropFirst()), to: file.path(of: .pluginOutput))
        #expect(file.entries().count == 3)
        let journal = try String(contentsOfFile: Self.root + "plugin-log/seed-journal", encoding: .utf8).dropFirst()
        let read = journal.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))).flatMap { $0 as? [String: Any] }.flatMap(
                PluginLogEntry.init(journalObject:))
        }
        #expect(read.count == 3, "the seed's plugind entries, not another program's or an unknown event")
    }

    @Test("activity records: read or ignored, whatever their counts and dates")
    func activityRecords() {
        replay("activity-record", atLeast: 4, ActivityRecordFuzzing.run)
    }

    @Test("an activity record that is a FIFO, a link or larger than a record is not read, and the read returns at once")
    func hostileActivityRecords() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("activity")
        let store = PluginActivityStore(directory: directory)
        let record = Array(#"{"launches":3,"requestsAnswered":2,"requestsFailed":1}"#.utf8)
        try AtomicFile.replace(directory + "/org.example.kept.json", with: record)
        try AtomicFile.replace(scratch.path + "/elsewhere.json", with: record)
        #expect(symlink(scratch.path + "/elsewhere.json", directory + "/org.example.linked.json") == 0)
        #expect(symlink("/dev/zero", directory + "/org.example.zero.json") == 0)
        let fifo = directory + "/org.example.fifo.json"
        try HostileFile.makeFIFO(at: fifo)
        try HostileFile.makeSparse(at: directory + "/org.example.large.json", size: (64 << 10) + 1)

        let read = try await HostileFile.readPromptly("the records to be read", unblocking: [fifo]) {
            ["kept", "linked", "zero", "fifo", "large"].map { store.record(of: "org.example." + $0)?.launches }
        }
        #expect(read == [3, nil, nil, nil, nil])
    }

    @Test("a crash log that is a FIFO or larger than any log plugind writes is refused at once, failing closed")
    func hostileCrashLogs() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        func host(_ name: String) throws -> AppExtensionHost {
            var host = AppExtensionHost(identifier: "org.example.host", environment: ["HOME": scratch.path])
            host.stateDirectory = URL(fileURLWithPath: try scratch.subdirectory(name))
            return host
        }
        let fifoHost = try host("fifo")
        let largeHost = try host("large")
        let fifo = fifoHost.stateDirectory.appendingPathComponent(CrashLog.fileName).path
        try HostileFile.makeFIFO(at: fifo)
        let large = largeHost.stateDirectory.appendingPathComponent(CrashLog.fileName).path
        try HostileFile.makeSparse(at: large, size: CrashLog.maximumFileBytes + 1)

        let problems = try await HostileFile.readPromptly("the crash logs to be read", unblocking: [fifo]) {
            [fifoHost, largeHost].map { host -> String? in
                guard case .failure(let problem) = CrashLog(host: host).read() else { return nil }
                CrashLog(host: host).recordRefusals(identifier: "org.example.plugin", count: 1, last: "open")
                return problem.description
            }
        }
        #expect(problems[0]?.hasPrefix("the crash log \(fifo) is a FIFO, not a regular file; until it is fixed every plugin") == true)
        #expect(problems[1]?.hasPrefix("the crash log \(large) is larger than 64 MiB, the most read of it;") == true)
        // Neither was written: a log that cannot be read keeps its quarantines.
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
        #expect(stat(large, &status) == 0 && Int(status.st_size) == CrashLog.maximumFileBytes + 1)
    }

    @Test("the crash log: read or refused naming it, never written when refused, and refusals added at any count")
    func crashLog() throws {
        replay("crash-log", atLeast: 6, CrashLogFuzzing.run)
        // The seeds and the hostile logs are crash logs a host reads, so they reach the update.
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        for name in ["seed-crash-and-refusals", "seed-quarantined", "hostile-refusals-at-the-top", "hostile-strings"] {
            let data = try Data(contentsOf: URL(fileURLWithPath: Self.root + "crash-log/" + name))
            #expect(throws: Never.self, "\(name)") { try decoder.decode(CrashLog.Document.self, from: data) }
        }
    }

    @Test("workers' stack reports and sandbox refusals: decoded or refused, inert, and logged as exactly their fields")
    func workerReports() {
        replay("worker-reports", atLeast: 8, WorkerReportFuzzing.run)
    }
}
