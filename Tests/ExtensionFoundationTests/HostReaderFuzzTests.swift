import ExtensionFoundation
import Foundation
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
