import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindPolicyEditing
import PlugindSystem
import TestSupport
import Testing

/// Signals from a request handler to the test: each call, and a way to hold calls until released.
private final class HandlerProbe: Sendable {
    private let calls = AsyncStream<String>.makeStream()
    private let cancelled = AsyncStream<String>.makeStream()
    private let released = Locked<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A handler that reports each ask, then waits until its task is cancelled (and reports that).
    var holding: @Sendable ([UInt8]) async throws -> [UInt8] {
        { [calls, cancelled] bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            calls.continuation.yield(text)
            do {
                try await Task.sleep(for: .seconds(600))
            } catch {
                cancelled.continuation.yield(text)
                throw error
            }
            return []
        }
    }

    /// A handler that reports each ask, then holds it until `release()` and answers "held".
    var holdingUntilReleased: @Sendable ([UInt8]) async throws -> [UInt8] {
        { [calls, released] bytes in
            calls.continuation.yield(String(decoding: bytes, as: UTF8.self))
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = released.withLock { state -> Bool in
                    if state.done { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
            return Array("held".utf8)
        }
    }

    /// Lets every call `holdingUntilReleased` holds, and every later one, answer.
    func release() {
        let waiters = released.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func nextCall() async -> String? {
        var iterator = calls.stream.makeAsyncIterator()
        return await iterator.next()
    }

    func nextCancellation() async -> String? {
        var iterator = cancelled.stream.makeAsyncIterator()
        return await iterator.next()
    }
}

@Suite(
    "Connections: the plugin asks the host, accepts or refuses, runs requests at once",
    .tags(.process), .serialized, .timeLimit(.minutes(5))
)
struct ConnectionTests {
    static let probe = "org.plugind.tests.conversationprobe"

    func launch(
        _ test: TestHost, concurrency: Int? = nil, extra: [String: Any] = [:], sharing: AppExtensionProcess.Sharing = .dedicated,
        onInterruption: @escaping @Sendable () -> Void = {}
    ) async throws -> AppExtensionProcess {
        var manifest = extra
        if let concurrency { manifest["concurrency"] = concurrency }
        try test.install(PluginFixture(library: "ConversationProbe", extra: manifest))
        var configuration = try test.configuration(Self.probe, onInterruption: onInterruption)
        configuration.sharing = sharing
        return try await AppExtensionProcess(configuration: configuration)
    }

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test("the greeter asks its host on the request's connection and greets the answer, in C and in Swift")
    func greeters() async throws {
        let test = try TestHost()
        defer { test.remove() }
        for library in ["Greeter", "SwiftGreeter"] {
            try test.install(PluginFixture(library: library, extensionPoint: "org.plugind.examples.greeters"))
            let process = try await AppExtensionProcess(configuration: test.configuration("org.plugind.tests.\(library.lowercased())"))
            let asked = Locked<[String]>([])
            let connection = try await process.makeConnection(requestHandler: { question in
                asked.withLock { $0.append(String(decoding: question, as: UTF8.self)) }
                return Array("Ada".utf8)
            })
            #expect(text(try await connection.send(Array("good morning".utf8))) == "Hello, Ada: good morning")
            #expect(asked.withLock { $0 } == ["name?"])
            // Without a handler the host answers "unsupported"; the greeter says so.
            let silent = try await process.makeConnection()
            let error = await #expect(throws: AppExtensionError.self) { try await silent.send(Array("hi".utf8)) }
            #expect(error?.code == .pluginError)
            #expect(error?.reason.contains("could not ask the host whom to greet") == true, "\(error?.reason ?? "")")
            await process.invalidateAndWait()
        }
    }

    @Test("a handler's error reaches the plugin with its code and message; JSON handlers decode and encode")
    func handlerErrors() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test)
        defer { process.invalidate() }
        let failing = try await process.makeConnection(requestHandler: { _ in
            throw AppExtensionConnection.RequestFailure(code: 42, "no such document")
        })
        #expect(text(try await failing.send(Array("ask:open".utf8))) == "ask failed: \(EREMOTEIO) 42 no such document")

        struct Question: Codable, Sendable { var text: String }
        struct Answer: Codable, Sendable { var length: Int }
        let typed = try await process.makeConnection(requestHandler: { (question: Question) in Answer(length: question.text.count) })
        #expect(text(try await typed.send(Array(#"ask:{"text":"four"}"#.utf8))) == #"{"length":4}"#)
    }

    @Test("asks from a thread the plugin started, and a request nested in an ask runs on the asking thread")
    func threadsAndNesting() async throws {
        let test = try TestHost()
        defer { test.remove() }
        // One request at a time: a nested request could not run otherwise.
        let process = try await launch(test, concurrency: 1)
        defer { process.invalidate() }
        let echoing = try await process.makeConnection(requestHandler: { question in Array("re: ".utf8) + question })
        #expect(text(try await echoing.send(Array("ask-thread:from a thread".utf8))) == "re: from a thread")

        let box = Locked<AppExtensionConnection?>(nil)
        let nesting = try await process.makeConnection(requestHandler: { _ in
            // The handler asks the plugin back, on the same connection, while the plugin waits.
            guard let connection = box.withLock({ $0 }) else { return [] }
            return try await connection.send(Array("count".utf8))
        })
        box.withLock { $0 = nesting }
        #expect(text(try await nesting.send(Array("ask:how many?".utf8))) == "1")
        #expect(text(try await nesting.send(Array("count".utf8))) == "2")
        box.withLock { $0 = nil }
    }

    @Test("a plugin refuses a connection with its reason; accepted ones keep state of their own and the plugin hears them close")
    func acceptRefuseClose() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test, concurrency: 1)
        defer { process.invalidate() }
        let first = try await process.makeConnection()
        let second = try await process.makeConnection()
        #expect(text(try await first.send(Array("count".utf8))) == "1")
        #expect(text(try await first.send(Array("count".utf8))) == "2")
        #expect(text(try await second.send(Array("count".utf8))) == "1")
        first.close()
        // One request at a time, in order: the close runs before this request.
        #expect(text(try await second.send(Array("closed".utf8))) == "1")
        let closed = await #expect(throws: AppExtensionError.self) { try await first.send(Array("count".utf8)) }
        #expect(closed?.code == .connectionClosed)
        // Dropping a connection closes it too.
        do { _ = try await process.makeConnection() }
        #expect(text(try await second.send(Array("closed".utf8))) == "2")

        test.host.identifier = "org.plugind.tests.refused"
        let refusedProcess = try await launch(test)
        defer { refusedProcess.invalidate() }
        let refusal = await #expect(throws: AppExtensionError.self) { _ = try await refusedProcess.makeConnection() }
        #expect(refusal?.code == .connectionRefused)
        #expect(refusal?.reason == "refused the connection: this plugin does not talk to org.plugind.tests.refused")
    }

    @Test("makeConnection has a deadline: a plugin whose accept never returns gets timedOut, and its worker is stopped after the grace")
    func acceptDeadline() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.identifier = "org.plugind.tests.never-accepts"
        // The stop after the grace is what this test checks, not a backstop.
        test.host.cancellationGracePeriod = .milliseconds(500)
        let interruptions = InterruptionCounter()
        let process = try await launch(test, onInterruption: interruptions.handler)
        defer { process.invalidate() }
        let started = ContinuousClock.now
        let late = await #expect(throws: AppExtensionError.self) { _ = try await process.makeConnection(timeout: .milliseconds(300)) }
        #expect(late?.code == .timedOut)
        #expect(late?.reason == "did not accept or refuse the connection in time; it was closed", "\(String(describing: late))")
        // Its own deadline ended the wait, not the default one (the request timeout): how much
        // later than 300 ms is the machine's load, not the host's doing.
        #expect(ContinuousClock.now - started < test.host.limits.requestTimeout)
        // It answers neither the connection nor its close: stopped like a worker that ignores a
        // cancelled request, and the host hears of it.
        await interruptions.firstCall()
        let termination = await process.waitForTermination()
        #expect(termination == .signaled(signal: SIGKILL, name: "SIGKILL"), "\(termination)")
        let after = await #expect(throws: AppExtensionError.self) { _ = try await process.makeConnection() }
        #expect(after != nil)
    }

    @Test("asks nested 60 deep (each handler sends a request that asks again) stop at the bound with ELOOP; the worker lives")
    func nestingBound() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test, concurrency: 1)
        defer { process.invalidate() }
        let box = Locked<AppExtensionConnection?>(nil)
        let depth = Locked(0)
        let nesting = try await process.makeConnection(requestHandler: { _ in
            guard let connection = box.withLock({ $0 }),
                depth.withLock({
                    $0 += 1
                    return $0
                }) < 60
            else { return Array("bottom".utf8) }
            return try await connection.send(Array("ask:deeper".utf8))
        })
        box.withLock { $0 = nesting }
        let answer = text(try await nesting.send(Array("ask:deeper".utf8), timeout: TestHost.requestBackstop))
        box.withLock { $0 = nil }
        // The 17th ask on the thread is refused; that refusal is the answer every level passes up.
        #expect(answer.hasPrefix("ask failed: \(ELOOP) "), "\(answer)")
        // PluginServer.maximumNestingDepth: 16 asks, each answered by a handler.
        #expect(depth.withLock { $0 } == 16, "handlers run: \(depth.withLock { $0 })")
        #expect(text(try await nesting.send(Array("count".utf8))) == "1")
    }

    @Test("closing a connection fails the plugin's waiting ask at once and cancels the handler")
    func closeMidAsk() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test)
        defer { process.invalidate() }
        let handler = HandlerProbe()
        let asking = try await process.makeConnection(requestHandler: handler.holding)
        let other = try await process.makeConnection()
        let request = Task { try await asking.send(Array("ask-wait:are you there?".utf8), timeout: .seconds(60)) }
        #expect(await handler.nextCall() == "are you there?")
        asking.close()
        let error = await #expect(throws: AppExtensionError.self) { try await request.value }
        #expect(error?.code == .connectionClosed)
        #expect(await handler.nextCancellation() == "are you there?")
        // The plugin's ask failed with ECONNRESET, not after its minute: it records the error.
        try await Deadline.wait("the plugin's ask to fail") {
            while try await self.text(other.send(Array("last-ask-error".utf8))) != "\(ECONNRESET)" {}
        }
    }

    @Test("an ask past its deadline fails with ETIMEDOUT and cancels the handler; an ask over the message limit fails at once")
    func askDeadlineAndSize() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test, extra: ["limits": ["maxMessageBytes": 1 << 20]])
        defer { process.invalidate() }
        let handler = HandlerProbe()
        let connection = try await process.makeConnection(requestHandler: handler.holding)
        #expect(text(try await connection.send(Array("ask-slow:late".utf8))) == "ask failed: \(ETIMEDOUT) 0 ")
        #expect(await handler.nextCancellation() == "late")
        #expect(text(try await connection.send(Array("ask-big".utf8))) == "\(EMSGSIZE)")
    }

    @Test("a flood of asks meets 'too many asks' beyond the host's bound, and the host stays responsive")
    func askFlood() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.asksPerConnection = 4
        // Two requests at a time: the flood, and the one that asks the plugin what its asks met.
        let process = try await launch(test, concurrency: 2)
        defer { process.invalidate() }
        let handler = HandlerProbe()
        let connection = try await process.makeConnection(requestHandler: handler.holdingUntilReleased)
        let other = try await process.makeConnection()
        // Five threads ask at once: four asks are held until the test lets them go, the fifth
        // meets the bound. Held by the test, not by a deadline: however slowly a loaded machine
        // starts the threads, the fifth asks while four wait.
        let flood = Task { try await connection.send(Array("ask-many:5:hold".utf8)) }
        for _ in 0..<4 { _ = await handler.nextCall() }
        try await Deadline.wait("the fifth ask to meet the bound") {
            while try await self.text(other.send(Array("last-ask-error".utf8))) != "\(EBUSY)" {}
        }
        handler.release()
        #expect(text(try await flood.value) == "answered=4 busy=1 other=0")
        #expect(text(try await connection.send(Array("count".utf8))) == "1")
    }

    @Test("requests run at once up to the declared concurrency", arguments: [(2, "together"), (1, "alone")])
    func concurrency(declared: Int, outcome: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test, concurrency: declared)
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        async let first = connection.send(Array("together".utf8))
        async let second = connection.send(Array("together".utf8))
        #expect(try await [text(first), text(second)] == [outcome, outcome])
    }

    @Test("a worker running four requests at a time answers every one of 2,000 sent by eight tasks at once")
    func contendedThreads() async throws {
        // Every serving thread takes the transport's and the runtime's locks against the others:
        // a thread whose Swift lock state was inherited stale from the launcher (the process's
        // first thread) crashed the worker here.
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo", extra: ["concurrency": 4])
        try test.install(echo)
        let process = try await AppExtensionProcess(configuration: test.configuration(echo.identifier))
        defer { process.invalidate() }
        let connection = try await process.makeConnection()
        let answered = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var matching = 0
                    for index in 0..<250 {
                        let message = Array("\(task).\(index)".utf8)
                        if try await connection.send(message) == message { matching += 1 }
                    }
                    return matching
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(answered == 2000)
    }

    @Test(
        "a shared worker keeps its handles apart: events reach only the connection whose request posted them; an invalidated handle's connections fail and it opens no more while another keeps the worker"
    )
    func perHandle() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "FaultyHostileProbe"))
        var configuration = try test.configuration("org.plugind.tests.faultyhostileprobe")
        configuration.sharing = .shared
        let first = try await AppExtensionProcess(configuration: configuration)
        let second = try await AppExtensionProcess(configuration: configuration)
        #expect(first.processIdentifier == second.processIdentifier)
        let firstConnection = try await first.makeConnection()
        let secondConnection = try await second.makeConnection()
        func events(_ messages: AppExtensionMessages) -> Task<Int, Never> {
            Task {
                var count = 0
                for await message in messages { if case .event = message { count += 1 } }
                return count
            }
        }
        let firstEvents = events(firstConnection.messages())
        let secondEvents = events(secondConnection.messages())
        #expect(text(try await secondConnection.send(Array("post-events 3 16".utf8))) == "done 3")
        #expect(text(try await firstConnection.send(Array("post-events 2 16".utf8))) == "done 2")

        first.invalidate()
        let closed = await #expect(throws: AppExtensionError.self) { try await firstConnection.send(Array("socket-inet".utf8)) }
        #expect(closed?.code == .connectionClosed, "\(String(describing: closed))")
        let refused = await #expect(throws: AppExtensionError.self) { _ = try await first.makeConnection() }
        #expect(refused?.code == .invalidated, "\(String(describing: refused))")
        #expect(text(try await secondConnection.send(Array("socket-inet".utf8))) == "refused EACCES")
        await second.invalidateAndWait()
        #expect(await firstEvents.value == 2)
        #expect(await secondEvents.value == 3)
    }

    @Test("processes of one identity share a worker until the last lets go; a dedicated one gets its own; every live one hears a crash")
    func sharing() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let first = try await launch(test, sharing: .shared)
        // The same bundle, untouched since: the same worker.
        var shared = try test.configuration(Self.probe)
        shared.sharing = .shared
        let second = try await AppExtensionProcess(configuration: shared)
        #expect(first.processIdentifier == second.processIdentifier)
        var own = shared
        own.sharing = .dedicated
        let dedicated = try await AppExtensionProcess(configuration: own)
        #expect(dedicated.processIdentifier != first.processIdentifier)
        await dedicated.invalidateAndWait()
        await first.invalidateAndWait()
        #expect(ProcessInspection.exists(second.processIdentifier))
        #expect(text(try await second.makeConnection().send(Array("count".utf8))) == "1")
        let pid = second.processIdentifier
        await second.invalidateAndWait()
        #expect(!ProcessInspection.exists(pid))

        try test.install(PluginFixture(library: "FaultySegfault"))
        let interruptions = InterruptionCounter()
        var configuration = try test.configuration("org.plugind.tests.faultysegfault", onInterruption: interruptions.handler)
        configuration.sharing = .shared
        let crashing = try await AppExtensionProcess(configuration: configuration)
        let alsoCrashing = try await AppExtensionProcess(configuration: configuration)
        #expect(crashing.processIdentifier == alsoCrashing.processIdentifier)
        _ = try? await crashing.makeConnection().send([1])
        try await Deadline.wait("both interruptions") { await interruptions.calls(2) }
        #expect(interruptions.count == 2)
    }

    @Test(
        "the owner disabling or revoking a running plugin ends its process: disabledByOwner, onInterruption",
        arguments: ["disable", "revoke"])
    func policyReachesRunningProcesses(change: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try test.install(PluginFixture(library: "ConversationProbe"), bundled: false)
        let editor = PolicyEditor(directory: test.host.policyDirectory)
        let entry = try #require(Inventory.take(host: test.host, catalog: Catalog()).item(Self.probe)?.entry)
        try editor.approve(entry)
        let interruptions = InterruptionCounter()
        let process = try await AppExtensionProcess(configuration: test.configuration(Self.probe, onInterruption: interruptions.handler))
        let handler = HandlerProbe()
        let connection = try await process.makeConnection(requestHandler: handler.holding)
        // A new library on disk ends nothing: the worker runs the bytes approved at its launch.
        var library = try Data(contentsOf: URL(fileURLWithPath: bundle + "/libConversationProbe.so"))
        library.append(0)
        try library.write(to: URL(fileURLWithPath: bundle + "/libConversationProbe.so"))
        #expect(text(try await connection.send(Array("count".utf8))) == "1")

        let pending = Task { try await connection.send(Array("ask-wait:still there?".utf8), timeout: .seconds(60)) }
        #expect(await handler.nextCall() == "still there?")
        if change == "disable" { try editor.disable(Self.probe) } else { try editor.revoke(Self.probe) }
        let error = await #expect(throws: AppExtensionError.self) { try await pending.value }
        #expect(error?.code == .disabledByOwner, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.reason.contains(change == "disable" ? "was disabled by its owner" : "its approval was revoked") == true)
        try await Deadline.wait("onInterruption") { await interruptions.firstCall() }
        // The owner's decision is no crash of the plugin's: nothing counts toward quarantine.
        await CrashRecorder.waitForPendingRecords()
        let crashes = try CrashLog(host: test.host).read().get().plugins[Self.probe]?.crashes ?? []
        #expect(crashes.isEmpty)
    }

    @Test(
        "a disable or revoke that lands while the plugin's init runs ends the process before it answers anything",
        arguments: ["disable", "revoke"])
    func policyReachesLaunchingProcesses(change: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let identifier = "org.plugind.tests.slowinit"
        let bundle = test.externalRoot + "/slow-init.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        // The plugin's init waits until the test opens this FIFO for writing, after the owner's
        // change: held by the test, not for a time, so the change lands while init runs however
        // slowly a loaded machine gets there. Readable by a root host's worker, which runs under
        // an id of plugind's range.
        let gate = try TemporaryDirectory()
        defer { gate.remove() }
        chmod(gate.path, 0o755)
        let fifo = gate.path + "/go"
        #expect(mkfifo(fifo, 0o666) == 0 && chmod(fifo, 0o666) == 0)
        try await CCompiler.sharedLibrary(
            """
            #include <plugind_plugin.h>
            #include <errno.h>
            #include <fcntl.h>
            #include <stdio.h>
            #include <string.h>
            #include <unistd.h>
            static int32_t start(const plugind_host *host, void **state, plugind_plugin_response *error) {
                (void)state;
                int gate = open(GATE, O_RDONLY | O_CLOEXEC);
                if (gate < 0) {
                    char message[128];
                    snprintf(message, sizeof message, "cannot open the test's gate: %s", strerror(errno));
                    host->set_error(error, message);
                    return 1;
                }
                close(gate);
                return PLUGIND_PLUGIN_OK;
            }
            static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                (void)state; (void)request; (void)response; return PLUGIND_PLUGIN_OK;
            }
            static const plugind_plugin descriptor = {.abi_version = PLUGIND_PLUGIN_ABI_VERSION, .size = sizeof(plugind_plugin),
                .name = "Slow init", .version = "1.0.0", .init = start, .handle = handle};
            PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
            """, output: bundle + "/libSlowInit.so", flags: ["-DGATE=\"\(fifo)\""])
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": "Slow init", "version": "1.0.0",
            "extensionPoint": "org.plugind.tests.point", "library": "libSlowInit.so", "permissions": ["read": [gate.path]],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let editor = PolicyEditor(directory: test.host.policyDirectory)
        try editor.approve(try #require(Inventory.take(host: test.host, catalog: Catalog()).item(identifier)?.entry))
        let configuration = try test.configuration(identifier)
        let launch = Task { try await AppExtensionProcess(configuration: configuration) }
        // The launch is past its policy check once the host holds the sealed copy of the library.
        try await Deadline.wait("the launch to seal the library") {
            while !ProcessInspection.ownDescriptorTargets().contains(where: { $0.contains("plugind:libSlowInit.so") }) {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        if change == "disable" { try editor.disable(identifier) } else { try editor.revoke(identifier) }
        // Now init may end: the FIFO opens for writing once init has it open for reading (ENXIO
        // until then), which lets init's open return.
        try await Deadline.wait("the plugin's init to reach its gate") {
            while true {
                let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if writer >= 0 {
                    close(writer)
                    return
                }
                guard errno == ENXIO else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                // Polled: init's open is in another process, with no event to wait on here.
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        let error = await #expect(throws: AppExtensionError.self) { _ = try await launch.value }
        #expect(error?.code == .disabledByOwner, "\(error.map { "\($0)" } ?? "")")
        #expect(
            error?.reason.contains(change == "disable" ? "was disabled by its owner while it launched" : "its approval was revoked")
                == true,
            "\(error?.reason ?? "")")
        // The owner's decision is no crash of the plugin's.
        await CrashRecorder.waitForPendingRecords()
        #expect((try CrashLog(host: test.host).read().get().plugins[identifier]?.crashes ?? []).isEmpty)
    }

    @Test("a plugin quarantined (by crashes of another process of it) ends its running processes too")
    func quarantineReachesRunningProcesses() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "ConversationProbe"))
        let interruptions = InterruptionCounter()
        let process = try await AppExtensionProcess(configuration: test.configuration(Self.probe, onInterruption: interruptions.handler))
        let connection = try await process.makeConnection()
        #expect(text(try await connection.send(Array("count".utf8))) == "1")
        let entry = try #require(Inventory.take(host: test.host, catalog: Catalog()).item(Self.probe)?.entry)
        for crash in 1...test.host.quarantine.crashes {
            CrashLog(host: test.host).record(identifier: Self.probe, bundle: entry.bundle, reason: "crash \(crash)", output: "")
        }
        try await Deadline.wait("onInterruption") { await interruptions.firstCall() }
        let error = await #expect(throws: AppExtensionError.self) { try await connection.send(Array("count".utf8)) }
        #expect(error?.code == .disabledByOwner, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.reason.hasPrefix("was quarantined while it ran") == true, "\(error?.reason ?? "")")
        let termination = await process.waitForTermination()
        #expect(termination == .signaled(signal: SIGKILL, name: "SIGKILL"))
    }

    @Test("a plugin built for ABI 1 keeps working: connections are accepted for it, requests answered")
    func abi1Plugin() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let header = BuiltProducts.packageRoot + "/Tests/Fixtures/ABI1"
        let bundle = test.bundledRoot + "/abi1.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try await CCompiler.sharedLibrary(
            """
            #include "plugind_plugin_abi1.h"
            #include <string.h>
            static const plugind_host *host;
            static int32_t init(const plugind_host *given, void **state, plugind_plugin_response *error) {
                (void)state; (void)error; host = given; return PLUGIND_PLUGIN_OK;
            }
            static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                (void)state;
                host->append(response, (const uint8_t *)"v1:", 3);
                return host->append(response, request->bytes, request->length);
            }
            static const plugind_plugin descriptor = {PLUGIND_PLUGIN_ABI_VERSION, sizeof(plugind_plugin), "ABI 1", "1.0", init, handle, 0};
            PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
            """, output: bundle + "/libABI1.so", flags: ["-I", header])
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.abi1", "name": "ABI 1", "version": "1.0.0",
            "extensionPoint": "org.plugind.tests.point", "library": "libABI1.so",
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let process = try await AppExtensionProcess(configuration: test.configuration("org.plugind.tests.abi1"))
        defer { process.invalidate() }
        let first = try await process.makeConnection()
        let second = try await process.makeConnection(requestHandler: { _ in [] })
        #expect(text(try await first.send(Array("one".utf8))) == "v1:one")
        #expect(text(try await second.send(Array("two".utf8))) == "v1:two")
    }
}
