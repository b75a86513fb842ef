import Foundation
import TestSupport
import Testing

@testable import plugind

@Suite("plugind top's table and logs --since times, without a terminal", .tags(.unit))
struct TopAndSinceTests {
    static func row(_ plugin: String, cpu: Double, memory: UInt64, answered: UInt64, host: Int32) -> WorkerTable.Row {
        WorkerTable.Row(
            plugin: plugin, pluginVersion: "1", hostIdentifier: "org.example", hostExecutable: "/bin/host", hostPID: host,
            workerPID: host + 1, user: "me", state: "running", cpuPercent: cpu, cpuSeconds: 0, memoryBytes: memory,
            memoryLimitBytes: 1 << 30, requestsAnswered: answered, requestsFailed: 0, requestsInFlight: 0, uptimeSeconds: 65)
    }

    @Test("rows sort by the chosen key, ties by pid; identifiers are whole and inert; uptime reads as a clock")
    func table() {
        var model = TopModel()
        model.rows = [
            Self.row("org.a", cpu: 1, memory: 300, answered: 5, host: 10),
            Self.row("org.b\u{1B}[2J", cpu: 9, memory: 100, answered: 1, host: 20),
            Self.row("org.c.with.a.rather.long.identifier.indeed", cpu: 9, memory: 200, answered: 9, host: 5),
        ]
        #expect(model.sortedRows.map(\.hostPID) == [5, 20, 10])
        model.sort = .memory
        #expect(model.sortedRows.map(\.hostPID) == [10, 5, 20])
        model.sort = .requests
        #expect(model.sortedRows.map(\.hostPID) == [5, 10, 20])
        model.sort = .plugin
        let lines = model.tableLines(showUser: false)
        #expect(lines.count == 4 && lines[0].hasPrefix("PLUGIN"))
        #expect(lines.contains { $0.contains("org.c.with.a.rather.long.identifier.indeed ") })
        #expect(!lines.joined().contains("\u{1B}") && lines.joined().contains("org.b\\e[2J"))
        #expect(lines[1].contains("1:05"))
        #expect(TopModel.uptime(3 * 86400 + 7200) == "3d 2h")
    }

    @Test("--since takes dates, times, today, yesterday and relative times; anything else is refused")
    func since() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15 08:00:00 UTC
        #expect(SinceTime.parse("2027-01-15", now: now, timeZone: utc) == 1_799_971_200_000_000)
        #expect(SinceTime.parse("2027-01-15 08:00", now: now, timeZone: utc) == 1_800_000_000_000_000)
        #expect(SinceTime.parse("2027-01-15T08:00:00Z", now: now, timeZone: utc) == 1_800_000_000_000_000)
        #expect(SinceTime.parse("07:30", now: now, timeZone: utc) == 1_799_998_200_000_000)
        #expect(SinceTime.parse("today", now: now, timeZone: utc) == 1_799_971_200_000_000)
        #expect(SinceTime.parse("yesterday", now: now, timeZone: utc) == 1_799_884_800_000_000)
        #expect(SinceTime.parse("-10m", now: now, timeZone: utc) == 1_799_999_400_000_000)
        #expect(SinceTime.parse("-1d", now: now, timeZone: utc) == 1_799_913_600_000_000)
        for bad in ["", "last tuesday", "-10x", "-m", "2027-13-45", "--5m"] {
            #expect(SinceTime.parse(bad, now: now, timeZone: utc) == nil, "\(bad)")
        }
    }
}
