import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

@testable import ExtensionFoundation

/// The owner's log is where the owner looks after something went wrong: no plugin may empty it.
/// Reproduces the review's attack with the per-user log file (every machine without journald):
/// three launches of a plugin logging 130 lines of 8 KiB each, within the line rate.
@Suite("A plugin cannot push the owner's history out of the log", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct PluginLogBudgetTests {
    @Test(
        "three launches logging 130 lines of 8 KiB keep the owner's approval and plugind's events, and the plugin's lines within its budget"
    )
    func floodKeepsHistory() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyHostileProbe")
        _ = try test.install(fixture, bundled: false)
        let item = try #require(Inventory.take(host: test.host, catalog: Catalog()).item(fixture.identifier))
        try PolicyEditor(for: test.host, administrator: false).approve(item.entry)
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<3 {
            let process = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
            let answer = try await process.makeConnection().send(Array("log-flood 130 8192".utf8), timeout: .seconds(600))
            #expect(String(decoding: answer, as: UTF8.self).contains("flooded the log"))
            await process.invalidateAndWait()
        }
        let elapsed = clock.now - start
        PluginLogWriter.waitForAllPendingEntries(timeout: .seconds(120))

        let entries = PluginLogFile(directory: test.host.stateDirectory.appendingPathComponent("logs").path).entries()
        #expect(entries.contains { $0.event == .approve && $0.plugin == fixture.identifier }, "\(entries.map(\.event))")
        let lines = entries.filter { $0.event == .log && $0.plugin == fixture.identifier }
        let logged = lines.reduce(0) { $0 + $1.message.utf8.count }
        // At most the burst and what the rate refilled while the launches ran (a slower machine
        // only allows more), and some of the 3 MiB refused and counted.
        let budget = PluginLogBudget.bytesPerPlugin()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(Double(logged) <= budget.burst + budget.rate * (seconds + 1), "\(logged) bytes in \(seconds) s")
        #expect(lines.count < 3 * 130)
        #expect(entries.contains { $0.event == .dropped && $0.plugin == fixture.identifier })
    }
}
