import Glibc
import PlugindWire
import PlugindWorkerCore
import TestSupport
import Testing

/// The worker's bookkeeping, driven without threads or a plugin: the host's messages go through
/// an in-memory byte stream and the worker's decoder, as they would through the pipe.
private struct Conversation {
    var core: WorkerCore
    private let toWorker = InMemoryConnection()
    private var atWorker: InMemoryFrameReceiver

    init(concurrency: Int = 2, asksPerConnection: Int = 2, maximumNestingDepth: Int = 3) {
        core = WorkerCore(concurrency: concurrency, asksPerConnection: asksPerConnection, maximumNestingDepth: maximumNestingDepth)
        atWorker = InMemoryFrameReceiver(toWorker, direction: .hostToWorker)
    }

    /// The host sends `message`; the core routes what the worker decodes of it.
    mutating func host(_ message: HostMessage) throws -> [WorkerCore.Routing] {
        toWorker.send(message.encode())
        var routings: [WorkerCore.Routing] = []
        while let frame = try atWorker.receive() { routings.append(core.receive(try HostMessage(frame)) { _ in nil }) }
        return routings
    }

    /// The host sends `message`, which must come to a job; that job is queued for the threads.
    mutating func hostQueues(_ message: HostMessage) throws {
        let routings = try host(message)
        guard routings.count == 1, case .job(let job) = routings[0] else {
            Issue.record("\(message) did not come to one job: \(routings)")
            return
        }
        core.enqueue(job)
    }

    /// Opens connection `id` as the plugin accepts it.
    mutating func open(_ id: UInt32) throws {
        let routings = try host(.openConnection(id, hostIdentifier: "org.plugind.tests.host"))
        guard case .job(.accept(let connection, _))? = routings.first, connection == id, core.mayAccept(id) else {
            Issue.record("connection \(id) was not offered to the plugin")
            return
        }
        core.accepted(id)
    }

    /// A thread takes the reader's turn, reads request `id` on `connection` and runs it itself;
    /// false (and recorded) when any of that does not happen.
    mutating func readAndRun(_ id: UInt64, connection: UInt32) throws -> Bool {
        guard case .read = core.nextTurn() else {
            Issue.record("no thread takes the reader's turn")
            return false
        }
        let routed = try host(.request(id: id, connection: connection, bytes: []))
        guard case .job(let job)? = routed.first, case .run = core.read(.job(job)), case .run = core.begin(id, connection: connection)
        else {
            Issue.record("request \(id) does not run on the thread that read it")
            return false
        }
        return true
    }

    /// The next turn, which must be a job to run: its request identifier (0 for other jobs).
    mutating func runNext() -> UInt64? {
        guard case .run(let job) = core.nextTurn() else { return nil }
        return job.requestID ?? 0
    }
}

@Suite("Worker core: the worker's bookkeeping, over an in-memory transport", .tags(.unit))
struct WorkerCoreTests {
    @Test(
        "threads take turns: one reads; a request it read runs on it when there is room; the one request reads for itself; the rest queue in order"
    )
    func turns() throws {
        var conversation = Conversation(concurrency: 1)
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("the first thread does not read")
            return
        }
        // Nobody else may read meanwhile.
        guard case .wait = conversation.core.nextTurn() else {
            Issue.record("a second reader")
            return
        }
        let routed = try conversation.host(.request(id: 1, connection: 0, bytes: [1]))
        guard case .job(let job)? = routed.first, case .run(let own, let wakeOthers) = conversation.core.read(.job(job)) else {
            Issue.record("the reader does not run what it read")
            return
        }
        #expect(own.requestID == 1)
        #expect(!wakeOthers)
        // One at a time: no other thread reads while it runs, or each answer to the request's
        // asks would be read there and wake it; the request reads for itself.
        guard case .wait = conversation.core.nextTurn() else {
            Issue.record("a second reader beside the one running request")
            return
        }
        let reads = conversation.core.beginReading()
        #expect(reads)
        // A second request it reads queues until the first ends.
        try conversation.hostQueues(.request(id: 2, connection: 0, bytes: [2]))
        conversation.core.endReading()
        let queuedWaits = conversation.core.jobFinished()
        #expect(queuedWaits)
        let next = conversation.runNext()
        #expect(next == 2)
        // Nothing runs: a thread reads again.
        _ = conversation.core.jobFinished()
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("no reader once no request runs")
            return
        }
    }

    @Test(
        "what comes for an ask whose thread reads wakes nobody; what comes for another thread's ask wakes; an ask's end wakes others only when they may go on"
    )
    func askWakeUps() throws {
        var conversation = Conversation(concurrency: 1, asksPerConnection: 4)
        try conversation.open(1)
        guard try conversation.readAndRun(1, connection: 1) else { return }
        // The request asks and reads its own answer: the answer, and a request the host nests in
        // the ask, are there when it looks again; nobody is woken for them.
        let ask = try conversation.core.registerAsk(connection: 1, thread: 1).get()
        guard case .read = conversation.core.nextAskStep(ask) else {
            Issue.record("the asking thread does not read for itself")
            return
        }
        let nested = try conversation.host(.nestedRequest(id: 2, connection: 1, ask: ask, bytes: []))
        #expect(nested.allSatisfy { if case .handled = $0 { true } else { false } }, "\(nested)")
        conversation.core.endReading()
        guard case .runNested = conversation.core.nextAskStep(ask), case .read = conversation.core.nextAskStep(ask) else {
            Issue.record("the reading thread does not find the request nested in its ask")
            return
        }
        let answered = try conversation.host(.answer(ask: ask, bytes: [7]))
        #expect(answered.allSatisfy { if case .handled = $0 { true } else { false } }, "\(answered)")
        conversation.core.endReading()
        guard case .done(.answered([7])) = conversation.core.nextAskStep(ask) else {
            Issue.record("the reading thread does not find its answer")
            return
        }
        // One request at a time, which still runs: the thread that waits for a turn has nothing
        // to do when the ask ends.
        let alone = conversation.core.finishAsk(ask, connection: 1, thread: 1)
        #expect(alone.leftovers.isEmpty && !alone.wakeOthers)

        // Two threads ask (the request's, and one the plugin started); the second waits while the
        // first reads. Its answer wakes it; the reader's end wakes it too, to read in its turn.
        let reader = try conversation.core.registerAsk(connection: 1, thread: 1).get()
        let other = try conversation.core.registerAsk(connection: 1, thread: 2).get()
        guard case .read = conversation.core.nextAskStep(reader), case .wait = conversation.core.nextAskStep(other) else {
            Issue.record("two readers at once")
            return
        }
        let forOther = try conversation.host(.nestedRequest(id: 3, connection: 1, ask: other, bytes: []))
        #expect(forOther.allSatisfy { if case .wake = $0 { true } else { false } }, "\(forOther)")
        _ = try conversation.host(.answer(ask: reader, bytes: []))
        conversation.core.endReading()
        let readerEnds = conversation.core.finishAsk(reader, connection: 1, thread: 1)
        #expect(readerEnds.wakeOthers)
        guard case .runNested = conversation.core.nextAskStep(other), case .read = conversation.core.nextAskStep(other) else {
            Issue.record("the second thread neither runs what came for it nor reads in its turn")
            return
        }
        let otherAnswered = try conversation.host(.answer(ask: other, bytes: []))
        #expect(otherAnswered.allSatisfy { if case .handled = $0 { true } else { false } })
        conversation.core.endReading()
        // The request ends: a thread is to read again, but the last ask's end finds the request
        // still running and wakes nobody.
        #expect(!conversation.core.finishAsk(other, connection: 1, thread: 2).wakeOthers)
        _ = conversation.core.end(1, connection: 1)
        _ = conversation.core.jobFinished()
        let afterRequest = try conversation.core.registerAsk(connection: 1, thread: 2).get()
        #expect(conversation.core.finishAsk(afterRequest, connection: 1, thread: 2).wakeOthers)
    }

    @Test("with room for more requests, a thread reads beside the running ones")
    func readerBesideRequests() throws {
        var conversation = Conversation(concurrency: 2)
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("the first thread does not read")
            return
        }
        let routed = try conversation.host(.request(id: 1, connection: 0, bytes: [1]))
        guard case .job(let job)? = routed.first, case .run(_, let wakeOthers) = conversation.core.read(.job(job)) else {
            Issue.record("the reader does not run what it read")
            return
        }
        #expect(wakeOthers)
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("no reader beside a request when another may start")
            return
        }
    }

    @Test(
        "the reader that runs what it read hands its turn to a waiter, and any will do: a request thread with nothing to run, or a thread waiting for its ask's answer"
    )
    func readerHandOffToAnyWaiter() throws {
        var conversation = Conversation(concurrency: 2)
        try conversation.open(1)
        guard try conversation.readAndRun(1, connection: 1) else { return }
        // A second thread reads; the first request asks, and waits while the other reads.
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("no reader beside the first request")
            return
        }
        guard case .success(let ask) = conversation.core.registerAsk(connection: 1, thread: 1),
            case .wait = conversation.core.nextAskStep(ask)
        else {
            Issue.record("the asking thread does not wait while another reads")
            return
        }
        // A third thread finds nothing to run and waits too.
        guard case .wait = conversation.core.nextTurn() else {
            Issue.record("a request thread with nothing to run does not wait")
            return
        }
        let second = try conversation.host(.request(id: 2, connection: 1, bytes: []))
        guard case .job(let secondJob)? = second.first, case .run(_, let wakeOthers) = conversation.core.read(.job(secondJob)) else {
            Issue.record("the second request does not run on its reader")
            return
        }
        #expect(wakeOthers)
        // Whichever of the two waiters wakes first, its next step is to read.
        var askerWakesFirst = conversation.core
        guard case .read = askerWakesFirst.nextAskStep(ask) else {
            Issue.record("the asking thread, woken, does not take the reader's turn")
            return
        }
        guard case .read = conversation.core.nextTurn() else {
            Issue.record("the idle request thread, woken, does not take the reader's turn")
            return
        }
    }

    @Test("a cancel reaches a queued request (it never runs) and a running one (it sees it); an unknown one is ignored")
    func cancel() throws {
        var conversation = Conversation()
        try conversation.hostQueues(.request(id: 1, connection: 0, bytes: []))
        _ = try conversation.host(.cancel(id: 1))
        guard case .cancelled = conversation.core.begin(1, connection: 0) else {
            Issue.record("a request cancelled while queued started")
            return
        }
        try conversation.hostQueues(.request(id: 2, connection: 0, bytes: []))
        guard case .run = conversation.core.begin(2, connection: 0) else {
            Issue.record("a request did not start")
            return
        }
        #expect(!conversation.core.isCancelled(2))
        _ = try conversation.host(.cancel(id: 2))
        #expect(conversation.core.isCancelled(2))
        _ = conversation.core.end(2, connection: 0)
        _ = try conversation.host(.cancel(id: 2))
        _ = try conversation.host(.cancel(id: 99))
        #expect(!conversation.core.isCancelled(2) && !conversation.core.isCancelled(99))
    }

    @Test("closing a connection drops its queued requests, fails its asks, and closes once its running request ends")
    func closeConnection() throws {
        var conversation = Conversation()
        try conversation.open(1)
        try conversation.open(2)
        try conversation.hostQueues(.request(id: 1, connection: 1, bytes: []))
        let first = conversation.runNext()
        #expect(first == 1)
        guard case .run = conversation.core.begin(1, connection: 1) else {
            Issue.record("a request on an open connection did not start")
            return
        }
        try conversation.hostQueues(.request(id: 2, connection: 1, bytes: []))
        try conversation.hostQueues(.request(id: 3, connection: 2, bytes: []))
        let ask = try conversation.core.registerAsk(connection: 1, thread: 7).get()
        let routed = try conversation.host(.closeConnection(1))
        guard case .closed(1, let dropped, let closeNow)? = routed.first else {
            Issue.record("the close was not taken in: \(routed)")
            return
        }
        #expect(dropped == [2])
        #expect(!closeNow)
        guard case .done(.closed) = conversation.core.nextAskStep(ask) else {
            Issue.record("the ask on the closed connection still waits")
            return
        }
        let leftovers = conversation.core.finishAsk(ask, connection: 1, thread: 7).leftovers
        #expect(leftovers.isEmpty)
        // A request of the closing connection may not start; the other connection's may.
        guard case .noConnection = conversation.core.begin(4, connection: 1) else {
            Issue.record("a request started on a closing connection")
            return
        }
        let other = conversation.runNext()
        #expect(other == 3)
        let closesNow = conversation.core.end(1, connection: 1)
        #expect(closesNow)
        let removed = conversation.core.removeConnection(1)
        let removedAgain = conversation.core.removeConnection(1)
        #expect(removed && !removedAgain)
        #expect(try conversation.host(.closeConnection(1)).allSatisfy { if case .handled = $0 { true } else { false } })
    }

    @Test("asks are bounded: per connection, by nesting depth, not on a closing or unknown connection, none once stopping")
    func askBounds() throws {
        var conversation = Conversation(asksPerConnection: 2, maximumNestingDepth: 3)
        try conversation.open(1)
        let unknown = conversation.core.registerAsk(connection: 9, thread: 1)
        #expect(unknown == .failure(.init(errno: EINVAL)))
        let first = try conversation.core.registerAsk(connection: 1, thread: 1).get()
        _ = try conversation.core.registerAsk(connection: 1, thread: 1).get()
        let third = conversation.core.registerAsk(connection: 1, thread: 2)
        #expect(third == .failure(.init(errno: EBUSY)))
        _ = conversation.core.finishAsk(first, connection: 1, thread: 1)
        // Thread 1 waits on one ask still; two more nest, a fourth is too deep.
        try conversation.open(2)
        try conversation.open(3)
        _ = try conversation.core.registerAsk(connection: 2, thread: 1).get()
        _ = try conversation.core.registerAsk(connection: 3, thread: 1).get()
        let tooDeep = conversation.core.registerAsk(connection: 3, thread: 1)
        #expect(tooDeep == .failure(.init(errno: ELOOP)))
        let otherThread = conversation.core.registerAsk(connection: 3, thread: 2)
        #expect(try otherThread.get() > 0)
        conversation.core.stop()
        let afterStop = conversation.core.registerAsk(connection: 2, thread: 3)
        #expect(afterStop == .failure(.init(errno: ECONNRESET)))
    }

    @Test("a request nested in an ask runs on the asking thread; one left when the ask ends runs like any other; answers map to errno")
    func nestedRequests() throws {
        var conversation = Conversation()
        try conversation.open(1)
        let ask = try conversation.core.registerAsk(connection: 1, thread: 5).get()
        #expect(try conversation.host(.nestedRequest(id: 10, connection: 1, ask: ask, bytes: [1])).count == 1)
        guard case .runNested(let job) = conversation.core.nextAskStep(ask), job.requestID == 10 else {
            Issue.record("the nested request is not for the asking thread")
            return
        }
        _ = try conversation.host(.nestedRequest(id: 11, connection: 1, ask: ask, bytes: [2]))
        let routed = try conversation.host(.answer(ask: ask, bytes: [42]))
        guard case .wake? = routed.first, case .done(let result) = conversation.core.nextAskStep(ask) else {
            Issue.record("the answer did not reach the ask")
            return
        }
        #expect(WorkerCore.outcome(result) == .answered([42]))
        let leftovers = conversation.core.finishAsk(ask, connection: 1, thread: 5).leftovers
        #expect(leftovers.map(\.requestID) == [11])
        // Nested in an ask that ended: an ordinary request.
        guard case .job(let ordinary)? = try conversation.host(.nestedRequest(id: 12, connection: 1, ask: ask, bytes: [])).first else {
            Issue.record("a request nested in an ended ask was lost")
            return
        }
        #expect(ordinary.requestID == 12)
        let failure = AskFailure(reason: .handlerFailed, code: 7, message: "no")
        #expect(WorkerCore.outcome(.failed(failure)) == .failed(EREMOTEIO, code: 7, message: "no"))
        #expect(WorkerCore.outcome(nil) == .failed(ETIMEDOUT, code: 0, message: nil))
        #expect(WorkerCore.outcome(.closed) == .failed(ECONNRESET, code: 0, message: nil))
    }

    @Test("shutdown ends in order, end of stream without; a second hello is a violation; stopping cancels what runs and what waits")
    func theEnd() throws {
        var conversation = Conversation()
        guard case .shutdown? = try conversation.host(.shutdown).first else {
            Issue.record("shutdown not recognised")
            return
        }
        let afterShutdown = conversation.core.read(.end(status: 0, orderly: true))
        #expect(afterShutdown.isWake)
        #expect(conversation.core.orderly && conversation.core.stopping)
        guard case .stop = conversation.core.nextTurn() else {
            Issue.record("threads do not stop")
            return
        }
        var other = Conversation()
        let hello = HostMessage.hello(
            Hello(
                load: LoadConfiguration(
                    pluginIdentifier: "p", libraryPath: "/l", libraryDescriptor: 5, bundlePath: "/b", view: [], functions: [],
                    limits: ResourceLimits(addressSpaceBytes: 1, cpuSeconds: 1, openFiles: 1, tasks: 1, maxMessageBytes: 1),
                    confinement: ConfinementRequest(readablePaths: [], writablePaths: []))))
        guard case .violation? = try other.host(hello).first else {
            Issue.record("a second hello was taken in")
            return
        }
        try other.hostQueues(.request(id: 1, connection: 0, bytes: []))
        _ = other.core.absorb(.end(status: 0, orderly: false))
        #expect(!other.core.orderly)
        guard case .cancelled = other.core.begin(1, connection: 0) else {
            Issue.record("a request started after the end")
            return
        }
    }
}

extension WorkerCore.AfterRead {
    fileprivate var isWake: Bool {
        if case .wake = self { return true }
        return false
    }
}
