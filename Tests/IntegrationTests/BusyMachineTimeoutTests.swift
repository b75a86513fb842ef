import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Timeouts of real workers, whose reason may say the machine was busy. Whether it does depends on
/// the machine's load while the test runs, which no test controls: each accepts the reason with or
/// without the sentence and checks that it is well-formed either way (the decision itself is
/// `ProcessorWaitTests`'s, on numbers).
@Suite("Timeouts of real workers and the machine's load", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct BusyMachineTimeoutTests {
    /// `reason` is `plain`, or `plain` and the sentence that the worker waited for a processor.
    static func expectWellFormed(_ reason: String?, plain: String, window: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let reason else {
            Issue.record("no error", sourceLocation: sourceLocation)
            return
        }
        if reason == plain { return }
        let number = #"[0-9]+(\.[0-9])?"#
        let unit = #"(ms|s|min|h)"#
        let sentence =
            "; the machine was busy: the worker waited (about |at least )?\(number) \(unit) of the \(NSRegularExpression.escapedPattern(for: window)) for a processor"
            + "(, at the rate it has waited since it started \(number) \(unit) ago)?"
            + #"( \((CPU pressure [0-9]+%)?(, )?(load average [0-9]+\.[0-9]{2} on [0-9]+ processors?)?\))?"#
            + "; a longer timeout may help"
        let pattern = "^" + NSRegularExpression.escapedPattern(for: plain) + sentence + "$"
        #expect(reason.range(of: pattern, options: .regularExpression) != nil, "\(reason)", sourceLocation: sourceLocation)
    }

    @Test("a request that hangs hits its deadline: the reason names the deadline, and the machine's load only as a whole sentence")
    func requestDeadline() async throws {
        var test = try TestHost()
        defer { test.remove() }
        // The kill after the grace is not this test's business; it only ends the hung worker soon.
        test.host.cancellationGracePeriod = .milliseconds(500)
        let process = try await test.launch(PluginFixture(library: "FaultyHang"))
        let error = await #expect(throws: AppExtensionError.self) {
            try await process.makeConnection().send([], timeout: .milliseconds(300))
        }
        #expect(error?.code == .timedOut)
        Self.expectWellFormed(error?.reason, plain: "request did not finish within 300 ms", window: "300 ms")
        _ = await process.waitForTermination()
    }

    @Test("a plugin that hangs while loading hits the launch timeout: the same, for the launch")
    func launchTimeout() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.launchTimeout = .milliseconds(500)
        let fixture = PluginFixture(library: "FaultyHangAtLoad")
        try test.install(fixture)
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .timedOut)
        Self.expectWellFormed(
            error?.reason, plain: "did not finish loading within 500 ms; its worker was killed", window: "500 ms")
    }

    @Test("the host reads a confined worker's threads from /proc: the serving threads, what each ran and waited")
    func readsWorker() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let connection = try await process.makeConnection()
        #expect(try await connection.send(Array("ping".utf8)) == Array("ping".utf8))
        // Not dumpable, in namespaces of its own, under another uid for a root host: still
        // readable, or a timeout could never say the machine was busy.
        let wait = try #require(ProcessorWait.read(processIdentifier: process.processIdentifier))
        // The first thread, which only waits, and the one that loaded the plugin and serves.
        #expect(wait.threads.count >= 2, "\(wait.threads)")
        #expect(wait.threads.contains { $0.ran > .zero })
        #expect(wait.threads.allSatisfy { $0.waited >= .zero && $0.age >= .zero })
        await process.invalidateAndWait()
    }
}
