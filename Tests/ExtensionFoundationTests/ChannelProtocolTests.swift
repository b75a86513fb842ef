import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation

/// The host's protocol state machine, driven without a process: what it sends goes through an
/// in-memory byte stream to a pretend worker, what the worker answers comes back the same way.
private struct Conversation {
    var machine = ChannelProtocol(
        pluginIdentifier: "org.plugind.tests.machine", hostIdentifier: "org.plugind.tests.host", maximumMessageBytes: 1024,
        asksPerConnection: 2, cancellationGracePeriod: .milliseconds(500), askByteBudget: 1500)
    private let toWorker = InMemoryConnection()
    private var atWorker: InMemoryFrameReceiver
    private let toHost = InMemoryConnection()
    private var atHost: InMemoryFrameReceiver

    var requests: [UInt64: Result<WorkerReply, AppExtensionError>] = [:]
    var connections: [UInt32: Result<Void, AppExtensionError>] = [:]
    /// The timers armed now.
    var timers: Set<ChannelProtocol.Timer> { Set(machine.deadlines.entries.keys) }
    var stops: [WorkerChannel.StopCause] = []
    var handlers: [UInt64: [UInt8]] = [:]
    var cancelledHandlers: [UInt64] = []
    var readyCount = 0
    var fatalStacks: [StackReport] = []
    var stackRequests: [UInt64] = []
    var kills = 0
    /// The time the next input is given at.
    var clock = ContinuousClock.now

    init() {
        atWorker = InMemoryFrameReceiver(toWorker, direction: .hostToWorker)
        atHost = InMemoryFrameReceiver(toHost, direction: .workerToHost)
    }

    mutating func apply(_ effects: [ChannelProtocol.Effect]) {
        for effect in effects {
            switch effect {
            case .send(let message): toWorker.send(message.encode())
            case .completeRequest(let id, let result):
                #expect(requests[id] == nil, "request \(id) completed twice")
                requests[id] = result
            case .completeConnection(let id, let result): connections[id] = result
            case .handshakeDone: readyCount += 1
            case .runAskHandler(_, let ask, let bytes): handlers[ask] = bytes
            case .cancelAskHandler(let ask): cancelledHandlers.append(ask)
            case .stop(let cause): stops.append(cause)
            case .kill: kills += 1
            case .fatalStack(let report): fatalStacks.append(report)
            case .captureStack(let id): stackRequests.append(id)
            case .broadcast, .loadFailed, .fatalSignal, .sharedResponse: break
            }
        }
    }

    /// What the worker has been sent since the last call, decoded as the worker decodes it.
    mutating func sentToWorker() throws -> [HostMessage] {
        var messages: [HostMessage] = []
        while let frame = try atWorker.receive() { messages.append(try HostMessage(frame)) }
        return messages
    }

    /// The worker sends `message`; the machine receives it from the byte stream.
    mutating func worker(_ message: WorkerMessage) throws {
        toHost.send(message.encode())
        while let frame = try atHost.receive() { apply(machine.receive(try WorkerMessage(frame))) }
    }

    /// The worker is ready, with `features` (by default every one but stack reports, so that a
    /// deadline fails its request at once).
    mutating func ready(features: [String] = ProtocolFeature.all.filter { $0 != ProtocolFeature.stacks }) throws {
        try worker(
            .ready(
                Ready(
                    protocolVersion: ProtocolVersion.current, pluginABIVersion: 2, features: features, pluginName: "p",
                    pluginVersion: "1", hasRequestHandler: true, confinement: [], workerProcessIdentifier: 1)))
    }

    /// Opens a connection the worker accepts.
    mutating func open(handler: Bool = true) throws -> UInt32 {
        let (id, effects) = try machine.openConnection(hasHandler: handler, timeout: .seconds(1), now: clock).get()
        apply(effects)
        #expect(try sentToWorker() == [.openConnection(id, hostIdentifier: "org.plugind.tests.host")])
        try worker(.connectionAccepted(id))
        #expect(try connections[id]?.get() != nil)
        return id
    }

    /// Reserves and sends a request.
    mutating func send(_ bytes: [UInt8], on connection: UInt32, timeout: Duration? = .seconds(1)) throws -> UInt64 {
        let id = try machine.reserveRequest(connection: connection, timeout: timeout).get()
        apply(machine.sendRequest(id, .request(id: id, connection: connection, bytes: bytes), now: clock))
        return id
    }
}

@Suite("Host protocol state machine, over an in-memory transport", .tags(.unit))
struct ChannelProtocolTests {
    @Test("a request cancelled before it was sent fails without a frame")
    func cancelBeforeSend() throws {
        var conversation = Conversation()
        try conversation.ready()
        let connection = try conversation.open()
        let id = try conversation.machine.reserveRequest(connection: connection, timeout: nil).get()
        conversation.apply(conversation.machine.abandon(id, because: .cancelled, now: conversation.clock))
        #expect(conversation.requests[id] == nil)
        conversation.apply(
            conversation.machine.sendRequest(id, .request(id: id, connection: connection, bytes: [1]), now: conversation.clock))
        #expect(failureCode(conversation.requests[id]) == .cancelled)
        #expect(try conversation.sentToWorker().isEmpty)
    }

    @Test("past a deadline a worker that reports stacks is asked where the request is, before the cancel; its answer rides on the timeout")
    func stackAtDeadline() throws {
        var conversation = Conversation()
        try conversation.ready(features: ProtocolFeature.all)
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.timerFired(.deadline(id)))
        #expect(conversation.requests[id] == nil, "the request fails once the stack is in, not before")
        #expect(conversation.stackRequests == [id])
        #expect(try conversation.sentToWorker().isEmpty)
        #expect(conversation.timers == [.stackWait(id)])
        let stack = StackReport(
            reason: .requested, modules: [.init(path: "/b/libhang.so", loadBias: 0x7000, start: 0x7000)],
            frames: [.init(address: 0x7123, module: 0), .init(address: 0x1, module: nil)])
        try conversation.worker(.stackReport(requestID: id, stack))
        guard case .failure(let error)? = conversation.requests[id] else {
            Issue.record("the request did not fail once its stack came")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.unsymbolizedStack == stack)
        #expect(try conversation.sentToWorker() == [.cancel(id: id)])
        #expect(conversation.timers == [.grace(id)])
        // A second report for it, late, changes nothing.
        try conversation.worker(.stackReport(requestID: id, stack))
        #expect(conversation.stops.isEmpty)
    }

    @Test("a worker that never says where the request is: the request fails without a stack when the wait ends")
    func stackWaitEnds() throws {
        var conversation = Conversation()
        try conversation.ready(features: ProtocolFeature.all)
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.timerFired(.deadline(id)))
        conversation.apply(conversation.machine.timerFired(.stackWait(id)))
        guard case .failure(let error)? = conversation.requests[id] else {
            Issue.record("the request did not fail when the wait for its stack ended")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.unsymbolizedStack == nil)
        #expect(conversation.stackRequests == [id])
        #expect(try conversation.sentToWorker() == [.cancel(id: id)])
    }

    @Test("an answer that comes while the host asks where the request is: still timedOut, and nothing is cancelled")
    func answerDuringStackWait() throws {
        var conversation = Conversation()
        try conversation.ready(features: ProtocolFeature.all)
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.timerFired(.deadline(id)))
        try conversation.worker(.response(id: id, bytes: [9]))
        #expect(failureCode(conversation.requests[id]) == .timedOut)
        #expect(try conversation.sentToWorker().isEmpty)
        #expect(conversation.timers.isEmpty)
        #expect(conversation.stops.isEmpty)
    }

    @Test("a crashed worker's stack report reaches the channel as the crash's stack")
    func fatalStack() throws {
        var conversation = Conversation()
        try conversation.ready(features: ProtocolFeature.all)
        let stack = StackReport(reason: .fatalSignal, truncated: true, modules: [], frames: [.init(address: 0x42, module: nil)])
        try conversation.worker(.stackReport(requestID: 0, stack))
        #expect(conversation.fatalStacks == [stack])
    }

    @Test("a late answer after the deadline is dropped; the worker is judged stuck only if it never confirms")
    func lateAnswer() throws {
        var conversation = Conversation()
        try conversation.ready()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        #expect(try conversation.sentToWorker() == [.request(id: id, connection: connection, bytes: [1])])
        conversation.apply(conversation.machine.timerFired(.deadline(id)))
        guard case .failure(let error)? = conversation.requests[id] else {
            Issue.record("the request did not fail at its deadline")
            return
        }
        #expect(error.code == .timedOut)
        #expect(error.reason == "request did not finish within 1 s")
        #expect(try conversation.sentToWorker() == [.cancel(id: id)])
        #expect(conversation.timers == [.grace(id)])
        try conversation.worker(.response(id: id, bytes: [2]))
        #expect(conversation.stops.isEmpty)
        #expect(conversation.timers.isEmpty)

        let stuck = try conversation.send([3], on: connection)
        conversation.apply(conversation.machine.timerFired(.deadline(stuck)))
        conversation.apply(conversation.machine.timerFired(.grace(stuck)))
        #expect(conversation.stops == [.unresponsive(requestID: stuck, after: .milliseconds(500))])
    }

    @Test(
        "a connection the plugin neither accepts nor refuses in time fails with timedOut and is closed; the worker is stopped only if it answers neither within the grace"
    )
    func connectionDeadline() throws {
        var conversation = Conversation()
        try conversation.ready()
        let (late, effects) = try conversation.machine.openConnection(
            hasHandler: true, timeout: .milliseconds(300), now: conversation.clock
        ).get()
        conversation.apply(effects)
        #expect(conversation.timers == [.accepting(late)])
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.timerFired(.accepting(late)))
        #expect(failureCode(conversation.connections[late]) == .timedOut)
        #expect(try conversation.sentToWorker() == [.closeConnection(late)])
        #expect(conversation.timers == [.closingGrace(late)])
        // The plugin's accept returns at last: the grace ends, nothing is stopped, and no request
        // can use the connection.
        try conversation.worker(.connectionAccepted(late))
        #expect(conversation.timers.isEmpty)
        #expect(conversation.stops.isEmpty)
        #expect(throws: AppExtensionError.self) { try conversation.machine.reserveRequest(connection: late, timeout: nil).get() }

        let (stuck, more) = try conversation.machine.openConnection(hasHandler: true, timeout: .milliseconds(300), now: conversation.clock)
            .get()
        conversation.apply(more)
        conversation.apply(conversation.machine.timerFired(.accepting(stuck)))
        conversation.apply(conversation.machine.timerFired(.closingGrace(stuck)))
        #expect(conversation.stops == [.unresponsiveConnection(stuck, after: .milliseconds(500))])

        // Accepted in time: the deadline is cancelled and never fires.
        _ = try conversation.sentToWorker()
        let accepted = try conversation.open()
        #expect(!conversation.timers.contains(.accepting(accepted)))
        conversation.apply(conversation.machine.timerFired(.accepting(accepted)))
        #expect(try conversation.connections[accepted]?.get() != nil)
    }

    @Test("an answer to a request never sent, and a second ready, are protocol violations")
    func violations() throws {
        var conversation = Conversation()
        try conversation.ready()
        #expect(conversation.readyCount == 1)
        try conversation.worker(.response(id: 99, bytes: []))
        #expect(conversation.stops == [.protocolViolation("answer to request 99, which was never sent")])
        try conversation.ready()
        #expect(conversation.stops.last == .protocolViolation("sent ready twice"))
        #expect(conversation.readyCount == 1)
    }

    @Test("the plugin asks while the host's request runs: the handler runs, its answer goes back, the request completes")
    func askDuringRequest() throws {
        var conversation = Conversation()
        try conversation.ready()
        let connection = try conversation.open()
        let id = try conversation.send(Array("greet".utf8), on: connection)
        _ = try conversation.sentToWorker()
        try conversation.worker(.ask(id: 1, connection: connection, bytes: Array("name?".utf8)))
        #expect(conversation.handlers[1] == Array("name?".utf8))
        conversation.apply(conversation.machine.answerAsk(1, .success(Array("Ada".utf8)), maximumBytes: 1024))
        #expect(try conversation.sentToWorker() == [.answer(ask: 1, bytes: Array("Ada".utf8))])
        try conversation.worker(.response(id: id, bytes: Array("Hello, Ada".utf8)))
        #expect(try conversation.requests[id]?.get() == .bytes(Array("Hello, Ada".utf8)))
        // An answer over the limit is refused as such.
        try conversation.worker(.ask(id: 2, connection: connection, bytes: []))
        conversation.apply(conversation.machine.answerAsk(2, .success([UInt8](repeating: 0, count: 2048)), maximumBytes: 1024))
        guard case .askFailed(2, let failure)? = try conversation.sentToWorker().first else {
            Issue.record("an answer over the limit was sent")
            return
        }
        #expect(failure.reason == .tooLarge)
    }

    @Test("closing a connection mid-ask cancels the handler, fails its requests, tells the worker; a late answer goes nowhere")
    func closeMidAsk() throws {
        var conversation = Conversation()
        try conversation.ready()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        _ = try conversation.sentToWorker()
        try conversation.worker(.ask(id: 7, connection: connection, bytes: [2]))
        conversation.apply(conversation.machine.closeConnection(connection, now: conversation.clock))
        #expect(conversation.cancelledHandlers == [7])
        #expect(failureCode(conversation.requests[id]) == .connectionClosed)
        #expect(try conversation.sentToWorker() == [.cancel(id: id), .closeConnection(connection)])
        conversation.apply(conversation.machine.answerAsk(7, .success([3]), maximumBytes: 1024))
        #expect(try conversation.sentToWorker().isEmpty)
        // New requests on it fail before anything is sent.
        let refused = conversation.machine.reserveRequest(connection: connection, timeout: nil)
        #expect(throws: AppExtensionError.self) { try refused.get() }
    }

    @Test("a refused connection fails with the plugin's reason; asks without a handler, or beyond the bound, fail at once")
    func refusalsAndBounds() throws {
        var conversation = Conversation()
        try conversation.ready()
        let (refused, effects) = try conversation.machine.openConnection(hasHandler: true, timeout: .seconds(1), now: conversation.clock)
            .get()
        conversation.apply(effects)
        #expect(try conversation.sentToWorker() == [.openConnection(refused, hostIdentifier: "org.plugind.tests.host")])
        try conversation.worker(.connectionRefused(refused, reason: "one editor at a time"))
        guard case .failure(let error)? = conversation.connections[refused] else {
            Issue.record("the refused connection opened")
            return
        }
        #expect(error.code == .connectionRefused)
        #expect(error.reason == "refused the connection: one editor at a time")

        let silent = try conversation.open(handler: false)
        _ = try conversation.sentToWorker()
        try conversation.worker(.ask(id: 1, connection: silent, bytes: []))
        #expect(try conversation.sentToWorker().map(\.askFailureReason) == [.unsupported])

        let busy = try conversation.open()
        for ask in UInt64(2)...5 { try conversation.worker(.ask(id: ask, connection: busy, bytes: [])) }
        #expect(conversation.handlers.keys.sorted() == [2, 3])
        #expect(try conversation.sentToWorker().map(\.askFailureReason) == [.tooManyAsks, .tooManyAsks])
        try conversation.worker(.askCancelled(id: 2))
        #expect(conversation.cancelledHandlers == [2])
        try conversation.worker(.ask(id: 6, connection: busy, bytes: []))
        #expect(conversation.handlers[6] != nil)
    }

    @Test(
        "the asks the host holds are bounded in bytes across connections: past the budget, tooManyAsks at once; answered ones free their room"
    )
    func askByteBudget() throws {
        var conversation = Conversation()
        try conversation.ready()
        let first = try conversation.open()
        let second = try conversation.open()
        _ = try conversation.sentToWorker()
        try conversation.worker(.ask(id: 1, connection: first, bytes: [UInt8](repeating: 1, count: 1000)))
        try conversation.worker(.ask(id: 2, connection: second, bytes: [UInt8](repeating: 2, count: 1000)))
        #expect(conversation.handlers.keys.sorted() == [1])
        #expect(try conversation.sentToWorker().map(\.askFailureReason) == [.tooManyAsks])
        conversation.apply(conversation.machine.answerAsk(1, .success([]), maximumBytes: 1024))
        _ = try conversation.sentToWorker()
        try conversation.worker(.ask(id: 3, connection: second, bytes: [UInt8](repeating: 3, count: 1000)))
        #expect(conversation.handlers[3] != nil)
    }

    @Test("the end of the worker fails every waiting request and opening connection, and stops the handlers")
    func endFailsEverything() throws {
        var conversation = Conversation()
        try conversation.ready()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        let (opening, effects) = try conversation.machine.openConnection(hasHandler: false, timeout: .seconds(1), now: conversation.clock)
            .get()
        conversation.apply(effects)
        try conversation.worker(.ask(id: 4, connection: connection, bytes: []))
        let failure = AppExtensionError(.workerCrashed, plugin: "org.plugind.tests.machine", "crashed with SIGSEGV")
        conversation.apply(conversation.machine.ended(failure: failure))
        #expect(failureCode(conversation.requests[id]) == .workerCrashed)
        #expect(failureCode(conversation.connections[opening]) == .workerCrashed)
        #expect(conversation.cancelledHandlers == [4])
        #expect(conversation.timers.isEmpty)
        #expect(throws: AppExtensionError.self) { try conversation.machine.reserveRequest(connection: connection, timeout: nil).get() }
    }
}

@Suite("Host protocol deadlines, as data", .tags(.unit))
struct ChannelProtocolDeadlineTests {
    @Test("deadlines are armed at now plus their duration; expire fires exactly those due, earliest first, and the next is known")
    func expireFiresWhatIsDue() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        let quick = try conversation.send([1], on: connection, timeout: .milliseconds(100))
        let slow = try conversation.send([2], on: connection, timeout: .seconds(2))
        let untimed = try conversation.send([3], on: connection, timeout: nil)
        #expect(
            conversation.machine.deadlines.entries == [.deadline(quick): start + .milliseconds(100), .deadline(slow): start + .seconds(2)])
        #expect(conversation.machine.nextDeadline == start + .milliseconds(100))
        _ = try conversation.sentToWorker()
        // Nothing is due before the first deadline.
        conversation.apply(conversation.machine.expire(now: start + .milliseconds(99)))
        #expect(conversation.requests.isEmpty)
        // At it, only the quick request fails; its grace is armed from then on.
        conversation.apply(conversation.machine.expire(now: start + .milliseconds(100)))
        #expect(failureCode(conversation.requests[quick]) == .timedOut)
        #expect(conversation.requests[slow] == nil && conversation.requests[untimed] == nil)
        #expect(conversation.machine.deadlines[.grace(quick)] == start + .milliseconds(600))
        #expect(conversation.machine.nextDeadline == start + .milliseconds(600))
        #expect(try conversation.sentToWorker() == [.cancel(id: quick)])
        // An answer disarms: the next deadline moves to the slow request's.
        try conversation.worker(.response(id: slow, bytes: [9]))
        try conversation.worker(.cancelled(id: quick))
        #expect(conversation.machine.nextDeadline == nil)
        #expect(conversation.stops.isEmpty)
    }

    @Test("a request sent long after the last input gets its whole timeout from when it is sent")
    func deadlineFromSendTime() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        // Ten seconds in which nothing happens, then a request with a one-second timeout.
        conversation.clock = start + .seconds(10)
        let late = try conversation.send([1], on: connection, timeout: .seconds(1))
        #expect(conversation.machine.deadlines[.deadline(late)] == start + .seconds(11))
        conversation.apply(conversation.machine.expire(now: start + .seconds(10) + .milliseconds(500)))
        #expect(conversation.requests[late] == nil)
    }

    @Test("two timers due at once fire in deadline order in one expire; a worker silent after its cancel is stopped")
    func severalDue() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        let first = try conversation.send([1], on: connection, timeout: .milliseconds(10))
        let second = try conversation.send([2], on: connection, timeout: .milliseconds(20))
        conversation.apply(conversation.machine.expire(now: start + .seconds(5)))
        // Both deadlines, then (armed at 5 s) no grace yet.
        #expect(failureCode(conversation.requests[first]) == .timedOut && failureCode(conversation.requests[second]) == .timedOut)
        #expect(conversation.stops.isEmpty)
        conversation.apply(conversation.machine.expire(now: start + .seconds(6)))
        #expect(
            conversation.stops == [
                .unresponsive(requestID: first, after: .milliseconds(500)), .unresponsive(requestID: second, after: .milliseconds(500)),
            ])
    }

    @Test(
        "the launch deadline stops a worker that never answers, and is disarmed by its ready; the shutdown grace kills one that does not exit"
    )
    func launchAndShutdown() throws {
        var silent = Conversation()
        let start = ContinuousClock.now
        silent.machine.awaitReady(timeout: .seconds(1), now: start)
        silent.apply(silent.machine.expire(now: start + .seconds(1)))
        #expect(silent.stops == [.launchTimedOut(.seconds(1))])

        var answering = Conversation()
        answering.machine.awaitReady(timeout: .seconds(1), now: start)
        try answering.ready()
        #expect(answering.timers.isEmpty)
        answering.apply(answering.machine.invalidate(grace: .seconds(2), now: start))
        #expect(answering.timers == [.shutdown])
        answering.apply(answering.machine.expire(now: start + .seconds(1)))
        #expect(answering.kills == 0)
        answering.apply(answering.machine.expire(now: start + .seconds(2)))
        #expect(answering.kills == 1)
        #expect(answering.stops.isEmpty)
    }
}

/// The code a failed result carries; nil for a success or no result.
private func failureCode<Success>(_ result: Result<Success, AppExtensionError>?) -> AppExtensionError.Code? {
    guard case .failure(let error)? = result else { return nil }
    return error.code
}

extension HostMessage {
    fileprivate var askFailureReason: AskFailure.Reason? {
        if case .askFailed(_, let failure) = self { return failure.reason }
        return nil
    }
}
