import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// A LADSPA library of the suite's own (Tests/Fixtures/ForeignABI/hostile_ladspa.c) whose plugins
/// read one of the owner's files, connect to a socket listening on the loopback, crash and hang
/// in `run`: in-process (the reference host) they do it; confined they cannot, and the host gets
/// a typed error naming the plugin.
@Suite("Hostile LADSPA plugins, confined", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct ForeignPluginHostileTests {
    /// A listening TCP socket on 127.0.0.1 and its port.
    static func listener() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound, listen(descriptor, 8) == 0 else { throw TestFailure("bind or listen: \(errno)") }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    struct Library {
        var test: TestHost
        var path: String
        var reference: String
        var secret: String
    }

    static func build(port: UInt16) async throws -> Library {
        let test = try TestHost()
        let secret = test.directory.path + "/owner-secret.txt"
        try Data("the owner's".utf8).write(to: URL(fileURLWithPath: secret))
        let source = try String(
            contentsOfFile: BuiltProducts.packageRoot + "/Tests/Fixtures/ForeignABI/hostile_ladspa.c", encoding: .utf8)
        let directory = test.directory.path + "/ladspa"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/hostile_ladspa.so"
        try await CCompiler.sharedLibrary(source, output: path, flags: ["-DHOSTILE_TARGET=\"\(secret)\"", "-DHOSTILE_PORT=\(port)"])
        let reference = try await ForeignPluginTests.reference("ladspa_reference", in: test.directory.path)
        for label in ["read_file", "open_socket", "crash_in_run", "hang_in_run", "scribble"] {
            try ForeignPluginTests.writeManifest(
                test, identifier: "ladspa.hostile-ladspa." + label.replacing("_", with: "-"), library: path,
                adapter: ["abi": "ladspa", "plugin": label, "buffers": 2], point: "org.plugind.tests.audio")
        }
        return Library(test: test, path: path, reference: reference, secret: secret)
    }

    /// The first two output samples of `label` in-process (the reference host) and confined, and
    /// what the sandbox reported refusing the confined plugin.
    static func firstSamples(_ label: String, _ library: Library) async throws -> (
        inProcess: [Float], confined: [Float], refusals: [AppExtensionMessage.SandboxRefusal]
    ) {
        let input = library.test.directory.path + "/in.f32"
        let output = library.test.directory.path + "/out.f32"
        try Data(ForeignPluginTests.bytes([Float](repeating: 0.25, count: 64))).write(to: URL(fileURLWithPath: input))
        let ran = try await ForeignPluginTests.run(library.reference, [library.path, label, "48000", "64", "64", input, output])
        #expect(ran.status == 0, "\(ran.stderr)")
        let inProcess = try Data(contentsOf: URL(fileURLWithPath: output)).withUnsafeBytes {
            Array($0.bindMemory(to: Float.self).prefix(2))
        }

        let identifier = "ladspa.hostile-ladspa." + label.replacing("_", with: "-")
        let process = try await AppExtensionProcess(configuration: try library.test.configuration(identifier))
        let effect = try await AudioEffect(process: process, sampleRate: 48_000, maximumFrames: 64)
        let messages = effect.messages()
        try effect.withSamples(port: 0) { $0.update(repeating: 0.25) }
        try await effect.run(frames: 64)
        let confined = try effect.withSamples(port: 1) { Array($0.prefix(2)) }
        // The stream ends with the worker: every report sent before its end is in it.
        await process.invalidateAndWait()
        var refusals: [AppExtensionMessage.SandboxRefusal] = []
        for await message in messages {
            if case .sandboxRefusal(let refusal) = message { refusals.append(refusal) }
        }
        return (inProcess, confined, refusals)
    }

    @Test("Confined, a LADSPA plugin cannot read the owner's file or reach a socket on the loopback that it reaches in-process")
    func noFilesNoNetwork() async throws {
        let (listening, port) = try Self.listener()
        defer { close(listening) }
        let library = try await Self.build(port: port)
        defer { library.test.remove() }
        guard getuid() == 0 else {
            // Not root: the library is the user's own, not a package's, and is refused by name.
            do {
                _ = try await AppExtensionProcess(configuration: try library.test.configuration("ladspa.hostile-ladspa.read-file"))
                Issue.record("a library the user owns was launched")
            } catch {
                #expect("\(error)".contains("is refused") && "\(error)".contains("owned by"), "\(error)")
            }
            return
        }
        let read = try await Self.firstSamples("read_file", library)
        #expect(read.inProcess[0] == 1, "in-process the plugin opens \(library.secret)")
        #expect(read.confined[0] < 0, "confined the open fails (−errno): \(read.confined[0])")

        let socket = try await Self.firstSamples("open_socket", library)
        #expect(socket.inProcess == [1, 1], "in-process the plugin connects to 127.0.0.1:\(port)")
        #expect(socket.confined[1] != 1, "confined no connection is made: socket \(socket.confined[0]), connect \(socket.confined[1])")
        // And says so: what it needs beyond no permissions reaches the host as a refusal report. (The
        // file above lies under /tmp, which the worker's view holds as its own scratch space: there
        // it is simply absent, not refused.)
        #expect(socket.refusals.contains { $0.call == "socket" || $0.call == "connect" }, "\(socket.refusals)")
    }

    @Test(
        "A LADSPA plugin that crashes, hangs or writes past its buffers in run: a typed error naming it, the host and the next plugin unharmed"
    )
    func crashAndHang() async throws {
        var library = try await Self.build(port: 9)
        defer { library.test.remove() }
        guard getuid() == 0 else { return }  // the library is refused for an ordinary user: see noFilesNoNetwork
        // A LADSPA run cannot see a cancellation: the hung worker is ended after this grace (the
        // suite's hosts wait a minute, for busy machines).
        library.test.host.cancellationGracePeriod = .milliseconds(200)
        try await Self.expectRunFailures(library) { effect in
            do {
                try await effect.run(frames: 64, timeout: .seconds(2))
                return nil
            } catch { return error as? AppExtensionError }
        }
        // The next plugin of the same library runs.
        let read = try await Self.firstSamples("read_file", library)
        #expect(read.confined.count == 2)
    }

    /// One block of each plugin that crashes, hangs (the block's deadline is 2 s) or writes past
    /// its buffers in `run`, through `runBlock`: its typed error, naming it; its worker gone after.
    static func expectRunFailures(_ library: Library, _ runBlock: (AudioEffect) async -> AppExtensionError?) async throws {
        // A scribbler faults off the end of its buffers' memory; whatever it hit first, the worker
        // ends and the host says so.
        let cases: [(String, Set<AppExtensionError.Code>)] = [
            ("crash_in_run", [.workerCrashed]), ("hang_in_run", [.timedOut]),
            ("scribble", [.workerCrashed, .protocolViolation, .workerExited]),
        ]
        for (label, expected) in cases {
            let identifier = "ladspa.hostile-ladspa." + label.replacing("_", with: "-")
            let process = try await AppExtensionProcess(configuration: try library.test.configuration(identifier))
            let effect = try await AudioEffect(process: process, sampleRate: 48_000, maximumFrames: 64)
            let failure = await runBlock(effect)
            #expect(failure.map { expected.contains($0.code) } == true, "\(label): \(String(describing: failure))")
            #expect(failure?.pluginIdentifier == identifier)
            _ = await process.waitForTermination()
            await process.invalidateAndWait()
        }
    }

    /// `body` on a thread of its own, as a real-time audio thread calls `render`.
    static func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in Thread.detachNewThread { continuation.resume(returning: body()) } }
    }

    @Test(
        "Blocks rung through the doorbell: a crash, a hang or a scribble is the plugin's typed error; a second thread is refused; an ended worker ends the wait"
    )
    func doorbell() async throws {
        var library = try await Self.build(port: 9)
        defer { library.test.remove() }
        guard getuid() == 0 else { return }  // the library is refused for an ordinary user: see noFilesNoNetwork
        library.test.host.cancellationGracePeriod = .milliseconds(200)
        try await Self.expectRunFailures(library) { effect in
            await Self.onThread { () -> AppExtensionError? in
                do throws(AppExtensionError) {
                    try effect.render(frames: 64, timeout: .seconds(2))
                    return nil
                } catch { return error }
            }
        }

        // Two threads ring one hung effect: one is refused at once; the other waits until the
        // worker ends, not for its deadline.
        let identifier = "ladspa.hostile-ladspa.hang-in-run"
        let process = try await AppExtensionProcess(configuration: try library.test.configuration(identifier))
        let effect = try await AudioEffect(process: process, sampleRate: 48_000, maximumFrames: 64)
        let render: @Sendable () -> AppExtensionError? = {
            do throws(AppExtensionError) {
                try effect.render(frames: 64, timeout: .seconds(600))
                return nil
            } catch { return error }
        }
        await withTaskGroup(of: AppExtensionError?.self) { group in
            group.addTask { await Self.onThread(render) }
            group.addTask { await Self.onThread(render) }
            let first = await group.next() ?? nil
            #expect(first?.code == .invalidArguments && first?.reason.contains("another thread") == true, "\(String(describing: first))")
            process.invalidate()
            let second = await group.next() ?? nil
            #expect(second != nil && second?.code != .invalidArguments, "\(String(describing: second))")
            #expect(second?.pluginIdentifier == identifier)
        }
        await process.invalidateAndWait()

        // The next plugin of the same library runs.
        let read = try await Self.firstSamples("read_file", library)
        #expect(read.confined.count == 2)
    }
}
