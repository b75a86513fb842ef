import CPlugindShims
import Glibc
import PlugindPluginABI
import PlugindSystem
import PlugindWire
import PlugindWorkerCore
import Synchronization

/// Serves one loaded plugin: the threads and the plugin's ABI calls. What the host sends is read
/// by one thread at a time and routed: requests, typed calls, connections opened and closed are
/// work for `concurrency` request threads; cancels mark a running request; answers to the
/// plugin's asks wake the thread that asked, and a request nested in an ask runs on that thread.
/// The bookkeeping is `WorkerCore`, a state machine without system calls, under one
/// `ThreadCondition`; no plugin code runs and nothing is read or written while it is held.
///
/// One file: reading, the request threads, connections, cancellation and asks all work on
/// `core` under `condition`, both private; files of their own would have to open them to the
/// whole worker. The decisions themselves are `WorkerCore`'s, tested without threads.
final class PluginServer: @unchecked Sendable {
    // @unchecked: the mutable state is `core` and `records`, guarded by `condition`; the rest is
    // immutable after `start`, or is the plugin's state pointer, which only plugin code touches.
    let plugin: LoadedPlugin
    let load: LoadConfiguration
    let transport: PipeTransport
    let sharedMemory: WorkerSharedMemory?
    let concurrency: Int
    private var state: UnsafeMutableRawPointer?

    private let condition = ThreadCondition()
    /// Whether the last request or call read was marked `FrameFlags.pollForNext`: the host awaits
    /// few answers and expects to send again soon. While it is, a thread that is to read (the
    /// next request, or the answer to an ask) polls a moment before it sleeps (`BusyPolling`);
    /// under load the host marks nothing and nobody polls.
    private let hostExpectsSoon = Atomic(false)
    private var core: WorkerCore
    /// What the plugin sees of each connection it accepted, by number: the core knows the
    /// numbers, and is told of each change under the same lock.
    private var records: [UInt32: ConnectionRecord] = [:]

    typealias Job = WorkerCore.Job

    /// What the plugin sees of a connection it accepted: valid until `close` returned for it.
    struct ConnectionRecord {
        let record: UnsafeMutablePointer<plugind_plugin_connection>
        let state: UnsafeMutableRawPointer?

        /// After the plugin's `close` (or a refused accept): the record is gone.
        func free() {
            Glibc.free(UnsafeMutableRawPointer(mutating: record.pointee.host_identifier))
            record.deallocate()
        }
    }
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
        self.core = WorkerCore(
            concurrency: concurrency, asksPerConnection: Self.asksPerConnection, maximumNestingDepth: Self.maximumNestingDepth)
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> PluginServer? {
        context.map { Unmanaged<PluginServer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// How long a worker of `plugind debug` waits for the debugger to attach.
    static let debuggerWaitSeconds: UInt32 = 60

    /// Calls the plugin's `init`.
    func start() throws(LoadFailure) {
        guard let descriptor = plugin.descriptor else { return }
        let interface = PluginHostInterface.make(for: self)
        if load.mode == .debug {
            // Stopped in the debugger with the init's address (nil: the plugin has none) at hand.
            let waited = plugind_shim_debug_wait_for_release(Self.debuggerWaitSeconds)
            guard waited == 0 else {
                let cause = waited == ETIMEDOUT ? "no debugger attached within \(Self.debuggerWaitSeconds) s" : "\(Errno(rawValue: waited))"
                throw LoadFailure(kind: .confinementFailed, message: "stopped before init for a debugger: \(cause)")
            }
            plugind_shim_debug_stop_before_init(unsafeBitCast(descriptor.pointee.`init`, to: UnsafeRawPointer?.self))
        }
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
    /// cancels and answers meant for the running ones: the calling thread (a thread the worker
    /// started, see `WorkerMain.run`) and `concurrency` more. `whileServing` runs on the calling
    /// thread once the others serve; then it takes its turns too, and waits for them to end.
    func serve(whileServing: () -> Void) -> Int32 {
        var threads: [pthread_t] = []
        for _ in 0..<concurrency {
            guard let thread = WorkerThread.start({ [self] in participate() }) else { break }
            threads.append(thread)
        }
        guard !threads.isEmpty else {
            WorkerMain.report("cannot start the request threads: \(Errno(rawValue: errno))")
            stopRequests()
            return 2
        }
        whileServing()
        participate()
        for thread in threads { WorkerThread.join(thread) }
        let (status, orderly) = condition.withLock { (core.exitStatus, core.orderly) }
        if status == 0 { finish() }
        if orderly { try? transport.send(.goodbye) }
        return status
    }

    /// One thread's turns (`WorkerCore.nextTurn`): run a queued job when one may start, else lead
    /// (read) when nobody does, else wait.
    private func participate() {
        _ = plugind_shim_install_alternate_signal_stack()
        let response = ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
        condition.lock()
        turns: while true {
            switch core.nextTurn() {
            case .run(let job):
                runUnlocked(job, response: response)
            case .stop:
                break turns
            case .read:
                let polls = hostExpectsSoon.load(ordering: .relaxed)
                condition.unlock()
                let outcome = readOne(pollingUntil: polls ? .after(BusyPolling.window) : nil)
                // Asked before the lock: it may read the ring, and write the host a wake-up.
                var moreArrived = false
                if concurrency > 1, case .job = outcome { moreArrived = transport.hasBufferedFrame }
                condition.lock()
                switch core.read(outcome) {
                case .run(let job, let wakeOthers):
                    // With room for more requests, another thread reads meanwhile, any waiter
                    // (`WorkerCore.AfterRead.run`); with one at a time, the request itself reads
                    // when it needs to (a cancel check, an ask), and this thread again afterwards.
                    // One waiter is woken when nothing more has arrived, sparing the others a
                    // wake-up per request; all when more waits, so that the first to get a
                    // processor reads it rather than one that waits for a busy processor.
                    if wakeOthers {
                        if moreArrived { condition.broadcast() } else { condition.signal() }
                    }
                    runUnlocked(job, response: response)
                case .wake:
                    condition.broadcast()
                case .nothing:
                    break
                }
            case .wait:
                condition.wait()
            }
        }
        condition.unlock()
    }

    /// With the reader's turn held and the lock released: waits up to `milliseconds` for a frame
    /// and takes in what arrives. False when nothing came. While the host expects to send soon,
    /// it polls a moment before it sleeps (`hostExpectsSoon`).
    private func pump(waitingMilliseconds milliseconds: Int32) -> Bool {
        let polls = milliseconds > 0 && hostExpectsSoon.load(ordering: .relaxed)
        guard transport.awaitFrame(waitingMilliseconds: milliseconds, pollingUntil: polls ? .after(BusyPolling.window) : nil) else {
            return false
        }
        let outcome = readOne()
        let wake = condition.withLock { core.absorb(outcome) }
        if wake { condition.broadcast() }
        return true
    }

    /// Runs `job` (counted as running by the core) with the lock released; the lock is held
    /// again afterwards.
    private func runUnlocked(_ job: Job, response: ResponseBuffer) {
        condition.unlock()
        run(job, response: response)
        condition.lock()
        // A queued job may start now, on whichever thread waits.
        if core.jobFinished() { condition.broadcast() }
    }

    /// Reads one frame and routes it: a job for a thread, or handled here.
    private func readOne(pollingUntil: MonotonicInstant? = nil) -> WorkerCore.ReadOutcome {
        if hostHungUp.load(ordering: .acquiring) { return .end(status: 0, orderly: false) }
        let frame: Frame
        do {
            guard let received = try transport.receive(pollingUntil: pollingUntil) else { return .end(status: 0, orderly: false) }
            frame = received
            // With more than one request thread, the thread that takes the reader's turn from this
            // one polls for the next request as one request thread does: the host marks requests
            // only while it awaits few answers, and polling stops when a yield found the
            // processors busy, so it takes no processor from the threads that serve.
            if frame.header.kind == .request || frame.header.kind == .call {
                hostExpectsSoon.store(frame.header.flags.contains(.pollForNext) && BusyPolling.isWorthwhile, ordering: .relaxed)
            }
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
        let routing = condition.withLock { core.receive(message) { sharedMemory?.request(at: $0) } }
        switch routing {
        case .job(let job): return .job(job)
        case .handled: return .handled
        case .wake:
            condition.broadcast()
            return .handled
        case .closed(let connection, let dropped, let closeNow):
            condition.broadcast()
            for id in dropped { send(.cancelled(id: id)) }
            if closeNow { enqueue(.close(connection: connection)) }
            return .handled
        case .shutdown: return .end(status: 0, orderly: true)
        case .violation(let error):
            PluginServerLog.protocolError(error)
            return .end(status: 2, orderly: false)
        }
    }

    // MARK: Work for the request threads

    private func enqueue(_ job: Job) {
        condition.withLock { core.enqueue(job) }
        condition.broadcast()
    }

    private func run(_ job: Job, response: ResponseBuffer) {
        let servedBefore = job.requestID.map { plugind_shim_stack_serve_request($0) }
        defer { if let servedBefore { plugind_shim_stack_serve_request(servedBefore) } }
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
            let result = plugin.functions.call(
                function, arguments: arguments, maximumBytes: Int(clamping: load.limits.maxMessageBytes),
                forward: { [self] parameter, values in forwardCallback(call: id, parameter: parameter, arguments: values) })
            switch result {
            case .success(let reply): sendCallResult(id, reply)
            case .failure(let refusal) where refusal.inCallback: send(.callbackFailed(id: id, message: refusal.message))
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
        let (start, record) = condition.withLock { (core.begin(id, connection: connection), records[connection]) }
        switch start {
        case .run: return (record?.record, record?.state)
        case .cancelled:
            send(.cancelled(id: id))
            return nil
        case .noConnection:
            send(.failure(id: id, PluginFailure(code: ReservedFailureCode.connectionClosed, message: "connection \(connection) is closed")))
            return nil
        }
    }

    private func end(_ id: UInt64, connection: UInt32) {
        if condition.withLock({ core.end(id, connection: connection) }) { enqueue(.close(connection: connection)) }
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
        // Only a cancel already read turns the answer into `cancelled`: the host takes either as
        // the cancel's acknowledgement, and reading what it sent since (a poll of the pipe, and
        // with the rings a wait announced that made the host write a wake-up) cost a system call
        // or two per request while the next requests waited unread.
        if condition.withLock({ core.isCancelled(id) }) {
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

    /// A call's result: in the shared region when its out buffers are large and the region is
    /// free (one copy, as a large response), else through the ring or pipe.
    private func sendCallResult(_ id: UInt64, _ reply: FunctionCallReply) {
        let outputBytes = reply.outputs.reduce(0) { total, output in
            if case .bytes(let bytes) = output { return total + bytes.count }
            return total
        }
        guard outputBytes >= SharedMemoryLayout.threshold, let sharedMemory, let region = sharedMemory.claimResponseRegion() else {
            return send(.callResult(id: id, reply))
        }
        // Room for the buffers and what frames them: one allocation, no growth copies.
        var writer = PayloadWriter(capacity: outputBytes + 64 + 16 * reply.outputs.count)
        writer.write(reply)
        guard writer.bytes.count <= region.count, let start = region.baseAddress else {
            sharedMemory.release()
            return send(.callResult(id: id, reply))
        }
        writer.bytes.withUnsafeBytes { encoded in
            if let source = encoded.baseAddress { start.copyMemory(from: source, byteCount: encoded.count) }
        }
        send(.sharedCallResult(id: id, sharedMemory.placedResponse(length: writer.bytes.count)))
    }

    // MARK: Connections

    private func accept(_ connection: UInt32, hostIdentifier: String, response: ResponseBuffer) {
        guard condition.withLock({ core.mayAccept(connection) }) else {
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
                ConnectionRecord(record: record, state: nil).free()
                let reason = response.errorMessage ?? "the plugin refused the connection (code \(status))"
                send(.connectionRefused(connection, reason: reason))
                return
            }
        }
        condition.withLock {
            core.accepted(connection)
            records[connection] = ConnectionRecord(record: record, state: connectionState)
        }
        send(.connectionAccepted(connection))
    }

    /// The host closed `connection`: its asks fail now, its queued requests are dropped, and the
    /// plugin hears of it once no request of it runs.
    private func close(_ connection: UInt32) {
        let removed = condition.withLock { core.removeConnection(connection) ? records.removeValue(forKey: connection) : nil }
        guard let open = removed else { return }
        plugin.close?(state, open.record, open.state)
        open.free()
    }

    // MARK: Cancellation and the end

    /// Called by the plugin (through `is_cancelled`), from any thread. When nobody reads from the
    /// host (one request at a time, and this is it), reads what has arrived first.
    func isCancelled(_ id: UInt64) -> Bool {
        if hostHungUp.load(ordering: .acquiring) { return true }
        if condition.withLock({ core.beginReading() }) {
            while pump(waitingMilliseconds: 0) {}
            condition.withLock { core.endReading() }
        }
        return condition.withLock { core.isCancelled(id) }
    }

    /// No more work: running requests see themselves cancelled, every waiting ask fails.
    private func stopRequests() {
        condition.withLock { core.stop() }
        condition.broadcast()
    }

    /// After the request threads ended: the plugin hears every connection close, then `deinit`.
    private func finish() {
        let open = condition.withLock { core.removeAllConnections().compactMap { records.removeValue(forKey: $0) } }
        for connection in open {
            plugin.close?(state, connection.record, connection.state)
            connection.free()
        }
        if let deinitialize = plugin.descriptor?.pointee.deinit {
            deinitialize(state)
            state = nil
        }
    }

    // MARK: Asks

    typealias AskOutcome = WorkerCore.AskOutcome

    /// Asks the host on `connection` and blocks until the answer. Runs the requests the host
    /// nests in this ask on the way, with a response buffer of their own.
    func ask(connection: UInt32, bytes: UnsafeRawBufferPointer, timeoutMilliseconds: UInt32) -> AskOutcome {
        guard bytes.count <= Int(load.limits.maxMessageBytes) else { return .failed(EMSGSIZE, code: 0, message: nil) }
        let thread = UInt(pthread_self())
        let id: UInt64
        switch condition.withLock({ core.registerAsk(connection: connection, thread: thread) }) {
        case .success(let registered): id = registered
        case .failure(let refusal): return .failed(refusal.errno, code: 0, message: nil)
        }
        let header = FrameHeader(kind: .ask, requestID: id, payloadLength: bytes.count, connection: connection)
        let sent = (try? transport.send(header, payload: bytes)) != nil
        if !sent { hostHungUp.store(true, ordering: .releasing) }
        let timeout = timeoutMilliseconds > 0 ? UInt64(timeoutMilliseconds) : UInt64(load.askTimeoutMilliseconds)
        let deadline = ThreadCondition.deadline(afterMilliseconds: timeout)
        let result = sent ? awaitAnswer(id, until: deadline) : .closed
        let (leftovers, wakeOthers) = condition.withLock { core.finishAsk(id, connection: connection, thread: thread) }
        // Whoever waits may read now, or run what this thread's reading queued.
        if wakeOthers { condition.broadcast() }
        // Requests nested in an ask nobody waits for any more run like any other.
        for job in leftovers { enqueue(job) }
        if result == nil { try? transport.send(.askCancelled(id: id)) }
        return WorkerCore.outcome(result)
    }

    /// Waits for the answer to ask `id` until `deadline`, running what the host nests in it and
    /// reading from the host when nobody else does. Nil when the deadline passed.
    private func awaitAnswer(_ id: UInt64, until deadline: ThreadDeadline) -> WorkerCore.AskResult? {
        var nestedResponse: ResponseBuffer?
        condition.lock()
        defer { condition.unlock() }
        while true {
            switch core.nextAskStep(id) {
            case .done(let result):
                return result
            case .runNested(let job):
                condition.unlock()
                let buffer = nestedResponse ?? ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
                nestedResponse = buffer
                run(job, response: buffer)
                condition.lock()
            case .read:
                let remaining = ThreadCondition.milliseconds(until: deadline)
                condition.unlock()
                // Nobody reads: this thread reads its own answer, with no other thread to wake.
                if remaining > 0 { _ = pump(waitingMilliseconds: Int32(min(remaining, 100))) }
                condition.lock()
                core.endReading()
                if remaining <= 0 { return nil }
            case .wait:
                if ThreadCondition.milliseconds(until: deadline) <= 0 { return nil }
                _ = condition.wait(until: deadline)
            }
        }
    }

    // MARK: Callbacks

    /// Forwards the library's call of a callback of typed call `call` to the host and blocks
    /// until the handler answers, running what the host nests in it (a typed call the handler
    /// makes) on the way, as an ask does.
    func forwardCallback(
        call: UInt64, parameter: UInt32, arguments: [FunctionValue]
    ) -> Result<FunctionValue, CallbackCall.CallbackFailure> {
        let thread = UInt(pthread_self())
        let id: UInt64
        switch condition.withLock({ core.registerCallback(thread: thread) }) {
        case .success(let registered): id = registered
        case .failure(let refusal):
            return .failure(.init(message: "could not be forwarded to the host: \(Errno(rawValue: refusal.errno))"))
        }
        let sent = (try? transport.send(.callback(id: id, call: call, parameter: parameter, arguments: arguments))) != nil
        if !sent { hostHungUp.store(true, ordering: .releasing) }
        let deadline = ThreadCondition.deadline(afterMilliseconds: UInt64(load.askTimeoutMilliseconds))
        let result = sent ? awaitAnswer(id, until: deadline) : .closed
        let (leftovers, wakeOthers) = condition.withLock { core.finishAsk(id, connection: callbackConnection, thread: thread) }
        if wakeOthers { condition.broadcast() }
        for job in leftovers { enqueue(job) }
        if result == nil { try? transport.send(.askCancelled(id: id)) }
        switch result {
        case .answered(let bytes)?:
            var reader = PayloadReader(bytes)
            guard let value = try? reader.readFunctionValue(), reader.remaining == 0 else {
                return .failure(.init(message: "was answered with bytes that are not a value"))
            }
            return .success(value)
        case .failed(let failure)?:
            return .failure(.init(message: "failed in the host's handler: \(failure.message)"))
        case .closed?:
            return .failure(.init(message: "was not answered: the host closed the channel"))
        case nil:
            return .failure(.init(message: "was not answered within \(load.askTimeoutMilliseconds) ms"))
        }
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
