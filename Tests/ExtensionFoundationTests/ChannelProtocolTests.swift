import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

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

    @Test("a crashed worker's stack report is kept as the crash's stack, the first one only")
    func fatalStack() throws {
        var conversation = Conversation()
        try conversation.ready(features: ProtocolFeature.all)
        let stack = StackReport(reason: .fatalSignal, truncated: true, modules: [], frames: [.init(address: 0x42, module: nil)])
        try conversation.worker(.stackReport(requestID: 0, stack))
        #expect(conversation.machine.fatalStack == stack)
        try conversation.worker(.stackReport(requestID: 0, StackReport(reason: .fatalSignal, modules: [], frames: [])))
        #expect(conversation.machine.fatalStack == stack)
        let failure = LoadFailure(kind: .symbolMissing, message: "no plugind_plugin_entry")
        try conversation.worker(.loadFailed(failure))
        #expect(conversation.machine.loadFailure == failure)
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
        conversation.end(.signaled(signal: 11, coreDumped: false))
        #expect(failureCode(conversation.requests[id]) == .workerCrashed)
        #expect(failureCode(conversation.connections[opening]) == .workerCrashed)
        #expect(conversation.cancelledHandlers == [4])
        #expect(conversation.timers.isEmpty)
        #expect(throws: AppExtensionError.self) { try conversation.machine.reserveRequest(connection: connection, timeout: nil).get() }
    }
}
