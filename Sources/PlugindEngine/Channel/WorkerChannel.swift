import FoundationEssentials
import Glibc
import PlugindSystem
package import PlugindWire
import Synchronization

/// The host's side of one worker: carries out what `ChannelProtocol` decides, the worker's life
/// and how it is ended included (which it reads from the protocol, never keeps). It owns the
/// continuations of callers waiting for answers, who listens, the timer, the handlers of the
/// plugin's asks, the descriptors and the process. Frames are queued on the `FrameWriter` in the order the
/// protocol decided, under the lock; they are written, large copies made and continuations
/// resumed after it is released. Reading runs on the `WorkerEventLoop` thread.
///
/// Longer than a file should be: what stays here is the stored state and the operations callers
/// await (the handshake, requests and calls, connections, the plugin's messages, the end), each
/// an input to the protocol under the lock and its effects after, sharing private helpers
/// (`reserveRequest`, `start`, …) that files of their own would have to open to the module. The
/// worker's events, the effects, flow control and ring polling are in `WorkerChannel+*.swift`.
package final class WorkerChannel: EventLoopHandler {
    let pluginIdentifier: String
    let limits: ResourceLimits
    let process: WorkerProcess
    package var processIdentifier: Int32 { process.identifier }
    let toWorker: FileDescriptor
    let input: WorkerInput
    var fromWorker: FileDescriptor { input.frames }
    var diagnostics: FileDescriptor { input.output }
    package let loop: WorkerEventLoop
    let writer: FrameWriter
    let state: Locked<State>
    /// Held by whoever reads from the worker and dispatches what it read (the loop, a caller
    /// polling the ring for its answer, the handshake's waiter), so that frames are dispatched
    /// in the order the worker sent them.
    let readerTurn = Locked(())
    /// Callers polling the ring for their answers: while there are any, the ring says so, and
    /// the worker sends no wake-ups.
    let ringPollers = Atomic<Int>(0)
    /// How long a request whose deadline passed may take to acknowledge the cancel before the
    /// worker is considered stuck and killed.
    let cancellationGracePeriod: Duration
    /// The launch whose files name the objects of the worker's stack reports, and the worker
    /// executable that symbolizes them; nil: stacks keep their addresses.
    let stackSource: (plan: LaunchPlan, executable: String)?
    /// What the owner sees of this worker: its log entries and its page for `plugind top`.
    let activity: WorkerActivity?

    /// Made when a stack needs naming, never on the launch's path.
    var stackObjects: StackObjectFiles? {
        stackSource.map { StackObjectFiles(plan: $0.plan, workerExecutable: $0.executable) }
    }

    /// Answers the plugin's asks on one connection.
    package typealias RequestHandler = @Sendable ([UInt8]) async throws -> [UInt8]

    /// Answers the library's calls of a typed call's callbacks: the callback's parameter index
    /// and its arguments, as the worker sent them (the caller checks them against the
    /// declaration); the value returned goes back to the library.
    package typealias CallbackHandler = @Sendable (_ parameter: UInt32, _ arguments: [FunctionValue]) async throws -> FunctionValue

    struct State {
        var machine: ChannelProtocol
        var handshake: CheckedContinuation<Ready, any Error>?
        var requests: [UInt64: ReplyWaiter] = [:]
        var connections: [UInt32: CheckedContinuation<Void, any Error>] = [:]
        var handlers: [UInt32: RequestHandler] = [:]
        /// The callback handler of each typed call that has callbacks, while it runs.
        var callbackHandlers: [UInt64: CallbackHandler] = [:]
        /// The library's calls of a typed call's callbacks that its caller, polling for the
        /// call's answer, runs on its own thread: present (perhaps empty) while it polls.
        var callbacksForPoller: [UInt64: [PendingAnswer]] = [:]
        /// Connections whose handler may start on the thread of a caller that polls for an
        /// answer on them (`openConnection(handler:timeout:startsOnCaller:)`).
        var handlersStartingOnCaller: Set<UInt32> = []
        /// The plugin's asks on a connection whose request's caller polls for its answer, for
        /// that caller to run on its own thread: present (perhaps empty) while it polls.
        var asksForPoller: [UInt32: [PendingAnswer]] = [:]
        var askTasks: [UInt64: Task<Void, Never>] = [:]
        /// The one loop timer of the channel: set for the protocol's earliest deadline (or an
        /// earlier one that has since been disarmed, which then fires for nothing), and its token
        /// once scheduled (that happens after the lock is released).
        var armedDeadline: ContinuousClock.Instant?
        var armedToken: UInt64?
        /// The pipe to the worker is watched for room.
        var writeInterest = false
        /// Reading from the worker stopped: it left more than `heldFrameBudget` unread.
        var readingPaused = false
        /// When the worker last read something of what the host queued, while reading is paused.
        var lastDrain = ContinuousClock.now
        /// The descriptor to the worker: closed once, on the loop thread.
        var writeEnd = WriteEnd.open
        var output: TailBuffer
        var interruptionHandler: (@Sendable () -> Void)?
        var terminationObserver: (@Sendable (WorkerTermination) -> Void)?
        /// Each reader of messages, with the connection whose messages it reads.
        var subscribers: [Int: (buffer: AppExtensionMessages.Buffer, connection: UInt32)] = [:]
        var nextSubscriberID = 0
        var terminationWaiters: [CheckedContinuation<WorkerTermination, Never>] = []
        /// The memory large payloads travel through, when the host created it, until the worker
        /// answers `ready`: then it becomes `sharedRequests` if the worker agreed to it.
        var sharedMemoryOffered: (memory: SharedMemory, layout: SharedMemoryLayout)?
        /// Where large requests go; nil until the worker agreed to shared memory, and again once
        /// it ended.
        var sharedRequests: SharedRequestRegion?
        /// Responses read from the worker's shared region; the worker reuses it when this
        /// count, published in the region's header, reaches the number it placed there.
        var sharedResponsesRead: UInt64 = 0
        /// The worker polls for the request after one marked `pollForNext` (its handshake
        /// offered `ProtocolFeature.busyPolling`).
        var workerPollsForNext = false
        /// The worker's waits for a processor, read when the host stopped it for a timeout.
        var processorWait: ProcessorWait?
    }

    /// The descriptor to the worker.
    enum WriteEnd {
        case open
        /// A teardown closes it once everything queued is written (`closeInputWhenWritten`).
        case closingWhenWritten
        case closed
    }

    package enum StopCause: Sendable, Equatable {
        case protocolViolation(String)
        case unresponsive(requestID: UInt64, after: Duration)
        /// A LADSPA block rung through its doorbell was not done within its deadline: the run
        /// cannot be cancelled, so the worker is stopped.
        case missedBlockDeadline(Duration)
        /// The plugin answered neither a connection in time nor its close within the grace.
        case unresponsiveConnection(UInt32, after: Duration)
        /// The worker left more than the host's budget of frames unread for the grace period.
        case unreadFrames(bytes: Int, after: Duration)
        case launchTimedOut(Duration)
        case closedChannel
        case cancelledLaunch
        /// A limit the host enforces itself (the CPU time of a control group).
        case exceededLimit(AppExtensionError.ExceededLimit)
        /// The host could not go on serving the worker (its event loop failed).
        case hostFailure(String)
        /// The owner disabled or revoked the plugin, or it was quarantined, while it ran.
        case disabledByOwner(String)
    }

    /// The data area of a foreign plugin's buffers, when it has one.
    package let sharedData: SharedDataArea?

    init(
        pluginIdentifier: String,
        hostIdentifier: String,
        asksPerConnection: Int = 64,
        limits: ResourceLimits,
        process: SpawnedProcess,
        toWorker: FileDescriptor,
        fromWorker: FileDescriptor,
        diagnostics: FileDescriptor,
        loop: WorkerEventLoop,
        cancellationGracePeriod: Duration,
        sharedMemory: (memory: SharedMemory, layout: SharedMemoryLayout)?,
        cgroup: WorkerCgroup? = nil,
        stackSource: (plan: LaunchPlan, executable: String)? = nil,
        activity: WorkerActivity? = nil
    ) {
        self.stackSource = stackSource
        self.activity = activity
        self.pluginIdentifier = pluginIdentifier
        self.sharedData = sharedMemory.flatMap { shared in
            shared.layout.dataSize > 0
                ? SharedDataArea(memory: shared.memory, offset: shared.layout.dataOffset, count: shared.layout.dataSize) : nil
        }
        self.limits = limits
        self.process = WorkerProcess(process, cgroup: cgroup, loop: loop)
        self.toWorker = toWorker
        self.input = WorkerInput(frames: fromWorker, output: diagnostics, maximumPayload: Int(limits.maxMessageBytes) + 4096)
        self.loop = loop
        self.writer = FrameWriter(descriptor: toWorker)
        self.cancellationGracePeriod = cancellationGracePeriod
        self.state = Locked(
            State(
                machine: ChannelProtocol(
                    pluginIdentifier: pluginIdentifier, hostIdentifier: hostIdentifier, maximumMessageBytes: limits.maxMessageBytes,
                    asksPerConnection: asksPerConnection, cancellationGracePeriod: cancellationGracePeriod),
                output: TailBuffer(capacity: 16 << 10),
                sharedMemoryOffered: sharedMemory
            )
        )
    }

    /// Starts watching the descriptors, and writes `pending` (the part of the `hello` the pipe
    /// did not take before the worker started) as the worker reads. Until this returns nothing
    /// is read.
    func activate(pending: [UInt8] = []) throws(SystemError) {
        for descriptor in [toWorker, fromWorker, diagnostics] {
            try descriptor.setNonBlocking()
        }
        writer.enqueue(raw: pending)
        try loop.register(fromWorker, events: Epoll.readable, handler: self)
        try loop.register(diagnostics, events: Epoll.readable, handler: self)
        try loop.register(toWorker, events: pending.isEmpty ? 0 : Epoll.writable, handler: self)
        if !pending.isEmpty { state.withLock { $0.writeInterest = true } }
        try loop.register(process.descriptor, events: Epoll.readable, handler: self)
        let limit = limits.cpuSeconds
        process.watchCPUTime(
            limitSeconds: limit,
            isReaped: { [weak self] in self?.isTerminated ?? true },
            exceeded: { [weak self] in self?.stop(.exceededLimit(.init(kind: .cpu, value: limit))) })
    }

    /// Before `activate`: waits on the calling thread, at most `budget`, for the worker's answer
    /// to the handshake and takes it in. A worker that answers quickly then costs no hand-off
    /// through the event loop's thread to the awaiting task: two thread wake-ups, each tens of
    /// microseconds on a small virtual machine. For the first `handshakeSpin` it waits without
    /// sleeping, since sleeping would cost such a wake-up itself. Anything else (end of file, a
    /// slow or silent worker) is left to the event loop, which `activate` starts watching;
    /// nothing read here is lost to it.
    func receiveHandshake(within budget: Duration) {
        let deadline = MonotonicInstant.after(budget)
        let spinDeadline = MonotonicInstant.after(min(budget, Self.handshakeSpin))
        guard (try? fromWorker.setNonBlocking()) != nil else { return }
        while state.withLock({ $0.machine.lifecycle.ready == nil && $0.machine.lifecycle.isRunning && $0.machine.loadFailure == nil }) {
            guard let events = fromWorker.awaitReadable(spinUntil: spinDeadline, sleepUntil: deadline),
                events & FileDescriptor.readableEvent != 0
            else { return }
            let batch = readAndDispatch { input.readOnce() }
            if let violation = batch.violation { stop(.protocolViolation(violation.description)) }
            guard batch.received, batch.violation == nil else { return }
        }
    }

    /// How long `receiveHandshake` polls without sleeping: long enough for a C plugin's worker,
    /// which answers soon after it has its descriptors; a longer spin would burn a processor
    /// under load.
    static let handshakeSpin: Duration = .microseconds(500)

    // MARK: Handshake

    /// Waits for `ready`, the answer to the `hello` the launcher wrote into the pipe before the
    /// worker started. Kills the worker when it does not answer within `timeout` or the task is
    /// cancelled.
    func awaitReady(timeout: Duration) async throws -> Ready {
        // Often the answer is in already (`receiveHandshake`): no timer, no suspension.
        if let ready = state.withLock({ $0.machine.lifecycle.ready }) { return ready }
        decide { machine in
            machine.awaitReady(timeout: timeout, now: .now)
            return []
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Ready, any Error>) in
                let immediate: Result<Ready, any Error>? = state.withLock { state in
                    if let ready = state.machine.lifecycle.ready { return .success(ready) }
                    if let termination = state.machine.lifecycle.termination {
                        return .failure(termination.launchError(plugin: pluginIdentifier, limits: limits))
                    }
                    state.handshake = continuation
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            stop(.cancelledLaunch)
        }
    }

    // MARK: Requests

    /// Sends request bytes on `connection` and waits for the response. Inside the handler of an
    /// ask of this worker, the request is nested in the ask: the plugin's thread that asked runs it.
    package func request(_ bytes: [UInt8], connection: UInt32, timeout: Duration?) async throws -> [UInt8] {
        let nestedIn = AskContext.current.flatMap { $0.channel == ObjectIdentifier(self) ? $0.ask : nil }
        let reply = try await perform(connection: connection, timeout: timeout) { id in
            requestMessage(bytes, id: id, connection: connection, nestedIn: nestedIn)
        }
        return try responseBytes(reply).get()
    }

    /// Sends request bytes on `connection`; `completion` gets the response on the thread that
    /// read it (the event loop's) or, when the request cannot start or fails, on the thread that
    /// learnt it. For a caller that blocks its own thread until then: one thread is woken per
    /// reply, where a task waiting for it would wake the pool first. `completion` must return at
    /// once.
    package func request(
        _ bytes: [UInt8], connection: UInt32, timeout: Duration?,
        completion: @escaping @Sendable (Result<[UInt8], AppExtensionError>) -> Void
    ) {
        let id: UInt64
        switch reserveRequest(connection: connection, timeout: timeout) {
        case .success(let reserved): id = reserved
        case .failure(let error): return completion(.failure(error))
        }
        let message = requestMessage(bytes, id: id, connection: connection, nestedIn: nil)
        start(
            id, connection: connection, message,
            waiter: .callback { [self] reply in
                completion(reply.flatMap(responseBytes).mapError { explainingTimeout($0, window: timeout) })
            })
    }

    /// An id for a new request on `connection`, or why the channel cannot take one.
    private func reserveRequest(connection: UInt32, timeout: Duration?) -> Result<UInt64, AppExtensionError> {
        state.withLock { state in
            state.machine.reserveRequest(connection: connection, timeout: timeout).mapError { unavailable($0, state) }
        }
    }

    /// The frame for a request: nested in an ask when there is one, through shared memory when the
    /// payload is large and there is room.
    private func requestMessage(_ bytes: [UInt8], id: UInt64, connection: UInt32, nestedIn ask: UInt64?) -> HostMessage {
        if let ask { return .nestedRequest(id: id, connection: connection, ask: ask, bytes: bytes) }
        guard bytes.count >= SharedMemoryLayout.threshold,
            let reserved = state.withLock({ $0.sharedRequests?.reserve(bytes.count, for: id) })
        else { return .request(id: id, connection: connection, bytes: bytes) }
        // The pipe carries only where the payload is. The copy holds the mapping, not the lock.
        let copied = bytes.withUnsafeBytes { reserved.memory.copy($0, to: reserved.offset) }
        guard copied else {
            state.withLock { $0.sharedRequests?.release(id) }
            return .request(id: id, connection: connection, bytes: bytes)
        }
        return .sharedRequest(id: id, connection: connection, reserved.location)
    }

    private func responseBytes(_ reply: WorkerReply) -> Result<[UInt8], AppExtensionError> {
        guard case .bytes(let response) = reply else {
            return .failure(AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a request with a call result"))
        }
        return .success(response)
    }

    /// Calls the manifest-declared function at `index`; what the worker returned is unchecked.
    /// `callbacks` answers the library's calls of the function's callbacks while it runs. Inside
    /// a callback handler of this worker, the call is nested in the callback: the thread that
    /// waits for the handler's answer runs it.
    package func call(
        function index: UInt32, arguments: [FunctionValue], timeout: Duration?, callbacks: CallbackHandler? = nil
    ) async throws -> FunctionCallReply {
        let nestedIn = AskContext.current.flatMap { $0.channel == ObjectIdentifier(self) ? $0.ask : nil }
        var registered: UInt64?
        defer {
            if let registered { _ = state.withLock { $0.callbackHandlers.removeValue(forKey: registered) } }
        }
        let reply = try await perform(connection: 0, timeout: timeout) { id in
            if let callbacks {
                registered = id
                state.withLock { $0.callbackHandlers[id] = callbacks }
            }
            if let nestedIn { return .nestedCall(id: id, ask: nestedIn, function: index, arguments: arguments) }
            return .call(id: id, function: index, arguments: arguments)
        }
        guard case .value(let value) = reply else {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a call with response bytes")
        }
        return value
    }

    func perform(
        connection: UInt32,
        timeout: Duration?,
        message makeMessage: (UInt64) -> HostMessage
    ) async throws -> WorkerReply {
        let id = try reserveRequest(connection: connection, timeout: timeout).get()
        let message = makeMessage(id)
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<WorkerReply, any Error>) in
                    start(id, connection: connection, message, waiter: .task(continuation))
                }
            } onCancel: {
                decide { $0.abandon(id, because: .cancelled, now: .now) }
            }
        } catch let error as AppExtensionError where error.code == .timedOut {
            throw explainingTimeout(error, window: timeout)
        }
    }

    /// Sends a reserved request; `waiter` hears its end.
    private func start(_ id: UInt64, connection: UInt32, _ message: HostMessage, waiter: ReplyWaiter) {
        var actions = Actions()
        state.withLock { state in
            if state.requests.updateValue(waiter, forKey: id) == nil, loop.awaitedAnswers.add(1, ordering: .relaxed).newValue > 1 {
                loop.noteConcurrentRequests()
            }
            // Few answers awaited: the host expects this one soon and will poll for it; so may
            // the worker, for the request after it (`BusyPolling`).
            let marksPollForNext =
                BusyPolling.isWorthwhile && state.workerPollsForNext
                && loop.awaitedAnswers.load(ordering: .relaxed) <= BusyPolling.awaitedLimit
            collect(
                state.machine.sendRequest(id, message, now: .now), into: &actions, state: &state,
                requestFlags: marksPollForNext ? .pollForNext : [])
        }
        activity?.requestStarted()
        let look = beginLookingForAnswer()
        perform(actions)
        if let look { lookForAnswer(id, connection: connection, look) }
    }

    /// Who waits for a request's end: a suspended task, or a callback for a caller outside Swift's
    /// concurrency that blocks its own thread.
    enum ReplyWaiter {
        case task(CheckedContinuation<WorkerReply, any Error>)
        case callback(@Sendable (Result<WorkerReply, AppExtensionError>) -> Void)

        func resume(with result: Result<WorkerReply, AppExtensionError>) {
            switch self {
            case .task(let continuation): continuation.resume(with: result.mapError { $0 as any Error })
            case .callback(let completion): completion(result)
            }
        }
    }

    /// Why a request cannot start: once the worker ended on its own, its cause (a crash, the
    /// owner's decision), as every later request of the process learns.
    func unavailable(_ error: AppExtensionError, _ state: State) -> AppExtensionError {
        guard let termination = state.machine.lifecycle.termination, !state.machine.lifecycle.isInvalidated else { return error }
        return termination.error(plugin: pluginIdentifier, limits: limits)
    }

    // MARK: Connections

    /// Opens a connection and waits until the plugin accepts it; `handler` answers its asks.
    /// `startsOnCaller`: while the caller of a request on it polls for the answer, an ask the
    /// plugin makes meanwhile runs on that caller's thread until it first suspends (a handler
    /// that may block its thread, a C library's, must not).
    package func openConnection(handler: RequestHandler?, timeout: Duration, startsOnCaller: Bool = false) async throws -> UInt32 {
        let (id, effects) = try state.withLock { state in
            state.machine.openConnection(hasHandler: handler != nil, timeout: timeout, now: .now).mapError { unavailable($0, state) }
        }.get()
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    var actions = Actions()
                    state.withLock { state in
                        state.connections[id] = continuation
                        state.handlers[id] = handler
                        if startsOnCaller, handler != nil { state.handlersStartingOnCaller.insert(id) }
                        collect(effects, into: &actions, state: &state)
                    }
                    perform(actions)
                }
            } onCancel: {
                closeConnection(id)
            }
        } catch let error as AppExtensionError where error.code == .timedOut {
            throw explainingTimeout(error, window: timeout)
        }
        return id
    }

    /// Closes a connection: its waiting requests fail, the plugin's asks on it stop, the plugin
    /// is told. Idempotent.
    package func closeConnection(_ id: UInt32) {
        var actions = Actions()
        state.withLock { state in
            collect(state.machine.closeConnection(id, now: .now), into: &actions, state: &state)
            state.handlers[id] = nil
            state.handlersStartingOnCaller.remove(id)
        }
        perform(actions)
    }

    /// A plugin's ask, or a library's call of a callback, that a caller runs while it polls or
    /// that runs in a task which then looks for the next one as that caller would: the ask that
    /// answers it, and the handler that makes the answer from `bytes`.
    struct PendingAnswer {
        /// What it came from: a typed call's callback, or a connection's ask.
        enum Source {
            case call(UInt64)
            case connection(UInt32)
        }

        let ask: UInt64
        let source: Source
        let bytes: [UInt8]
        let handler: RequestHandler

        /// The connection it is answered on (0 for a callback, as typed calls are).
        var connection: UInt32 {
            if case .connection(let connection) = source { return connection }
            return 0
        }
    }

    /// Runs `pending` on this thread until its handler first suspends (`runHandler(immediately:)`).
    func runHere(_ pending: PendingAnswer) {
        runHandler(pending.handler, ask: pending.ask, connection: pending.connection, bytes: pending.bytes, immediately: true)
    }

    /// Runs `pending` in a task of its own, which then looks for the next callback of its call or
    /// ask of its connection, as their caller would (`lookForCallbacks`, `lookForAsks`).
    func runThenLook(_ pending: PendingAnswer) {
        runHandler(pending.handler, ask: pending.ask, connection: pending.connection, bytes: pending.bytes) { [weak self] in
            switch pending.source {
            case .call(let call): self?.lookForCallbacks(of: call)
            case .connection(let connection): self?.lookForAsks(on: connection)
            }
        }
    }

    /// Runs the connection's handler for an ask, in a task of its own, and answers; then, in the
    /// same task, `afterAnswer`. `immediately`: the task starts on this thread and runs here
    /// until it first suspends.
    func runHandler(
        _ handler: RequestHandler?, ask: UInt64, connection: UInt32, bytes: [UInt8], immediately: Bool = false,
        afterAnswer: (@Sendable () -> Void)? = nil
    ) {
        guard let handler else {
            answer(ask, .failure(AskFailure(reason: .unsupported, message: "the host has no request handler on this connection")))
            return
        }
        // One a caller queued and then the host stopped waiting for (the plugin cancelled it, its
        // connection closed) is not run.
        if immediately, state.withLock({ $0.machine.connection(ofAsk: ask) == nil }) { return }
        let context = AskContext(channel: ObjectIdentifier(self), ask: ask)
        let run: @Sendable () async -> Void = { [weak self] in
            let result: Result<[UInt8], AskFailure>
            do {
                result = .success(try await AskContext.$current.withValue(context) { try await handler(bytes) })
            } catch let failure as any AskHandlerFailure {
                result = .failure(AskFailure(reason: .handlerFailed, code: failure.code, message: failure.message))
            } catch {
                result = .failure(AskFailure(reason: .handlerFailed, code: 1, message: String(describing: error)))
            }
            self?.answer(ask, result)
            afterAnswer?()
        }
        let task = immediately ? Task.immediate { await run() } : Task { await run() }
        let stale = state.withLock { state -> Bool in
            guard state.machine.connection(ofAsk: ask) != nil else { return true }
            state.askTasks[ask] = task
            return false
        }
        if stale { task.cancel() }
    }

    func answer(_ ask: UInt64, _ result: Result<[UInt8], AskFailure>) {
        var actions = Actions()
        state.withLock { state in
            state.askTasks[ask] = nil
            collect(state.machine.answerAsk(ask, result, maximumBytes: Int(limits.maxMessageBytes)), into: &actions, state: &state)
        }
        perform(actions)
    }

    // MARK: Messages the plugin sends unprompted

    /// A new sequence of the messages the plugin sends from now on about `connection`'s
    /// requests, and its log, with a bounded buffer. A sequence nobody reads any more costs at
    /// most its budget until the process ends.
    package func messages(connection: UInt32) -> AppExtensionMessages {
        let buffer = AppExtensionMessages.Buffer()
        let accepted = state.withLock { state -> Bool in
            if state.machine.isEnded { return false }
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[id] = (buffer, connection)
            return true
        }
        if !accepted { buffer.finish() }
        return AppExtensionMessages(buffer: buffer)
    }

    func setInterruptionHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.interruptionHandler = handler }
    }

    /// Called on the loop thread with the termination, before anyone waiting for it resumes.
    func setTerminationObserver(_ observer: @escaping @Sendable (WorkerTermination) -> Void) {
        let ended: WorkerTermination? = state.withLock { state in
            if let termination = state.machine.lifecycle.termination { return termination }
            state.terminationObserver = observer
            return nil
        }
        if let ended { observer(ended) }
    }

    // MARK: Ending

    /// Ends the worker in an orderly way: pending requests fail, the worker gets `shutdown` and
    /// end-of-file, and is killed if it has not exited after `grace` (the protocol's teardown).
    /// The interruption handler will not run. Idempotent.
    package func invalidate(grace: Duration) {
        decide { $0.invalidate(grace: grace, now: .now) }
    }

    /// Waits until the worker has exited and been reaped.
    package func termination() async -> WorkerTermination {
        await withCheckedContinuation { continuation in
            let ended: WorkerTermination? = state.withLock { state in
                if let termination = state.machine.lifecycle.termination { return termination }
                state.terminationWaiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    package var isInvalidated: Bool {
        state.withLock { $0.machine.lifecycle.isInvalidated }
    }

    package var isTerminated: Bool {
        state.withLock { $0.machine.isEnded }
    }

    /// Once the worker has ended and been reaped, why (the error every later request learns);
    /// nil while it runs.
    package var endedError: AppExtensionError? {
        state.withLock { $0.machine.lifecycle.termination }.map { $0.error(plugin: pluginIdentifier, limits: limits) }
    }

    /// Kills the worker because of `cause`, which the errors of pending requests will name (the
    /// protocol's teardown). Only the first cause counts.
    package func stop(_ cause: StopCause) {
        decide { $0.stop(cause) }
    }

    /// Kills the worker (on the loop thread, unless it is reaped by then).
    func kill() {
        process.kill { [weak self] in self?.isTerminated ?? true }
    }

    /// How many requests and responses travelled through shared memory so far.
    package var sharedMemoryTransfers: (requests: Int, responses: UInt64) {
        state.withLock { ($0.sharedRequests?.placedCount ?? 0, $0.sharedResponsesRead) }
    }

}
