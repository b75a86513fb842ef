import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@Suite("Quarantine after repeated crashes", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct QuarantineTests {
    func crashOnce(_ test: TestHost, _ identifier: String) async throws {
        let process = try await AppExtensionProcess(configuration: try test.configuration(identifier))
        _ = try? await process.makeConnection().send([])
        _ = await process.waitForTermination()
        await CrashRecorder.waitForPendingRecords()
    }

    @Test("three crashes quarantine a plugin with the reason; clearing or new bytes lift it")
    func quarantine() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultySegfault")
        let bundle = try test.install(fixture)
        for _ in 0..<2 { try await crashOnce(test, fixture.identifier) }
        // Two crashes: still allowed.
        try await crashOnce(test, fixture.identifier)

        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .quarantined)
        #expect(
            error?.reason.contains("3 crashes within 5 min") == true || error?.reason.contains("3 crashes within 300 s") == true,
            "\(error?.reason ?? "")")
        #expect(error?.reason.contains("crashed with SIGSEGV") == true)
        #expect(error?.reason.contains("plugind quarantine clear \(fixture.identifier)") == true)

        let record = try #require((try CrashLog(host: test.host).read().get()).plugins[fixture.identifier])
        #expect(record.crashes.count == 3)
        #expect(record.crashes.allSatisfy { $0.output.contains("about to dereference NULL") })
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: fixture.extensionPoint))
        #expect(monitor.identities.isEmpty)
        #expect(monitor.diagnostics.map(\.kind) == [.quarantined])

        // New bytes: the quarantine no longer applies.
        try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo"))).write(
            to: URL(fileURLWithPath: bundle + "/libFaultySegfault.so"))
        #expect(Inventory.take(host: test.host, catalog: Catalog()).item(fixture.identifier)?.isAvailable == true)

        // The old bytes again: quarantined again, until cleared.
        try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("FaultySegfault"))).write(
            to: URL(fileURLWithPath: bundle + "/libFaultySegfault.so"))
        #expect(Inventory.take(host: test.host, catalog: Catalog()).item(fixture.identifier)?.isAvailable == false)
        #expect(try CrashLog(host: test.host).clear(fixture.identifier))
        #expect(Inventory.take(host: test.host, catalog: Catalog()).item(fixture.identifier)?.isAvailable == true)
    }

    @Test("invalidated processes and plugin errors do not count as crashes")
    func noFalseCrashes() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyHang")
        try test.install(fixture)
        for _ in 0..<4 {
            let process = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
            await process.invalidateAndWait()
        }
        await CrashRecorder.waitForPendingRecords()
        #expect((try CrashLog(host: test.host).read().get()).plugins[fixture.identifier] == nil)
    }
}
