import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// What the sandbox refused the plugin, reported to the host with the layer that said no.
@Suite("Sandbox refusals, reported", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct SandboxRefusalTests {
    /// Sends each request to a probe without permissions and returns the answers and the refusals
    /// its connection heard.
    private func refusals(for requests: [String], in test: TestHost) async throws -> (
        answers: [String], refusals: [AppExtensionMessage.SandboxRefusal]
    ) {
        let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe"))
        let connection = try await process.makeConnection()
        let messages = connection.messages()
        var answers: [String] = []
        for request in requests {
            answers.append(String(decoding: try await connection.send(Array(request.utf8)), as: UTF8.self))
        }
        // The stream ends with the worker: every report sent before its end is in it.
        await process.invalidateAndWait()
        var refusals: [AppExtensionMessage.SandboxRefusal] = []
        for await message in messages {
            if case .sandboxRefusal(let refusal) = message { refusals.append(refusal) }
        }
        return (answers, refusals)
    }

    @Test(
        "socket(AF_INET), a connect to a socket outside the view and ptrace: each reported with its layer; the plugin still gets its errno")
    func reported() async throws {
        let test = try TestHost()
        defer { test.remove() }
        // A socket that exists on the host, outside anything the plugin's view holds.
        let path = test.directory.path + "/outside.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path.utf8CString.withUnsafeBytes($0.copyMemory) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(listener, 1) == 0)

        let (answers, refusals) = try await refusals(for: ["socket-inet", "connect-stream \(path)", "ptrace"], in: test)
        #expect(answers == ["refused EACCES", "refused ENOENT", "refused EPERM"])
        #expect(refusals.count == 3, "\(refusals)")
        #expect(
            refusals.first { $0.call == "socket" }.map { ($0.detail, $0.layer, $0.errorNumber) } ?? ("", .view, 0) == (
                "AF_INET", .seccomp, EACCES
            ))
        #expect(refusals.first { $0.call == "connect" }.map { ($0.detail, $0.layer) } ?? ("", .seccomp) == (path, .view))
        #expect(refusals.first { $0.call == "ptrace" }?.layer == .seccomp)
        let socketLine = refusals.first { $0.call == "socket" }?.description
        #expect(socketLine == "the sandbox refused socket(AF_INET): the plugin has no network permission (seccomp, Permission denied)")
        // Counted for 'plugind info' once the process ended.
        await CrashRecorder.waitForPendingRecords()
        let recorded = try CrashLog(host: test.host).read().get().plugins["org.plugind.tests.faultyhostileprobe"]?.refusals
        #expect(recorded?.count == 3)
        #expect(recorded?.last.hasPrefix("the sandbox refused ptrace(") == true, "\(String(describing: recorded))")
    }

    @Test("a plugin refused in a loop: at most 8 reports a second reach the host, the others are counted")
    func bounded() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let started = ContinuousClock.now
        let (answers, refusals) = try await refusals(for: Array(repeating: "socket-inet", count: 64), in: test)
        // The limit counts per second of the monotonic clock: a run of t seconds touches at most
        // floor(t) + 2 of them.
        let seconds = Int((ContinuousClock.now - started).components.seconds) + 2
        #expect(answers.allSatisfy { $0 == "refused EACCES" })
        #expect(!refusals.isEmpty)
        #expect(refusals.count <= 8 * seconds, "\(refusals.count) reports in \(seconds) s")
        #expect(refusals.count + refusals.reduce(0) { $0 + $1.droppedBefore } <= 64)
    }
}
