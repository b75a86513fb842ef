import CPlugindShims
import Glibc
import PlugindPluginABI
import PlugindSystem
import PlugindWire
import Synchronization

/// Serves one loaded plugin. The main thread reads what the host sends and routes it: requests,
/// typed calls, connections opened and closed go to a queue that `concurrency` request threads
/// take work from; cancels mark a running request; answers to the plugin's asks wake the thread
/// that asked, and a request nested in an ask runs on that thread. Everything shared lives under
/// one `ThreadCondition`; no plugin code runs while it is held.
final class PluginServer: @unchecked Sendable {
    // @unchecked: the mutable state is `book`, guarded by `condition`; the rest is immutable
    // after `start`, or is the plugin's state pointer, which only plugin code touches.
    let plugin: LoadedPlugin
    let load: LoadConfiguration
    let transport: PipeTransport
    let sharedMemory: WorkerSharedMemory?
    let concurrency: Int
    private var state: UnsafeMutableRawPointer?
    private var hostInterface: UnsafeMutablePointer<plugind_host>?

    private let condition = ThreadCondition()
    private var book = Book()
    /// Set when a write to the host failed or the host closed its end; plugin threads set it too
    /// (through `log` and `post_message`), hence atomic.
    private let hostHungUp = Atomic(false)

    /// The most asks of one connection that may wait at once; the host allows as many.
    static let asksPerConnection = 64

    /// The most asks one thread may nest (an ask whose answer comes from a handler that sends a
    /// request, which asks again, …): each level runs the nested request on the asking thread's
    /// stack, and a request thread's stack (`ThreadCondition.stackBytes`) holds this many with
    /// room to spare. A deeper ask fails with ELOOP instead of overflowing the stack.
    static let maximumNestingDepth = 16

    init(plugin: LoadedPlugin, load: LoadConfiguration, transport: PipeTransport, sharedMemory: WorkerSharedMemory?) {
        self.plugin = plugin
        self.load = load
        self.transport = transport
        self.sharedMemory = sharedMemory
        // Two threads of the task limit stay free: the reader and one for the plugin.
        let threadRoom = load.limits.tasks > 3 ? UInt32(clamping: load.limits.tasks - 2) : 1
        self.concurrency = Int(plugin.concurrency(manifest: load.concurrency, maximum: min(64, threadRoom)))
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> PluginServer? {
        context.map { Unmanaged<PluginServer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Calls the plugin's `init`.
    func start() throws(LoadFailure) {
        guard let descriptor = plugin.descriptor else { return }
        let interface = PluginHostInterface.make(for: self)
        hostInterface = interface
        guard let initialize = descriptor.pointee.`init` else { return }
        let response = ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
        var pluginState: UnsafeMutableRawPointer?
        let status = initialize(interface, &pluginState, response.opaque)
        guard status == PLUGIND_PLUGIN_OK else {
            let message = response.errorMessage ?? "init returned \(status) without a message"
            throw LoadFailure(kind: .initializationFailed, message: message, pluginCode: status)
        }
        state = pluginState
    }

    // MARK: Reading and running: leader and followers

    /// Serves until the host closes the channel or asks to shut down. Returns the exit status.
    ///
    /// `concurrency + 1` threads take turns: one at a time reads what the host sends (the
    /// leader); a request it reads it runs itself, when a request may start and none waits before
    /// it, handing the reading to another thread first — so a request starts on the thread that
    /// read it, with no wake-up of another thread in between. Everything else it handles and
    /// reads on. One thread more than requests may run means one is always free to read the
    /// cancels and answers meant for the running ones.
    func serve() -> Int32 {
        var threads: [pthread_t] = []
        for _ in 0...concurrency {
            guard let thread = WorkerThread.start({ [self] in participate() }) else { break }
            threads.append(thread)
        }
        guard threads.count > 1 else {
            WorkerMain.report("cannot start the request threads: \(Errno(rawValue: errno))")
            stopRequests()
            for thread in threads { WorkerThread.join(thread) }
            return 2
        }
        for thread in threads { WorkerThread.join(thread) }
        let (status, orderly) = condition.withLock { (book.exitStatus, book.orderly) }
        if status == 0 { finish() }
        if orderly { try? transport.send(.goodbye) }
        return status
    }

    /// One thread's turns: run a queued job when one may start, else lead (read) when nobody
    /// does, else wait.
    private func participate() {
        _ = plugind_shim_install_alternate_signal_stack()
        let response = ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
        condition.lock()
        while true {
            if book.jobs < concurrency, let job = book.pop() {
                startJob(job, response: response)
                continue
            }
            if book.stopping { break }
            if !book.reading {
                book.reading = true
                condition.unlock()
                let outcome = readOne()
                condition.lock()
                book.reading = false
                if case .job(let job) = outcome, book.jobs < concurrency && book.isQueueEmpty {
                    // This thread runs what it read. With room for more requests, another
                    // thread reads meanwhile; with one at a time, the request itself reads when
                    // it needs to (a cancel check, an ask), and this thread again afterwards.
                    if concurrency > 1 { condition.broadcast() }
                    startJob(job, response: response)
                } else if absorb(outcome) {
                    condition.broadcast()
                }
                continue
            }
            condition.wait()
        }
        condition.unlock()
    }

    /// Takes in what a read brought (lock held): a job joins the queue, the end stops
    /// everything. True when other threads should look again.
    private func absorb(_ outcome: ReadOutcome) -> Bool {
        switch outcome {
        case .handled:
            return false
        case .job(let job):
            book.append(job)
            return true
        case .end(let status, let orderly):
            book.exitStatus = status
            book.orderly = orderly
            stopRequestsLocked()
            return true
        }
    }

    /// With the reader's turn held and the lock released: waits up to `milliseconds` for a frame
    /// and takes in what arrives. False when nothing came.
    private func pump(waitingMilliseconds milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: transport.input.rawValue, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return false }
        let outcome = readOne()
        let wake = condition.withLock { absorb(outcome) }
        if wake { condition.broadcast() }
        return true
    }

    /// Runs `job` with the lock released; the lock is held again afterwards.
    private func startJob(_ job: Job, response: ResponseBuffer) {
        book.jobs += 1
        condition.unlock()
        run(job, response: response)
        condition.lock()
        book.jobs -= 1
        // A queued job may start now, on whichever thread waits.
        if !book.isQueueEmpty { condition.broadcast() }
    }

    private enum ReadOutcome {
        case handled
        case job(Job)
        case end(status: Int32, orderly: Bool)
    }

    /// Reads one frame and routes it: a job for a thread, or handled here.
    private func readOne() -> ReadOutcome {
        if hostHungUp.load(ordering: .acquiring) { return .end(status: 0, orderly: false) }
        let frame: Frame
        do {
            guard let received = try transport.receive() else { return .end(status: 0, orderly: false) }
            frame = received
        } catch {
            PluginServerLog.protocolError(error)
            return .end(status: 2, orderly: false)
        }
        let message: HostMessage
        do {
            message = try HostMessage(frame)
        } catch {
            PluginServerLog.protocolError(error)
            return .end(status: 2, orderly: false)
        }
        switch route(message) {
        case .handled: return .handled
        case .job(let job): return .job(job)
        case .shutdown: return .end(status: 0, orderly: true)
        case .violation(let error):
            PluginServerLog.protocolError(error)
            return .end(status: 2, orderly: false)
        }
    }

    private enum Routing {
        case handled
        case job(Job)
        case shutdown
        case violation(WireError)
    }

    private func route(_ message: HostMessage) -> Routing {
        switch message {
        case .request(let id, let connection, let bytes):
            return queued(.request(id: id, connection: connection, bytes: .owned(bytes)))
        case .sharedRequest(let id, let connection, let location):
            guard let bytes = sharedMemory?.request(at: location) else {
                return .violation(.malformedPayload("request \(id) lies outside the shared-memory region"))
            }
            return queued(.request(id: id, connection: connection, bytes: .shared(bytes)))
        case .nestedRequest(let id, let connection, let ask, let bytes):
            let job = Job.request(id: id, connection: connection, bytes: .owned(bytes))
            let delivered = condition.withLock { () -> Bool in
                guard book.asks[ask] != nil else { return false }
                book.asks[ask]?.nested.append(job)
                book.queuedRequests.insert(id)
                return true
            }
            // Nobody waits for that answer any more: an ordinary request, then.
            guard delivered else { return queued(job) }
            condition.broadcast()
        case .call(let id, let function, let arguments):
            return queued(.call(id: id, function: function, arguments: arguments))
        case .cancel(let id):
            cancel(id)
        case .openConnection(let connection, let hostIdentifier):
            return .job(.accept(connection: connection, hostIdentifier: hostIdentifier))
        case .closeConnection(let connection):
            closeConnection(connection)
        case .answer(let ask, let bytes):
            deliver(ask, .answered(bytes))
        case .askFailed(let ask, let failure):
            deliver(ask, .failed(failure))
        case .shutdown:
            return .shutdown
        case .hello:
            return .violation(.unexpectedMessage("second hello"))
        }
        return .handled
    }

    /// A request, known as queued from now on (a cancel finds it).
    private func queued(_ job: Job) -> Routing {
        if let id = job.requestID { condition.withLock { _ = book.queuedRequests.insert(id) } }
        return .job(job)
    }

    // MARK: Work for the request threads

    /// Where a request's bytes are: its own array, or the host's shared region (valid until the
    /// answer is sent).
    enum RequestBytes {
        case owned([UInt8])
        case shared(UnsafeRawBufferPointer)
    }

    enum Job {
        case request(id: UInt64, connection: UInt32, bytes: RequestBytes)
        case call(id: UInt64, function: UInt32, arguments: [FunctionValue])
        case accept(connection: UInt32, hostIdentifier: String)
        case close(connection: UInt32)

        var requestID: UInt64? {
            switch self {
            case .request(let id, _, _), .call(let id, _, _): id
            case .accept, .close: nil
            }
        }
    }

    /// The answer to an ask, once it came.
    enum AskResult {
        case answered([UInt8])
        case failed(AskFailure)
        case closed
    }

    struct AskWaiter {
        let connection: UInt32
        var result: AskResult?
        /// Requests the host sent while this ask waits, for the thread that asked.
        var nested: [Job] = []
    }

    /// A connection the plugin accepted. `record` is what the plugin sees, valid until `close`
    /// returned for it.
    struct Connection {
        let record: UnsafeMutablePointer<plugind_plugin_connection>
        let state: UnsafeMutableRawPointer?
        var running = 0
        var closing = false
        var asks = 0
    }

    struct Book {
        var queue: [Job] = []
        var queueStart = 0
        var stopping = false
        /// A thread is reading from the host.
        var reading = false
        /// Jobs running now (requests, calls, accepts and closes).
        var jobs = 0
        var exitStatus: Int32 = 0
        var orderly = false

        var isQueueEmpty: Bool { queueStart == queue.count }

        mutating func append(_ job: Job) {
            queue.append(job)
        }
        /// Requests queued or running, and those the host cancelled.
        var queuedRequests: Set<UInt64> = []
        var running: Set<UInt64> = []
        var cancelled: Set<UInt64> = []
        var connections: [UInt32: Connection] = [:]
        var asks: [UInt64: AskWaiter] = [:]
        var nextAsk: UInt64 = 1
        /// Asks each thread is waiting for, nested one in another.
        var nesting: [pthread_t: Int] = [:]

        mutating func pop() -> Job? {
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
    }

    private func enqueue(_ job: Job) {
        condition.withLock {
            if let id = job.requestID { book.queuedRequests.insert(id) }
            book.queue.append(job)
        }
        condition.broadcast()
    }

    private func run(_ job: Job, response: ResponseBuffer) {
        switch job {
        case .request(let id, let connection, let bytes):
            guard let started = begin(id, connection: connection) else { return }
            switch bytes {
            case .owned(let array): array.withUnsafeBytes { handle(id, connection: started, bytes: $0, response: response) }
            case .shared(let buffer): handle(id, connection: started, bytes: buffer, response: response)
            }
            end(id, connection: connection)
        case .call(let id, let function, let arguments):
            guard begin(id, connection: 0) != nil else { return }
            switch plugin.functions.call(function, arguments: arguments) {
            case .success(let value): send(.callResult(id: id, value))
            case .failure(let refusal): send(.callFailed(id: id, message: refusal.message))
            }
            end(id, connection: 0)
        case .accept(let connection, let hostIdentifier):
            accept(connection, hostIdentifier: hostIdentifier, response: response)
        case .close(let connection):
            close(connection)
        }
    }

    /// Marks a request running; nil (and the host told) when it was cancelled while queued or
    /// its connection is closing. The connection's record and state, for the plugin.
    private func begin(_ id: UInt64, connection: UInt32) -> (UnsafeMutablePointer<plugind_plugin_connection>?, UnsafeMutableRawPointer?)? {
        enum Start {
            case run(UnsafeMutablePointer<plugind_plugin_connection>?, UnsafeMutableRawPointer?)
            case cancelled
            case noConnection
        }
        let start: Start = condition.withLock {
            book.queuedRequests.remove(id)
            if book.cancelled.remove(id) != nil || book.stopping { return .cancelled }
            var record: UnsafeMutablePointer<plugind_plugin_connection>?
            var connectionState: UnsafeMutableRawPointer?
            if connection != 0 {
                guard var open = book.connections[connection], !open.closing else { return .noConnection }
                open.running += 1
                book.connections[connection] = open
                record = open.record
                connectionState = open.state
            }
            book.running.insert(id)
            return .run(record, connectionState)
        }
        switch start {
        case .run(let record, let connectionState): return (record, connectionState)
        case .cancelled:
            send(.cancelled(id: id))
            return nil
        case .noConnection:
            send(.failure(id: id, PluginFailure(code: ReservedFailureCode.connectionClosed, message: "connection \(connection) is closed")))
            return nil
        }
    }

    private func end(_ id: UInt64, connection: UInt32) {
        let closeNow = condition.withLock { () -> Bool in
            book.running.remove(id)
            book.cancelled.remove(id)
            guard connection != 0, var open = book.connections[connection] else { return false }
            open.running -= 1
            book.connections[connection] = open
            return open.closing && open.running == 0
        }
        if closeNow { enqueue(.close(connection: connection)) }
    }

    /// `bytes` may lie in shared memory: valid until the answer is sent, like the plugin's view.
    private func handle(
        _ id: UInt64,
        connection: (record: UnsafeMutablePointer<plugind_plugin_connection>?, state: UnsafeMutableRawPointer?),
        bytes: UnsafeRawBufferPointer,
        response: ResponseBuffer
    ) {
        guard let descriptor = plugin.descriptor else {
            let message = "the plugin is function-only; it has no request handler"
            send(.failure(id: id, PluginFailure(code: ReservedFailureCode.noRequestHandler, message: message)))
            return
        }
        let region = sharedMemory?.claimResponseRegion()
        response.reset(sharedRegion: region)
        var empty: UInt8 = 0
        let status = withUnsafePointer(to: &empty) { emptyPointer -> Int32 in
            var request = plugind_plugin_request(
                identifier: id,
                bytes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyPointer,
                length: bytes.count,
                connection: connection.record?.pointee.identifier ?? 0,
                connection_state: connection.state
            )
            return descriptor.pointee.handle(state, &request, response.opaque)
        }
        var placed = false
        defer { if region != nil && !placed { sharedMemory?.release() } }
        if isCancelled(id) {
            send(.cancelled(id: id))
        } else if let attempted = response.attemptedSize {
            let message = "response of \(attempted) bytes exceeds the message limit of \(response.limit) bytes"
            send(.failure(id: id, PluginFailure(code: ReservedFailureCode.responseTooLarge, message: message)))
        } else if status == PLUGIND_PLUGIN_OK {
            if response.isInSharedRegion && response.count >= SharedMemoryLayout.threshold, let sharedMemory {
                placed = true
                send(.sharedResponse(id: id, sharedMemory.placedResponse(length: response.count)))
            } else {
                let header = FrameHeader(kind: .response, requestID: id, payloadLength: response.count)
                sendChecked { () throws(SystemError) in try transport.send(header, payload: response.bytes) }
            }
        } else {
            var message = response.errorMessage ?? "the plugin returned error \(status) without a message"
            if let note = DescriptorLimitNote.current(limit: load.limits.openFiles) { message += " (\(note))" }
            send(.failure(id: id, PluginFailure(code: status, message: message)))
        }
    }

    // MARK: Connections

    private func accept(_ connection: UInt32, hostIdentifier: String, response: ResponseBuffer) {
        let alreadyOpen = condition.withLock { book.connections[connection] != nil || book.stopping }
        guard !alreadyOpen, connection != 0 else {
            send(.connectionRefused(connection, reason: "connection \(connection) is already open"))
            return
        }
        guard let hostName = strdup(hostIdentifier) else {
            send(.connectionRefused(connection, reason: "the worker is out of memory"))
            return
        }
        let record = UnsafeMutablePointer<plugind_plugin_connection>.allocate(capacity: 1)
        record.initialize(to: plugind_plugin_connection(identifier: connection, host_identifier: hostName))
        var connectionState: UnsafeMutableRawPointer?
        if let accept = plugin.accept {
            response.reset()
            let status = accept(state, record, &connectionState, response.opaque)
            guard status == PLUGIND_PLUGIN_OK else {
                free(UnsafeMutableRawPointer(mutating: record.pointee.host_identifier))
                record.deallocate()
                let reason = response.errorMessage ?? "the plugin refused the connection (code \(status))"
                send(.connectionRefused(connection, reason: reason))
                return
            }
        }
        condition.withLock { book.connections[connection] = Connection(record: record, state: connectionState) }
        send(.connectionAccepted(connection))
    }

    /// The host closed `connection`: its asks fail now, its queued requests are dropped, and the
    /// plugin hears of it once no request of it runs.
    private func closeConnection(_ connection: UInt32) {
        var dropped: [UInt64] = []
        let closeNow = condition.withLock { () -> Bool in
            guard var open = book.connections[connection], !open.closing else { return false }
            open.closing = true
            book.connections[connection] = open
            for (id, waiter) in book.asks where waiter.connection == connection && waiter.result == nil {
                book.asks[id]?.result = .closed
            }
            var kept: [Job] = []
            for job in book.queue[book.queueStart...] {
                if case .request(let id, connection, _) = job {
                    dropped.append(id)
                    book.queuedRequests.remove(id)
                } else {
                    kept.append(job)
                }
            }
            book.queue = kept
            book.queueStart = 0
            return open.running == 0
        }
        condition.broadcast()
        for id in dropped { send(.cancelled(id: id)) }
        if closeNow { enqueue(.close(connection: connection)) }
    }

    private func close(_ connection: UInt32) {
        guard let open = condition.withLock({ book.connections.removeValue(forKey: connection) }) else { return }
        plugin.close?(state, open.record, open.state)
        free(UnsafeMutableRawPointer(mutating: open.record.pointee.host_identifier))
        open.record.deallocate()
    }

    // MARK: Cancellation and the end

    /// Called by the plugin (through `is_cancelled`), from any thread. When nobody reads from the
    /// host (one request at a time, and this is it), reads what has arrived first.
    func isCancelled(_ id: UInt64) -> Bool {
        if hostHungUp.load(ordering: .acquiring) { return true }
        let mayRead = condition.withLock { () -> Bool in
            guard !book.reading, !book.stopping else { return false }
            book.reading = true
            return true
        }
        if mayRead {
            while pump(waitingMilliseconds: 0) {}
            condition.withLock { book.reading = false }
        }
        return condition.withLock { book.stopping || book.cancelled.contains(id) }
    }

    /// Running: the plugin sees it through `is_cancelled`. Queued: the thread that takes it
    /// answers `cancelled` without running it. Unknown: answered already.
    private func cancel(_ id: UInt64) {
        condition.withLock {
            if book.running.contains(id) || book.queuedRequests.contains(id) { book.cancelled.insert(id) }
        }
    }

    /// No more work: running requests see themselves cancelled, every waiting ask fails.
    private func stopRequests() {
        condition.withLock { stopRequestsLocked() }
        condition.broadcast()
    }

    private func stopRequestsLocked() {
        book.stopping = true
        for id in book.asks.keys where book.asks[id]?.result == nil { book.asks[id]?.result = .closed }
    }

    /// After the request threads ended: the plugin hears every connection close, then `deinit`.
    private func finish() {
        let open = condition.withLock { () -> [Connection] in
            defer { book.connections.removeAll() }
            return Array(book.connections.values)
        }
        for connection in open {
            plugin.close?(state, connection.record, connection.state)
            free(UnsafeMutableRawPointer(mutating: connection.record.pointee.host_identifier))
            connection.record.deallocate()
        }
        if let deinitialize = plugin.descriptor?.pointee.deinit {
            deinitialize(state)
            state = nil
        }
    }

    // MARK: Asks

    /// What `ask` returns: the answer bytes, or an errno value with, for EREMOTEIO, the host's
    /// code and message.
    enum AskOutcome {
        case answered([UInt8])
        case failed(Int32, code: Int32, message: String?)
    }

    /// Asks the host on `connection` and blocks until the answer. Runs the requests the host
    /// nests in this ask on the way, with a response buffer of their own.
    func ask(connection: UInt32, bytes: UnsafeRawBufferPointer, timeoutMilliseconds: UInt32) -> AskOutcome {
        guard bytes.count <= Int(load.limits.maxMessageBytes) else { return .failed(EMSGSIZE, code: 0, message: nil) }
        let registered: Result<UInt64, Errno> = condition.withLock {
            if book.stopping { return .failure(Errno(rawValue: ECONNRESET)) }
            guard var open = book.connections[connection] else { return .failure(Errno(rawValue: EINVAL)) }
            if open.closing { return .failure(Errno(rawValue: ECONNRESET)) }
            guard open.asks < Self.asksPerConnection else { return .failure(Errno(rawValue: EBUSY)) }
            let depth = book.nesting[pthread_self(), default: 0]
            guard depth < Self.maximumNestingDepth else { return .failure(Errno(rawValue: ELOOP)) }
            book.nesting[pthread_self()] = depth + 1
            open.asks += 1
            book.connections[connection] = open
            let id = book.nextAsk
            book.nextAsk += 1
            book.asks[id] = AskWaiter(connection: connection)
            return .success(id)
        }
        let id: UInt64
        switch registered {
        case .success(let registeredID): id = registeredID
        case .failure(let error): return .failed(error.rawValue, code: 0, message: nil)
        }
        let sent =
            (try? transport.send(FrameHeader(kind: .ask, requestID: id, payloadLength: bytes.count, connection: connection), payload: bytes))
            != nil
        if !sent { hostHungUp.store(true, ordering: .releasing) }
        let timeout = timeoutMilliseconds > 0 ? UInt64(timeoutMilliseconds) : UInt64(load.askTimeoutMilliseconds)
        let deadline = ThreadCondition.deadline(afterMilliseconds: timeout)
        var nestedResponse: ResponseBuffer?
        var result: AskResult? = sent ? nil : .closed
        condition.lock()
        while result == nil {
            if let done = book.asks[id]?.result {
                result = done
                break
            }
            if let job = book.asks[id]?.nested.first {
                book.asks[id]?.nested.removeFirst()
                condition.unlock()
                let buffer = nestedResponse ?? ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
                nestedResponse = buffer
                run(job, response: buffer)
                condition.lock()
                continue
            }
            let remaining = ThreadCondition.milliseconds(until: deadline)
            if remaining <= 0 { break }
            if !book.reading && !book.stopping {
                // Nobody reads: this thread reads its own answer, with no other thread to wake.
                book.reading = true
                condition.unlock()
                _ = pump(waitingMilliseconds: Int32(min(remaining, 100)))
                condition.lock()
                book.reading = false
                continue
            }
            _ = condition.wait(until: deadline)
        }
        let leftovers = book.asks.removeValue(forKey: id)?.nested ?? []
        book.connections[connection]?.asks -= 1
        let depth = book.nesting[pthread_self(), default: 1] - 1
        book.nesting[pthread_self()] = depth > 0 ? depth : nil
        condition.unlock()
        // Whoever waits may read now, or run what this thread's reading queued.
        condition.broadcast()
        // Requests nested in an ask nobody waits for any more run like any other.
        for job in leftovers { enqueue(job) }
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
        case nil:
            try? transport.send(.askCancelled(id: id))
            return .failed(ETIMEDOUT, code: 0, message: nil)
        }
    }

    private func deliver(_ ask: UInt64, _ result: AskResult) {
        condition.withLock {
            if book.asks[ask] != nil && book.asks[ask]?.result == nil { book.asks[ask]?.result = result }
        }
        condition.broadcast()
    }

    // MARK: Messages to the host (thread-safe: the transport serialises writes)

    func sendLog(_ level: PluginLogLevel, _ message: String) {
        send(.log(level: level, message: message))
    }

    func sendEvent(requestID: UInt64, bytes: UnsafeRawBufferPointer) -> Int32 {
        guard bytes.count <= Int(load.limits.maxMessageBytes) else { return EMSGSIZE }
        do {
            try transport.send(FrameHeader(kind: .event, requestID: requestID, payloadLength: bytes.count), payload: bytes)
            return 0
        } catch {
            return error.errno.rawValue
        }
    }

    func sendProgress(requestID: UInt64, completed: UInt64, total: UInt64) -> Int32 {
        do {
            try transport.send(.progress(requestID: requestID, completed: completed, total: total))
            return 0
        } catch {
            return error.errno.rawValue
        }
    }

    private func send(_ message: WorkerMessage) {
        sendChecked { () throws(SystemError) in try transport.send(message) }
    }

    /// A failed write means the host is gone; the worker stops at the next read.
    private func sendChecked(_ body: () throws(SystemError) -> Void) {
        do {
            try body()
        } catch {
            hostHungUp.store(true, ordering: .releasing)
        }
    }
}

enum PluginServerLog {
    static func protocolError(_ error: any Error) {
        WorkerMain.report("protocol error: \(error)")
    }
}
