import Foundation
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("The plugin log: journal entries, the rate limit, statistics pages", .tags(.unit))
struct PluginLogTests {
    static let entry = PluginLogEntry(
        time: 1_796_195_106_296_612, priority: 4, event: .log, message: "two\nlines\nPLUGIND_PLUGIN=evil", plugin: "org.example.x",
        pluginVersion: "1.2.0", bundleDigest: "sha256:ab", hostIdentifier: "org.example", hostExecutable: "/usr/bin/host",
        hostPID: 10, workerPID: 11, level: "warning")

    /// The fields of a native-protocol datagram, as journald parses it.
    static func parse(_ bytes: [UInt8]) -> [(String, String)]? {
        var fields: [(String, String)] = []
        var index = 0
        while index < bytes.count {
            guard let end = bytes[index...].firstIndex(where: { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\n") }) else { return nil }
            let name = String(decoding: bytes[index..<end], as: UTF8.self)
            if bytes[end] == UInt8(ascii: "=") {
                guard let newline = bytes[end...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                fields.append((name, String(decoding: bytes[(end + 1)..<newline], as: UTF8.self)))
                index = newline + 1
            } else {
                guard end + 9 <= bytes.count else { return nil }
                var length: UInt64 = 0
                for offset in 0..<8 { length |= UInt64(bytes[end + 1 + offset]) << (8 * UInt64(offset)) }
                let start = end + 9
                guard start + Int(length) < bytes.count, bytes[start + Int(length)] == UInt8(ascii: "\n") else { return nil }
                fields.append((name, String(decoding: bytes[start..<(start + Int(length))], as: UTF8.self)))
                index = start + Int(length) + 1
            }
        }
        return fields
    }

    @Test("a datagram holds every field once; a message with line breaks uses the binary form and cannot add a field")
    func datagram() throws {
        let fields = try #require(Self.parse(Self.entry.journalDatagram))
        let names = fields.map(\.0)
        #expect(Set(names).count == names.count)
        #expect(names.filter { $0 == "PLUGIND_PLUGIN" }.count == 1)
        let values = Dictionary(fields, uniquingKeysWith: { first, _ in first })
        #expect(values["MESSAGE"] == "two\nlines\nPLUGIND_PLUGIN=evil")
        #expect(values["PLUGIND_PLUGIN"] == "org.example.x")
        #expect(values["PRIORITY"] == "4")
        #expect(values["SYSLOG_IDENTIFIER"] == "plugind")
        #expect(values["PLUGIND_HOST_PID"] == "10" && values["PLUGIND_WORKER_PID"] == "11")
        #expect(values["PLUGIND_BUNDLE_DIGEST"] == "sha256:ab" && values["PLUGIND_PLUGIN_VERSION"] == "1.2.0")
    }

    @Test("an entry read back from journalctl's JSON is the entry written; byte arrays and other programs' entries are handled")
    func journalObject() throws {
        var object: [String: Any] = Dictionary(Self.entry.journalFields, uniquingKeysWith: { first, _ in first })
        object["__REALTIME_TIMESTAMP"] = "1"
        #expect(PluginLogEntry(journalObject: object) == Self.entry)
        // journalctl shows a value with control characters as an array of bytes.
        object["MESSAGE"] = Array("a\u{1B}b".utf8).map(Int.init)
        #expect(PluginLogEntry(journalObject: object)?.message == "a\u{1B}b")
        object["SYSLOG_IDENTIFIER"] = "sshd"
        #expect(PluginLogEntry(journalObject: object) == nil)
    }

    @Test("a long message is cut to the bound, on a character boundary, saying how much went")
    func bounded() {
        let long = String(repeating: "é", count: PluginLogEntry.maximumMessageBytes)
        let cut = PluginLogEntry.bounded(long)
        #expect(cut.utf8.count < PluginLogEntry.maximumMessageBytes + 64)
        #expect(cut.hasSuffix("more bytes cut]"))
        #expect(PluginLogEntry.bounded("short") == "short")
    }

    @Test("the limiter admits a burst, then the rate; what it refused is counted and said with the next admitted line")
    func rateLimit() {
        var limiter = PluginLogBudget.linesPerWorker()
        let start = ContinuousClock.now
        var admitted = 0
        for _ in 0..<1000 where limiter.consider(at: start) != .refuse { admitted += 1 }
        #expect(admitted == Int(limiter.burst))
        #expect(limiter.dropped == 1000 - admitted)
        // A second later, the rate's worth comes back; the first line carries the count.
        #expect(limiter.consider(at: start + .seconds(1)) == .admit(droppedBefore: 1000 - admitted))
        var more = 1
        for _ in 0..<1000 where limiter.consider(at: start + .seconds(1)) != .refuse { more += 1 }
        #expect(more == Int(limiter.rate))
        #expect(limiter.takeDropped() == 1000 - more + 1)
        #expect(limiter.takeDropped() == 0)
        // An instant earlier than the last one seen refills nothing; a cost over the burst never fits.
        #expect(limiter.consider(at: start) == .refuse)
        var bytes = PluginLogBudget.bytesPerPlugin()
        #expect(bytes.consider(cost: bytes.burst + 1, at: start) == .refuse)
        #expect(bytes.consider(cost: bytes.burst, at: start) == .admit(droppedBefore: 1))
    }

    @Test("a statistics page reads back as written; a short or foreign one is refused; counters add")
    func statisticsPage() throws {
        let statistics = WorkerStatistics(
            state: .running, hostPID: 42, workerPID: 43, startedNanoseconds: 7, requestsStarted: 5, requestsAnswered: 3,
            requestsFailed: 1, memoryLimit: 1 << 30, plugin: "org.example.x", pluginVersion: "1.0",
            hostIdentifier: "org.example", hostExecutable: "/usr/bin/host")
        #expect(WorkerStatistics(page: statistics.encoded) == statistics)
        #expect(statistics.requestsInFlight == 1)
        #expect(WorkerStatistics(page: Array(statistics.encoded.prefix(100))) == nil)
        var foreign = statistics.encoded
        foreign[0] = UInt8(ascii: "X")
        #expect(WorkerStatistics(page: foreign) == nil)

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let page = WorkerStatisticsPage(statistics, directory: directory.path + "/workers")
        page.requestStarted()
        page.requestAnswered()
        page.requestFailed()
        let path = directory.path + "/workers/42-43.stats"
        let written = try #require(FileManager.default.contents(atPath: path))
        let read = try #require(WorkerStatistics(page: [UInt8](written)))
        #expect(read.requestsStarted == 6 && read.requestsAnswered == 4 && read.requestsFailed == 2)
        #expect(page.counts == (answered: 4, failed: 2))
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
        page.remove()
        #expect(!FileManager.default.fileExists(atPath: path))
        // Where the page cannot be published, the counters still count.
        let unpublished = WorkerStatisticsPage(statistics, directory: nil)
        unpublished.requestAnswered()
        #expect(unpublished.counts == (answered: 4, failed: 1))
    }

    @Test("the log file appends lines, rotates past its bound into one older file, and reads both back in order")
    func logFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = PluginLogFile(directory: directory.path + "/logs")
        var entry = Self.entry
        entry.message = String(repeating: "x", count: 4000)
        let count = PluginLogFile.rotationBytes / 4000 + 20
        for index in 0..<count {
            entry.time = UInt64(index)
            #expect(file.append(entry))
        }
        let output = PluginLogFile.Part.pluginOutput
        #expect(FileManager.default.fileExists(atPath: file.rotatedPath(of: output)))
        #expect(Self.size(file.path(of: output)) <= PluginLogFile.rotationBytes)
        #expect(Self.size(file.rotatedPath(of: output)) <= PluginLogFile.rotationBytes)
        let times = file.entries().map(\.time)
        #expect(times == times.sorted())
        #expect(times.last == UInt64(count - 1))
    }

    static func size(_ path: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }

    /// A plugin logging 130 lines of 8 KiB in each of three launches once rolled both files over
    /// within its rate limit, and the owner's approvals and other plugins' crashes went with them.
    @Test("plugin text never rotates away the owner's decisions or plugind's events: they have a file of their own")
    func eventsSurvivePluginText() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = PluginLogFile(directory: directory.path + "/logs")
        let approval = PluginLogEntry(time: 1, priority: 5, event: .approve, message: "approved by the owner", plugin: "org.example.x")
        let crash = PluginLogEntry(time: 2, priority: 3, event: .crash, message: "org.other crashed", plugin: "org.other")
        #expect(file.append(approval) && file.append(crash))
        var line = Self.entry
        line.message = String(repeating: "y", count: PluginLogEntry.maximumMessageBytes)
        for index in 0..<(3 * PluginLogFile.rotationBytes / PluginLogEntry.maximumMessageBytes) {
            line.time = UInt64(10 + index)
            #expect(file.append(line))
        }
        let events = file.entries().filter { $0.event != .log }
        #expect(events == [approval, crash])
        #expect(Self.size(file.path(of: .events)) < 4096)
    }

    @Test("what another process of the user wrote into the log is read bounded: long and broken lines are skipped")
    func hostileLogLines() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = PluginLogFile(directory: directory.path + "/logs")
        #expect(file.append(Self.entry))
        let handle = try #require(FileHandle(forWritingAtPath: file.path(of: .pluginOutput)))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"not\": \"an entry\"}\n\u{0}\u{1B}garbage\n".utf8))
        try handle.write(contentsOf: Data(repeating: UInt8(ascii: "z"), count: PluginLogFile.maximumLineBytes + 1) + Data("\n".utf8))
        try handle.close()
        var later = Self.entry
        later.time += 1
        #expect(file.append(later))
        #expect(file.entries() == [Self.entry, later])
        // A file grown far past its bound is read from its last `readLimit` bytes only.
        #expect(
            FileManager.default.createFile(
                atPath: file.path(of: .events), contents: Data(repeating: UInt8(ascii: "\n"), count: 2 * PluginLogFile.readLimit)))
        let read = file.lines(of: file.path(of: .events), from: 0)
        #expect(read.lines.isEmpty && read.end == 2 * PluginLogFile.readLimit)
    }

    @Test("a plugin's lines are bounded in bytes across its workers, and refusals of the sandbox in number; the excess is counted")
    func pluginBudgets() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let writer = PluginLogWriter(sink: .file(directory: directory.path + "/logs"))
        let now = ContinuousClock.now
        var line = Self.entry
        line.message = String(repeating: "w", count: PluginLogEntry.maximumMessageBytes)
        for _ in 0..<390 { writer.submitPluginLine(line, at: now) }
        var refusal = Self.entry
        (refusal.event, refusal.message) = (.refusal, "socket(AF_INET) refused")
        for _ in 0..<3000 { writer.submitRefusal(refusal, at: now) }
        // Another plugin keeps a budget of its own.
        var other = line
        other.plugin = "org.example.other"
        writer.submitPluginLine(other, at: now)
        writer.flushDropped(plugin: line.plugin, like: line)
        await writer.waitForPendingEntries()

        let entries = PluginLogFile(directory: directory.path + "/logs").entries()
        let lines = entries.filter { $0.event == .log && $0.plugin == line.plugin }
        let budget = PluginLogBudget.bytesPerPlugin().burst
        #expect(lines.count == Int(budget) / (PluginLogEntry.maximumMessageBytes + 256))
        #expect(entries.filter { $0.event == .log && $0.plugin == "org.example.other" }.count == 1)
        let refusals = entries.filter { $0.event == .refusal }
        #expect(refusals.filter { $0.message == refusal.message }.count == Int(PluginLogBudget.refusalsPerPlugin().burst))
        #expect(refusals.contains { $0.message.hasPrefix("\(3000 - Int(PluginLogBudget.refusalsPerPlugin().burst)) more refusal(s)") })
        #expect(entries.contains { $0.event == .dropped && $0.message.hasPrefix("\(390 - lines.count) log line(s)") })
    }
}
