import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

@Suite(
    "A runtime of its own: workers, pools and discovery kept apart, and ended by its shutdown", .tags(.process), .timeLimit(.minutes(10)))
struct PlugindRuntimeTests {
    @Test("what a host does under a runtime of its own is held there, not in the shared one; shutdown ends all of it")
    func privateRuntime() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo"))
        let interruptions = InterruptionCounter()
        let configuration = try test.configuration("org.plugind.tests.echo", onInterruption: interruptions.handler)
        let runtime = PlugindRuntime()
        defer { runtime.shutdown() }
        let process = try await runtime.withRuntime { try await AppExtensionProcess(configuration: configuration) }
        let engine = MonitorEngine(host: test.host, runtime: runtime)
        try await engine.refreshNow()
        #expect(try await process.makeConnection().send(Array("ping".utf8)) == Array("ping".utf8))
        await runtime.withRuntime { await LaunchPool.settleAll() }

        let held = runtime.holdings
        let shared = PlugindRuntime.shared.holdings
        #expect(held.workers == [process.processIdentifier])
        #expect(!shared.workers.contains(process.processIdentifier))
        #expect(!held.launchers.isEmpty, "the launch went through a pool of the runtime's own")
        #expect(Set(held.launchers).isDisjoint(with: shared.launchers))
        #expect(held.discoveringHosts == [test.host.identifier])
        let children = held.workers + held.launchers + held.spares
        #expect(children.allSatisfy(ProcessInspection.exists))

        runtime.shutdown()
        // The worker is asked to end, the pool's launchers and spares are ended: every process the
        // runtime started exits (waited for on its pidfd, a generous backstop for a busy machine).
        _ = await process.waitForTermination()
        for pid in children {
            #expect(ProcessInspection.waitForExit(pid, milliseconds: 120_000), "process \(pid) of the runtime still runs")
        }
        let after = runtime.holdings
        #expect(after.workers.isEmpty && after.launchers.isEmpty && after.spares.isEmpty && after.discoveringHosts.isEmpty)
        let sent = await #expect(throws: AppExtensionError.self) { try await process.makeConnection().send([1]) }
        #expect(sent != nil)
        // Nothing launches in a runtime that was shut down; the shared one is untouched.
        let refused = await #expect(throws: AppExtensionError.self) {
            try await runtime.withRuntime { try await AppExtensionProcess(configuration: configuration) }
        }
        #expect(refused?.code == .invalidated)
        #expect(refused?.description.contains("shut down") == true)
        _ = engine
    }
}
