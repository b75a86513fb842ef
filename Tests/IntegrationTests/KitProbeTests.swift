import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// The C++, Rust and Go plugin kits, each through its probe (ExamplePlugins/Testing/*KitProbe,
/// Kits/Rust/probe, Kits/Go/probe), which answers the same requests: per-connection state, the
/// host's identifier, an ask, a thrown exception or panic, an error with its code, an answer over
/// the message limit, and an ask on a connection the host closed. Every failure must reach the
/// host as an error value while the worker keeps serving.
/// The time limit is a backstop: the probes' cargo and go builds take many minutes on a loaded
/// small machine.
@Suite("Plugin kits: C++, Rust, Go", .tags(.process, .slow), .serialized, .timeLimit(.minutes(20)))
struct KitProbeTests {
    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func launch(_ kit: PluginKitBuild, _ test: TestHost) async throws -> AppExtensionProcess {
        let library = try await kit.probeLibrary()
        var limits: [String: UInt64] = ["maxMessageBytes": 1 << 20]
        var host = test
        if let memory = kit.memoryBytes {
            limits["memoryBytes"] = memory
            host.host.limits.memoryBytes = memory
        }
        try host.install(
            PluginFixture(
                library: "KitProbe", identifier: "org.plugind.tests.kitprobe", extra: ["limits": limits, "concurrency": 4],
                libraryPath: library))
        return try await AppExtensionProcess(configuration: host.configuration("org.plugind.tests.kitprobe"))
    }

    @Test("state per connection, the host's identifier, an ask; errors keep their code", arguments: PluginKitBuild.allCases)
    func serves(kit: PluginKitBuild) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(kit, test)
        defer { process.invalidate() }
        let first = try await process.makeConnection(requestHandler: { question in Array("re: ".utf8) + question })
        let second = try await process.makeConnection()
        #expect(text(try await first.send(Array("count".utf8))) == "1")
        #expect(text(try await first.send(Array("count".utf8))) == "2")
        #expect(text(try await second.send(Array("count".utf8))) == "1")
        #expect(text(try await second.send(Array("host".utf8))) == test.host.identifier)
        #expect(text(try await first.send(Array("ask:who?".utf8))) == "answer:re: who?")
        let failed = await #expect(throws: AppExtensionError.self) { try await first.send(Array("error".utf8)) }
        #expect(failed?.code == .pluginError && failed?.pluginErrorCode == 7)
        #expect(failed?.reason.contains("asked to fail") == true, "\(failed?.reason ?? "")")
        // Without a request handler the host cannot be asked: an error value in the plugin.
        let unanswered = await #expect(throws: AppExtensionError.self) { try await second.send(Array("ask:who?".utf8)) }
        #expect(unanswered?.pluginErrorCode == 5, "\(unanswered?.reason ?? "")")
    }

    @Test(
        "an exception or panic, an oversized answer: plugin errors naming them, and the worker keeps serving",
        arguments: PluginKitBuild.allCases)
    func failures(kit: PluginKitBuild) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(kit, test)
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        #expect(text(try await connection.send(Array("count".utf8))) == "1")
        let thrown = await #expect(throws: AppExtensionError.self) { try await connection.send(Array("throw".utf8)) }
        #expect(thrown?.code == .pluginError, "\(String(describing: thrown))")
        #expect(thrown?.reason.contains(kit.thrownDescription) == true, "\(thrown?.reason ?? "")")
        let oversized = await #expect(throws: AppExtensionError.self) { try await connection.send(Array("oversized".utf8)) }
        #expect(oversized?.code == .limitExceeded, "\(String(describing: oversized))")
        #expect(oversized?.reason.contains("message limit") == true, "\(oversized?.reason ?? "")")
        #expect(text(try await connection.send(Array("count".utf8))) == "2", "the same worker, the same connection state")
    }

    @Test("an ask on a connection the host closed is an error value in the plugin, not a crash", arguments: PluginKitBuild.allCases)
    func askAfterClose(kit: PluginKitBuild) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(kit, test)
        defer { process.invalidate() }
        let closing = try await process.makeConnection(requestHandler: { _ in Array("yes".utf8) })
        #expect(text(try await closing.send(Array("remember".utf8))) == "remembered")
        #expect(text(try await closing.send(Array("ask-remembered".utf8))) == "answered:yes")
        closing.close()
        let other = try await process.makeConnection()
        let answer = text(try await other.send(Array("ask-remembered".utf8)))
        #expect(answer == "ask failed:\(ECONNRESET)" || answer == "ask failed:\(EINVAL)", "\(answer)")
        #expect(text(try await other.send(Array("count".utf8))) == "1")
    }

    @Test("a host the plugin refuses gets connectionRefused with the plugin's reason", arguments: PluginKitBuild.allCases)
    func refusal(kit: PluginKitBuild) async throws {
        let test = try TestHost(identifier: "org.plugind.untrusted")
        defer { test.remove() }
        let process = try await launch(kit, test)
        defer { process.invalidate() }
        let error = await #expect(throws: AppExtensionError.self) { try await process.makeConnection() }
        #expect(error?.code == .connectionRefused)
        #expect(error?.reason.contains("KitProbe does not serve org.plugind.untrusted") == true, "\(error?.reason ?? "")")
    }
}
