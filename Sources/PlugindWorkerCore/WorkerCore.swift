import Glibc
package import PlugindWire

/// The worker's bookkeeping, as a state machine with no system calls and no plugin calls: the
/// queue of work, which thread reads from the host and which runs what, requests queued, running
/// and cancelled, the connections the plugin accepted, the plugin's asks and the requests the
/// host nests in them, and the end. `PluginServer` holds it under its `ThreadCondition` and
/// carries out what each transition returns (reads, plugin calls, frames to the host, wake-ups);
/// tests drive it directly, over an in-memory transport.
///
/// Not generic: the server keeps what the plugin sees of a connection (its record) by number,
/// beside this state. The worker calls the core from another module, where generic code runs
/// unspecialized and looks up its types' metadata on every call (nine lookups a request).
package struct WorkerCore {
    /// Where a request's bytes are: its own array, or the host's shared region (valid until the
    /// answer is sent).
    package enum RequestBytes {
        case owned([UInt8])
        case shared(UnsafeRawBufferPointer)
    }

    package enum Job {
        case request(id: UInt64, connection: UInt32, bytes: RequestBytes)
        case call(id: UInt64, function: UInt32, arguments: [FunctionValue])
        case accept(connection: UInt32, hostIdentifier: String)
        case close(connection: UInt32)

        package var requestID: UInt64? {
            switch self {
            case .request(let id, _, _), .call(let id, _, _): id
            case .accept, .close: nil
            }
        }
    }

    /// The answer to an ask, once it came.
    package enum AskResult: Equatable {
        case answered([UInt8])
        case failed(AskFailure)
        case closed
    }

    private struct AskWaiter {
        let connection: UInt32
        var result: AskResult?
        /// Requests the host sent while this ask waits, for the thread that asked.
        var nested: [Job] = []
    }

    /// A connection the plugin accepted.
    private struct Connection {
        var running = 0
        var closing = false
        var asks = 0
    }

    /// How many jobs may run at once (the request threads).
    package let concurrency: Int
    /// The most asks of one connection that may wait at once; the host allows as many.
    package let asksPerConnection: Int
    /// The most asks one thread may nest (each level runs the nested request on the asking
    /// thread's stack).
    package let maximumNestingDepth: Int

    private var queue: [Job] = []
    private var queueStart = 0
    /// No more work: requests see themselves cancelled, asks fail.
    package private(set) var stopping = false
    /// A thread is reading from the host.
    package private(set) var reading = false
    /// Jobs running now (requests, calls, accepts and closes).
    package private(set) var jobs = 0
    package private(set) var exitStatus: Int32 = 0
    /// The host asked for the end (`shutdown`): the worker says goodbye.
    package private(set) var orderly = false
    /// Requests queued or running, and those the host cancelled.
    private var queuedRequests: Set<UInt64> = []
    private var running: Set<UInt64> = []
    private var cancelled: Set<UInt64> = []
    private var connections: [UInt32: Connection] = [:]
    private var asks: [UInt64: AskWaiter] = [:]
    private var nextAsk: UInt64 = 1
    /// Asks each thread is waiting for, nested one in another, by thread.
    private var nesting: [UInt: Int] = [:]
    /// The ask whose own thread holds the reader's turn (`nextAskStep` gave it `.read`): what
    /// comes for that ask wakes nobody, since its thread looks again once it has read.
    private var readingForAsk: UInt64?

    package init(concurrency: Int, asksPerConnection: Int = 64, maximumNestingDepth: Int = 16) {
        self.concurrency = concurrency
        self.asksPerConnection = asksPerConnection
        self.maximumNestingDepth = maximumNestingDepth
    }

    package var isQueueEmpty: Bool { queueStart == queue.count }

    private mutating func pop() -> Job? {
        guard queueStart < queue.count else { return nil }
        defer {
            queueStart += 1
            if queueStart == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueStart = 0
            }
        }
        return queue[queueStart]
    }

    // MARK: Turns: leader and followers

    /// What a thread does next.
    package enum Turn {
        /// Run this job (counted as running until `jobFinished`).
        case run(Job)
        /// Read from the host (the thread holds the reader's turn until `read(_:)`).
        case read
        case stop
        case wait
    }

    /// A thread's next turn: a queued job when one may start, else the end, else reading when
    /// nobody reads, else waiting.
    package mutating func nextTurn() -> Turn {
        if jobs < concurrency, let job = pop() {
            jobs += 1
            return .run(job)
        }
        if stopping { return .stop }
        // With one request at a time, the running request reads for itself when it needs to (its
        // asks' answers, a cancel check): a thread reading beside it would take each answer it
        // awaits and have to wake it.
        if !reading, concurrency > 1 || jobs == 0 {
            reading = true
            return .read
        }
        return .wait
    }

    /// A job ended; true when a queued one may start now, on whichever thread waits.
    package mutating func jobFinished() -> Bool {
        jobs -= 1
        return !isQueueEmpty
    }

    /// What one read from the host brought.
    package enum ReadOutcome {
        case handled
        case job(Job)
        case end(status: Int32, orderly: Bool)
    }

    /// After a read: run it here, or wake the others (or nothing).
    package enum AfterRead {
        /// Run the job just read, on the thread that read it (counted as running); with room for
        /// more requests, another thread is woken to read meanwhile. Whichever waits will do: a
        /// thread waits only while another reads (`nextTurn`, `nextAskStep`), and anything else it
        /// waits for wakes every waiter when it comes, so each waiter's next step is the vacant
        /// reader's turn.
        case run(Job, wakeOthers: Bool)
        case wake
        case nothing
    }

    /// The reader's turn ends with `outcome`. A job it read runs on the same thread when it may
    /// start and none waits before it: no wake-up of another thread in between.
    package mutating func read(_ outcome: ReadOutcome) -> AfterRead {
        reading = false
        if case .job(let job) = outcome, jobs < concurrency && isQueueEmpty {
            jobs += 1
            return .run(job, wakeOthers: concurrency > 1)
        }
        return absorb(outcome) ? .wake : .nothing
    }

    /// Takes in what a read brought when the reader does not run it (a thread reading on behalf of
    /// a request it runs): a job joins the queue, the end stops everything. True when other
    /// threads should look again.
    package mutating func absorb(_ outcome: ReadOutcome) -> Bool {
        switch outcome {
        case .handled:
            return false
        case .job(let job):
            queue.append(job)
            return true
        case .end(let status, let orderly):
            exitStatus = status
            self.orderly = orderly
            stop()
            return true
        }
    }

    /// Takes the reader's turn for a thread that reads on behalf of what it runs (a cancel check,
    /// an ask); false when another thread reads or everything stops.
    package mutating func beginReading() -> Bool {
        guard !reading, !stopping else { return false }
        reading = true
        return true
    }

    package mutating func endReading() {
        reading = false
        readingForAsk = nil
    }

    // MARK: What the host sends

    /// What a message from the host comes to.
    package enum Routing {
        /// Work for a request thread (a request is known as queued from now on).
        case job(Job)
        /// Taken in; threads waiting on something should look again.
        case wake
        /// Taken in; nobody needs waking.
        case handled
        /// Connection `connection` closed: answer `cancelled` to the requests dropped from the
        /// queue; when `closeNow`, the plugin hears of the close (no request of it runs).
        case closed(connection: UInt32, dropped: [UInt64], closeNow: Bool)
        case shutdown
        case violation(WireError)
    }

    /// Routes one message from the host. `sharedBytes` finds a request placed in shared memory
    /// (nil: outside the region).
    package mutating func receive(_ message: HostMessage, sharedBytes: (SharedMemoryLocation) -> UnsafeRawBufferPointer?) -> Routing {
        switch message {
        case .request(let id, let connection, let bytes):
            return .job(queued(.request(id: id, connection: connection, bytes: .owned(bytes))))
        case .sharedRequest(let id, let connection, let location):
            guard let bytes = sharedBytes(location) else {
                return .violation(.malformedPayload("request \(id) lies outside the shared-memory region"))
            }
            return .job(queued(.request(id: id, connection: connection, bytes: .shared(bytes))))
        case .nestedRequest(let id, let connection, let ask, let bytes):
            let job = Job.request(id: id, connection: connection, bytes: .owned(bytes))
            // Nobody waits for that answer any more: an ordinary request, then.
            return nest(job, inAsk: ask) ? wake(forAsk: ask) : .job(queued(job))
        case .call(let id, let function, let arguments):
            return .job(queued(.call(id: id, function: function, arguments: arguments)))
        case .nestedCall(let id, let ask, let function, let arguments):
            let job = Job.call(id: id, function: function, arguments: arguments)
            return nest(job, inAsk: ask) ? wake(forAsk: ask) : .job(queued(job))
        case .cancel(let id):
            cancel(id)
            return .handled
        case .openConnection(let connection, let hostIdentifier):
            return .job(.accept(connection: connection, hostIdentifier: hostIdentifier))
        case .closeConnection(let connection):
            guard let (dropped, closeNow) = closeConnection(connection) else { return .handled }
            return .closed(connection: connection, dropped: dropped, closeNow: closeNow)
        case .answer(let ask, let bytes):
            return deliver(ask, .answered(bytes)) ? wake(forAsk: ask) : .handled
        case .askFailed(let ask, let failure):
            return deliver(ask, .failed(failure)) ? wake(forAsk: ask) : .handled
        case .shutdown:
            return .shutdown
        case .hello:
            return .violation(.unexpectedMessage("second hello"))
        }
    }

    /// A request or call the host sent, known as queued from now on (a cancel finds it).
    package mutating func queued(_ job: Job) -> Job {
        if let id = job.requestID { queuedRequests.insert(id) }
        return job
    }

    /// Queues `job` for the request threads (and marks a request queued).
    package mutating func enqueue(_ job: Job) {
        queue.append(queued(job))
    }

    /// A request the host nested in ask `ask`: for the thread waiting for that answer. False when
    /// nobody waits for it any more (then it is an ordinary request).
    package mutating func nest(_ job: Job, inAsk ask: UInt64) -> Bool {
        guard asks[ask] != nil else { return false }
        asks[ask]?.nested.append(job)
        if let id = job.requestID { queuedRequests.insert(id) }
        return true
    }

    /// Running: the plugin sees it through `is_cancelled`. Queued: the thread that takes it
    /// answers `cancelled` without running it. Unknown: answered already.
    package mutating func cancel(_ id: UInt64) {
        if running.contains(id) || queuedRequests.contains(id) { cancelled.insert(id) }
    }

    package func isCancelled(_ id: UInt64) -> Bool {
        stopping || cancelled.contains(id)
    }

    /// What came for ask `ask` is there: its thread is to be woken, unless it is the reader that
    /// brought it. A worker running one request that asks has a second thread, waiting for a
    /// turn; woken at every answer, it took a processor from the asking thread each time.
    private func wake(forAsk ask: UInt64) -> Routing {
        ask == readingForAsk ? .handled : .wake
    }

    /// The answer to ask `ask` arrived; true when somebody waits for it.
    package mutating func deliver(_ ask: UInt64, _ result: AskResult) -> Bool {
        guard asks[ask] != nil, asks[ask]?.result == nil else { return false }
        asks[ask]?.result = result
        return true
    }

    /// No more work: running requests see themselves cancelled, every waiting ask fails.
    package mutating func stop() {
        stopping = true
        for id in asks.keys where asks[id]?.result == nil { asks[id]?.result = .closed }
    }

    // MARK: Requests

    /// How a request starts.
    package enum Start {
        /// Run it.
        case run
        /// Cancelled while queued, or everything stops: answer `cancelled`.
        case cancelled
        /// Its connection is closing or gone: answer that it is closed.
        case noConnection
    }

    /// Marks request `id` running on `connection` (0: a typed call).
    package mutating func begin(_ id: UInt64, connection: UInt32) -> Start {
        queuedRequests.remove(id)
        if cancelled.remove(id) != nil || stopping { return .cancelled }
        if connection != 0 {
            guard var open = connections[connection], !open.closing else { return .noConnection }
            open.running += 1
            connections[connection] = open
        }
        running.insert(id)
        return .run
    }

    /// Request `id` ended; true when its connection, closing, may now be closed (its last request
    /// ended).
    package mutating func end(_ id: UInt64, connection: UInt32) -> Bool {
        running.remove(id)
        cancelled.remove(id)
        guard connection != 0, var open = connections[connection] else { return false }
        open.running -= 1
        connections[connection] = open
        return open.closing && open.running == 0
    }

    // MARK: Connections

    /// Whether a connection `id` may be accepted: not open already, not 0, nothing stopping.
    package func mayAccept(_ id: UInt32) -> Bool {
        id != 0 && connections[id] == nil && !stopping
    }

    /// The plugin accepted connection `id`.
    package mutating func accepted(_ id: UInt32) {
        connections[id] = Connection()
    }

    /// The host closed connection `id`: its asks fail now, its queued requests are dropped (to be
    /// answered `cancelled`). `closeNow` when no request of it runs (the plugin hears of it
    /// then); nil when it was not open or closing already.
    package mutating func closeConnection(_ id: UInt32) -> (dropped: [UInt64], closeNow: Bool)? {
        guard var open = connections[id], !open.closing else { return nil }
        open.closing = true
        connections[id] = open
        for (ask, waiter) in asks where waiter.connection == id && waiter.result == nil { asks[ask]?.result = .closed }
        var dropped: [UInt64] = []
        var kept: [Job] = []
        for job in queue[queueStart...] {
            if case .request(let request, id, _) = job {
                dropped.append(request)
                queuedRequests.remove(request)
            } else {
                kept.append(job)
            }
        }
        queue = kept
        queueStart = 0
        return (dropped, open.running == 0)
    }

    /// Forgets connection `id`, for the plugin's `close`; false when it was not open.
    package mutating func removeConnection(_ id: UInt32) -> Bool {
        connections.removeValue(forKey: id) != nil
    }

    /// Forgets every connection, at the end: their numbers, in the order they were opened.
    package mutating func removeAllConnections() -> [UInt32] {
        defer { connections.removeAll() }
        return connections.keys.sorted()
    }

    package var openConnectionCount: Int { connections.count }

    // MARK: Asks

    /// Registers an ask of `thread` on `connection`: its identifier, or the errno it fails with
    /// (ECONNRESET: closing or stopping; EINVAL: no such connection; EBUSY: too many asks wait;
    /// ELOOP: nested too deep).
    package mutating func registerAsk(connection: UInt32, thread: UInt) -> Result<UInt64, AskRefusal> {
        if stopping { return .failure(AskRefusal(errno: ECONNRESET)) }
        guard var open = connections[connection] else { return .failure(AskRefusal(errno: EINVAL)) }
        if open.closing { return .failure(AskRefusal(errno: ECONNRESET)) }
        guard open.asks < asksPerConnection else { return .failure(AskRefusal(errno: EBUSY)) }
        let depth = nesting[thread, default: 0]
        guard depth < maximumNestingDepth else { return .failure(AskRefusal(errno: ELOOP)) }
        nesting[thread] = depth + 1
        open.asks += 1
        connections[connection] = open
        let id = nextAsk
        nextAsk += 1
        asks[id] = AskWaiter(connection: connection)
        return .success(id)
    }

    /// Registers a callback of a typed call that `thread` runs, to be answered like an ask: its
    /// identifier, or the errno it fails with (ECONNRESET: stopping; ELOOP: nested too deep). A
    /// callback belongs to no connection.
    package mutating func registerCallback(thread: UInt) -> Result<UInt64, AskRefusal> {
        if stopping { return .failure(AskRefusal(errno: ECONNRESET)) }
        let depth = nesting[thread, default: 0]
        guard depth < maximumNestingDepth else { return .failure(AskRefusal(errno: ELOOP)) }
        nesting[thread] = depth + 1
        let id = nextAsk
        nextAsk += 1
        asks[id] = AskWaiter(connection: callbackConnection)
        return .success(id)
    }

    package struct AskRefusal: Error, Equatable {
        package let errno: Int32

        package init(errno: Int32) {
            self.errno = errno
        }
    }

    /// What the thread waiting for ask `id` does next.
    package enum AskStep {
        case done(AskResult)
        /// Run this request the host nested in the ask, then look again.
        case runNested(Job)
        /// Read from the host (nobody else does): this thread reads its own answer.
        case read
        case wait
    }

    package mutating func nextAskStep(_ id: UInt64) -> AskStep {
        if let done = asks[id]?.result { return .done(done) }
        if let job = asks[id]?.nested.first {
            asks[id]?.nested.removeFirst()
            return .runNested(job)
        }
        if beginReading() {
            readingForAsk = id
            return .read
        }
        return .wait
    }

    /// The ask ended (answered, failed or given up): forgotten. Returns the requests nested in it
    /// that nobody ran, which run like any other, and whether a waiting thread may have something
    /// to do now that this one neither reads nor waits: the reader's turn (beside no request, or
    /// beside requests when more may run), another ask's, a queued job that may start, or the end.
    package mutating func finishAsk(_ id: UInt64, connection: UInt32, thread: UInt) -> (leftovers: [Job], wakeOthers: Bool) {
        let leftovers = asks.removeValue(forKey: id)?.nested ?? []
        connections[connection]?.asks -= 1
        let depth = nesting[thread, default: 1] - 1
        nesting[thread] = depth > 0 ? depth : nil
        let mayRead = !reading && (concurrency > 1 || jobs == 0 || asks.values.contains { $0.result == nil })
        let mayStart = jobs < concurrency && !isQueueEmpty
        return (leftovers, stopping || mayRead || mayStart)
    }

    /// What a plugin's `ask` returns for `result`: the answer bytes, or an errno with the host's
    /// code and message (for EREMOTEIO, the handler's).
    package enum AskOutcome: Equatable {
        case answered([UInt8])
        case failed(Int32, code: Int32, message: String?)
    }

    /// `result` as the plugin sees it; nil (the ask timed out) is ETIMEDOUT.
    package static func outcome(_ result: AskResult?) -> AskOutcome {
        switch result {
        case .answered(let bytes)?: return .answered(bytes)
        case .failed(let failure)?:
            switch failure.reason {
            case .unsupported: return .failed(ENOTSUP, code: 0, message: failure.message)
            case .handlerFailed: return .failed(EREMOTEIO, code: failure.code, message: failure.message)
            case .tooManyAsks: return .failed(EBUSY, code: 0, message: failure.message)
            case .tooLarge: return .failed(EMSGSIZE, code: 0, message: failure.message)
            case .closed: return .failed(ECONNRESET, code: 0, message: failure.message)
            }
        case .closed?: return .failed(ECONNRESET, code: 0, message: nil)
        case nil: return .failed(ETIMEDOUT, code: 0, message: nil)
        }
    }
}

/// The connection of a callback's ask: none is ever numbered so (the host numbers connections
/// from 1, and the worker accepts none numbered 0).
package let callbackConnection: UInt32 = 0
