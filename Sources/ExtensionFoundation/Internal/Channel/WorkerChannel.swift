import Foundation
import Glibc
import PlugindSystem
import PlugindWire

/// The host's side of one worker: carries out what `ChannelProtocol` decides. It owns the
/// continuations of callers waiting for answers, the timers, the handlers of the plugin's asks,
/// the descriptors and the process. Frames are queued on the `FrameWriter` in the order the
/// protocol decided, under the lock; they are written, large copies made and continuations
/// resumed after it is released. Reading runs on the `WorkerEventLoop` thread.
final class WorkerChannel: EventLoopHandler {
    let pluginIdentifier: String
    let limits: ResourceLimits
    let processIdentifier: Int32
    let processDescriptor: FileDescriptor
    let toWorker: FileDescriptor
    let fromWorker: FileDescriptor
    let diagnostics: FileDescriptor
    let loop: WorkerEventLoop
    let writer: FrameWriter
    private let state: Locked<State>
    /// What the loop thread reads with, apart from `state`: reads (system calls) never hold the
    /// lock that callers sending requests need.
    private let reading: Locked<Reading>

    private struct Reading {
        var decoder: FrameDecoder
        var closed = false
    }

    /// How long a request whose deadline passed may take to acknowledge the cancel before the
    /// worker is considered stuck and killed.
    let cancellationGracePeriod: Duration
    /// The worker's control group, for a plugin that may start processes (where the host can make
    /// one): its CPU time is watched here, and it is removed once the worker is gone.
    let cgroup: WorkerCgroup?

    /// Answers the plugin's asks on one connection.
    typealias RequestHandler = @Sendable ([UInt8]) async throws -> [UInt8]

    private struct State {
        var machine: ChannelProtocol
        var handshake: CheckedContinuation<Ready, any Error>?
        var requests: [UInt64: CheckedContinuation<WorkerReply, any Error>] = [:]
        var connections: [UInt32: CheckedContinuation<Void, any Error>] = [:]
        var handlers: [UInt32: RequestHandler] = [:]
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
        /// The descriptor to the worker has been closed (once, on the loop thread).
        var writeDescriptorClosed = false
        var output: TailBuffer
        var fatalReport: FatalSignalReport?
        var loadFailure: LoadFailure?
        /// The worker's `ready`, kept after it ends: a worker that only inspects or probes may exit
        /// before anyone asked for its answer.
        var ready: Ready?
        var termination: WorkerTermination?
        /// Why the host stopped the worker itself, if it did.
        var stopCause: StopCause?
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
    }

    enum StopCause: Sendable, Equatable {
        case protocolViolation(String)
        case unresponsive(requestID: UInt64, after: Duration)
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
        cgroup: WorkerCgroup? = nil
    ) {
        self.pluginIdentifier = pluginIdentifier
        self.limits = limits
        self.processIdentifier = process.processIdentifier
        self.processDescriptor = process.processDescriptor
        self.toWorker = toWorker
        self.fromWorker = fromWorker
        self.diagnostics = diagnostics
        self.loop = loop
        self.writer = FrameWriter(descriptor: toWorker)
        self.cancellationGracePeriod = cancellationGracePeriod
        self.cgroup = cgroup
        self.reading = Locked(Reading(decoder: FrameDecoder(direction: .workerToHost, maximumPayload: Int(limits.maxMessageBytes) + 4096)))
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
        try loop.register(processDescriptor, events: Epoll.readable, handler: self)
        if cgroup != nil && limits.cpuSeconds > 0 { watchCPUTime() }
    }

    /// Before `activate`: waits on the calling thread, at most `budget`, for the worker's answer
    /// to the handshake and takes it in. A worker that answers quickly then costs no hand-off
    /// through the event loop's thread to the awaiting task: two thread wake-ups, each tens of
    /// microseconds on a small virtual machine. For the first `handshakeSpin` it waits without
    /// sleeping, since sleeping would cost such a wake-up itself. Anything else (end of file, a
    /// slow or silent worker) is left to the event loop, which `activate` starts watching;
    /// nothing read here is lost to it.
    func receiveHandshake(within budget: Duration) {
        let deadline = ContinuousClock.now + budget
        let spinDeadline = ContinuousClock.now + min(budget, Self.handshakeSpin)
        guard (try? fromWorker.setNonBlocking()) != nil else { return }
        while state.withLock({ $0.ready == nil && $0.stopCause == nil && $0.loadFailure == nil }) {
            guard let events = fromWorker.awaitReadable(spinUntil: spinDeadline, sleepUntil: deadline), events & Int16(POLLIN) != 0
            else { return }
            var frames: [Frame] = []
            var violation: WireError?
            let received = reading.withLock { state -> Bool in
                // End of file stays in the pipe for the event loop, which reports the exit.
                let count = state.decoder.receive { buffer in Glibc.read(fromWorker.rawValue, buffer.baseAddress, buffer.count) }
                guard count > 0 else { return false }
                do throws(WireError) {
                    while let frame = try state.decoder.nextFrame() { frames.append(frame) }
                } catch {
                    violation = error
                }
                return true
            }
            for frame in frames where state.withLock({ $0.stopCause == nil }) { dispatch(frame) }
            if let violation { stop(.protocolViolation(violation.description)) }
            guard received, violation == nil else { return }
        }
    }

    /// How long `receiveHandshake` polls without sleeping: a C plugin's worker answers about
    /// 0.35 ms after it has its descriptors; a longer spin would burn a processor under load.
    static let handshakeSpin: Duration = .microseconds(500)

    /// Checks the control group's CPU time, the worker's and its children's together, and stops
    /// the worker at the limit. The next check comes when the limit could be reached at the
    /// earliest, with every processor busy.
    private func watchCPUTime() {
        guard let cgroup, !isTerminated else { return }
        let limit = limits.cpuSeconds * 1_000_000_000
        let used = cgroup.cpuNanoseconds ?? 0
        if used >= limit {
            stop(.exceededLimit(.init(kind: .cpu, value: limits.cpuSeconds)))
            return
        }
        let processors = UInt64(max(ProcessInfo.processInfo.activeProcessorCount, 1))
        let wait = max((limit - used) / processors, 50_000_000)
        loop.schedule(after: .nanoseconds(Int64(clamping: wait))) { [weak self] in self?.watchCPUTime() }
    }

    // MARK: Carrying out the protocol's decisions

    /// Runs `body` on the protocol under the lock, then carries out its effects without it.
    private func decide(_ body: (inout ChannelProtocol) -> [ChannelProtocol.Effect]) {
        var actions = Actions()
        state.withLock { state in
            state.machine.now = .now
            let effects = body(&state.machine)
            collect(effects, into: &actions, state: &state)
        }
        perform(actions)
    }

    /// What to do once the lock is released.
    private struct Actions {
        var write = false
        var requests: [(CheckedContinuation<WorkerReply, any Error>, Result<WorkerReply, AppExtensionError>)] = []
        var connections: [(CheckedContinuation<Void, any Error>, Result<Void, AppExtensionError>)] = []
        var handshake: (CheckedContinuation<Ready, any Error>, Ready)?
        var askHandlers: [(UInt64, UInt32, [UInt8], RequestHandler?)] = []
        var cancelledAsks: [Task<Void, Never>] = []
        var broadcasts: [(AppExtensionMessage, connection: UInt32?)] = []
        var subscribers: [(buffer: AppExtensionMessages.Buffer, connection: UInt32)] = []
        var stop: StopCause?
        var sharedResponses: [(UInt64, SharedMemoryLocation)] = []
        var kill = false
        /// The channel's timer is set for this deadline, the one it was set for cancelled.
        var arm: ContinuousClock.Instant?
        var disarmedToken: UInt64?
    }

    /// Turns effects into state changes (under the lock) and actions (for after it). Frames are
    /// queued here, so that they leave in the order decided.
    private func collect(_ effects: [ChannelProtocol.Effect], into actions: inout Actions, state: inout State) {
        for effect in effects {
            switch effect {
            case .send(let message):
                writer.enqueue(message)
                actions.write = true
            case .completeRequest(let id, let result):
                state.sharedRequests?.release(id)
                if let continuation = state.requests.removeValue(forKey: id) { actions.requests.append((continuation, result)) }
            case .completeConnection(let id, let result):
                if case .failure = result { state.handlers[id] = nil }
                if let continuation = state.connections.removeValue(forKey: id) { actions.connections.append((continuation, result)) }
            case .handshakeDone(let ready):
                state.ready = ready
                if let offered = state.sharedMemoryOffered, ready.features.contains(ProtocolFeature.sharedMemory) {
                    state.sharedRequests = SharedRequestRegion(memory: offered.memory, layout: offered.layout)
                }
                state.sharedMemoryOffered = nil
                if let continuation = state.handshake {
                    state.handshake = nil
                    actions.handshake = (continuation, ready)
                }
            case .runAskHandler(let connection, let ask, let bytes):
                actions.askHandlers.append((ask, connection, bytes, state.handlers[connection]))
            case .cancelAskHandler(let ask):
                if let task = state.askTasks.removeValue(forKey: ask) { actions.cancelledAsks.append(task) }
            case .broadcast(let message, let connection):
                actions.broadcasts.append((message, connection))
            case .stop(let cause):
                if actions.stop == nil { actions.stop = cause }
            case .kill:
                actions.kill = true
            case .loadFailed(let failure):
                state.loadFailure = failure
            case .fatalSignal(let report):
                if state.fatalReport == nil { state.fatalReport = report }
            case .sharedResponse(let id, let location):
                actions.sharedResponses.append((id, location))
            }
        }
        if !actions.broadcasts.isEmpty { actions.subscribers = Array(state.subscribers.values) }
        // Only an earlier deadline moves the timer: one that fires for a deadline disarmed since
        // costs one look, whereas moving it at every request would cost a schedule each.
        if state.termination == nil, let next = state.machine.nextDeadline, state.armedDeadline.map({ next < $0 }) ?? true {
            state.armedDeadline = next
            actions.arm = next
            actions.disarmedToken = state.armedToken
            state.armedToken = nil
        }
    }

    private func perform(_ actions: Actions) {
        if actions.write { flush() }
        if let token = actions.disarmedToken { loop.cancelTimer(token) }
        if let deadline = actions.arm { arm(at: deadline) }
        if let (continuation, ready) = actions.handshake { continuation.resume(returning: ready) }
        for (continuation, result) in actions.requests { continuation.resume(with: result.mapError { $0 as any Error }) }
        for (continuation, result) in actions.connections { continuation.resume(with: result.mapError { $0 as any Error }) }
        for task in actions.cancelledAsks { task.cancel() }
        for (ask, connection, bytes, handler) in actions.askHandlers { runHandler(handler, ask: ask, connection: connection, bytes: bytes) }
        for (message, connection) in actions.broadcasts {
            for subscriber in actions.subscribers where connection == nil || subscriber.connection == connection {
                subscriber.buffer.yield(message)
            }
        }
        for (id, location) in actions.sharedResponses {
            let bytes = readSharedResponse(at: location)
            decide { $0.complete(sharedResponse: id, bytes: bytes) }
        }
        if let cause = actions.stop { stop(cause) }
        if actions.kill { kill() }
    }

    /// Sets the channel's timer for `deadline` (scheduling may wake the loop: a system call, so
    /// not under the lock), unless an earlier deadline took its place meanwhile. When it fires,
    /// the protocol's due timers fire, and the next deadline sets it again.
    private func arm(at deadline: ContinuousClock.Instant) {
        let token = loop.schedule(at: deadline) { [weak self] in
            guard let self else { return }
            self.state.withLock { state in
                guard state.armedDeadline == deadline else { return }
                state.armedDeadline = nil
                state.armedToken = nil
            }
            self.decide { $0.expire(now: .now) }
        }
        let kept = state.withLock { state -> Bool in
            guard state.armedDeadline == deadline, state.termination == nil else { return false }
            state.armedToken = token
            return true
        }
        if !kept { loop.cancelTimer(token) }
    }

    /// Writes what is queued; when the pipe is full, the loop thread watches it for room.
    private func flush() {
        switch writer.flush() {
        case .done, .busy: break
        case .closed:
            loop.execute { [weak self] in self?.closeWriteEnd() }
        case .blocked:
            loop.execute { [weak self] in self?.watchWritable() }
        }
    }

    /// The most bytes of frames the host holds for one worker that has not read them (answers
    /// to its asks, cancels, requests waiting for room in the pipe). Past it the host stops
    /// reading from the worker until the worker has read down to half of it, so that nothing a
    /// worker sends makes the host hold more; a worker that reads nothing of it for the
    /// cancellation grace period is stopped (`unreadFrames`).
    static let heldFrameBudget = 8 << 20

    /// What one turn of the loop reads from a worker at most.
    static let readPerTurn = 1 << 20

    /// Loop thread only: stops reading from a worker that leaves more than the budget unread.
    private func pauseReadingIfOverBudget() {
        guard writer.queuedBytes > Self.heldFrameBudget else { return }
        let paused = state.withLock { state -> Bool in
            guard !state.readingPaused, state.termination == nil else { return false }
            state.readingPaused = true
            state.lastDrain = .now
            return true
        }
        guard paused else { return }
        do {
            try loop.modify(fromWorker, events: 0)
        } catch {
            stop(.hostFailure("cannot pause reading from the worker: \(error)"))
            return
        }
        watchWritable()
        checkDrain(after: cancellationGracePeriod)
    }

    /// Stops the worker if it has read nothing of what waits for `cancellationGracePeriod`.
    private func checkDrain(after delay: Duration) {
        _ = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            let grace = self.cancellationGracePeriod
            let idle: Duration? = self.state.withLock { state in state.readingPaused ? ContinuousClock.now - state.lastDrain : nil }
            guard let idle else { return }
            if idle >= grace {
                self.stop(.unreadFrames(bytes: self.writer.queuedBytes, after: grace))
            } else {
                self.checkDrain(after: grace - idle)
            }
        }
    }

    /// Loop thread only, after a flush: notes that the worker read some of what waits, and
    /// resumes reading once the queue is down to half the budget (however it got there: a flush
    /// on another thread may have emptied it).
    private func noteDrained(from before: Int) {
        let now = writer.queuedBytes
        let resume = state.withLock { state -> Bool in
            guard state.readingPaused else { return false }
            if now < before { state.lastDrain = .now }
            guard now <= Self.heldFrameBudget / 2, state.termination == nil else { return false }
            state.readingPaused = false
            return true
        }
        guard resume else { return }
        if !reading.withLock({ $0.closed }) {
            do {
                try loop.modify(fromWorker, events: Epoll.readable)
            } catch {
                stop(.hostFailure("cannot resume reading from the worker: \(error)"))
                return
            }
        }
        // Watched for room only while reading was paused: no longer, if nothing waits.
        watchWritable()
    }

    /// Loop thread only: watches the pipe for room while frames wait (and while reading is
    /// paused, so that the resumption is noticed), and stops watching when none do. When epoll
    /// refuses, nothing queued would ever be written: the worker is stopped.
    private func watchWritable() {
        let wanted = !writer.isEmpty || state.withLock { $0.readingPaused }
        let change = state.withLock { state -> Bool in
            guard !state.writeDescriptorClosed, state.writeInterest != wanted else { return false }
            state.writeInterest = wanted
            return true
        }
        guard change else { return }
        do {
            try loop.modify(toWorker, events: wanted ? Epoll.writable : 0)
        } catch {
            writer.close()
            stop(.hostFailure("cannot watch the pipe to the worker: \(error)"))
        }
    }

    // MARK: Handshake

    /// Waits for `ready`, the answer to the `hello` the launcher wrote into the pipe before the
    /// worker started. Kills the worker when it does not answer within `timeout` or the task is
    /// cancelled.
    func awaitReady(timeout: Duration) async throws -> Ready {
        // Often the answer is in already (`receiveHandshake`): no timer, no suspension.
        if let ready = state.withLock({ $0.ready }) { return ready }
        decide { machine in
            machine.awaitReady(timeout: timeout)
            return []
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Ready, any Error>) in
                let immediate: Result<Ready, any Error>? = state.withLock { state in
                    if let ready = state.ready { return .success(ready) }
                    if let termination = state.termination {
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
    func request(_ bytes: [UInt8], connection: UInt32, timeout: Duration?) async throws -> [UInt8] {
        let nestedIn = AskContext.current.flatMap { $0.channel == ObjectIdentifier(self) ? $0.ask : nil }
        let reply = try await perform(connection: connection, timeout: timeout) { id in
            if let ask = nestedIn { return .nestedRequest(id: id, connection: connection, ask: ask, bytes: bytes) }
            guard bytes.count >= SharedMemoryLayout.threshold,
                let reserved = state.withLock({ $0.sharedRequests?.reserve(bytes.count, for: id) })
            else { return .request(id: id, connection: connection, bytes: bytes) }
            // Large payloads go through shared memory when there is room; the pipe carries only
            // where they are. The copy holds the mapping, not the lock.
            let copied = bytes.withUnsafeBytes { reserved.memory.copy($0, to: reserved.offset) }
            guard copied else {
                state.withLock { $0.sharedRequests?.release(id) }
                return .request(id: id, connection: connection, bytes: bytes)
            }
            return .sharedRequest(id: id, connection: connection, reserved.location)
        }
        guard case .bytes(let response) = reply else {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a request with a call result")
        }
        return response
    }

    /// Calls the manifest-declared function at `index`.
    func call(function index: UInt32, arguments: [FunctionValue], timeout: Duration?) async throws -> FunctionValue {
        let reply = try await perform(connection: 0, timeout: timeout) { id in
            .call(id: id, function: index, arguments: arguments)
        }
        guard case .value(let value) = reply else {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a call with response bytes")
        }
        return value
    }

    private func perform(
        connection: UInt32,
        timeout: Duration?,
        message makeMessage: (UInt64) -> HostMessage
    ) async throws -> WorkerReply {
        let id = try state.withLock { state in
            state.machine.reserveRequest(connection: connection, timeout: timeout).mapError { unavailable($0, state) }
        }.get()
        let message = makeMessage(id)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<WorkerReply, any Error>) in
                var actions = Actions()
                state.withLock { state in
                    state.requests[id] = continuation
                    collect(state.machine.sendRequest(id, message), into: &actions, state: &state)
                }
                perform(actions)
            }
        } onCancel: {
            decide { $0.abandon(id, because: .cancelled) }
        }
    }

    /// Why a request cannot start: once the worker ended on its own, its cause (a crash, the
    /// owner's decision), as every later request of the process learns.
    private func unavailable(_ error: AppExtensionError, _ state: State) -> AppExtensionError {
        guard let termination = state.termination, !state.machine.invalidated else { return error }
        return termination.error(plugin: pluginIdentifier, limits: limits)
    }

    // MARK: Connections

    /// Opens a connection and waits until the plugin accepts it; `handler` answers its asks.
    func openConnection(handler: RequestHandler?, timeout: Duration) async throws -> UInt32 {
        let (id, effects) = try state.withLock { state in
            state.machine.openConnection(hasHandler: handler != nil, timeout: timeout).mapError { unavailable($0, state) }
        }.get()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                var actions = Actions()
                state.withLock { state in
                    state.connections[id] = continuation
                    state.handlers[id] = handler
                    collect(effects, into: &actions, state: &state)
                }
                perform(actions)
            }
        } onCancel: {
            closeConnection(id)
        }
        return id
    }

    /// Closes a connection: its waiting requests fail, the plugin's asks on it stop, the plugin
    /// is told. Idempotent.
    func closeConnection(_ id: UInt32) {
        var actions = Actions()
        state.withLock { state in
            collect(state.machine.closeConnection(id), into: &actions, state: &state)
            state.handlers[id] = nil
        }
        perform(actions)
    }

    /// Runs the connection's handler for an ask, in a task of its own, and answers.
    private func runHandler(_ handler: RequestHandler?, ask: UInt64, connection: UInt32, bytes: [UInt8]) {
        guard let handler else {
            answer(ask, .failure(AskFailure(reason: .unsupported, message: "the host has no request handler on this connection")))
            return
        }
        let context = AskContext(channel: ObjectIdentifier(self), ask: ask)
        let task = Task { [weak self] in
            let result: Result<[UInt8], AskFailure>
            do {
                result = .success(try await AskContext.$current.withValue(context) { try await handler(bytes) })
            } catch let failure as AppExtensionConnection.RequestFailure {
                result = .failure(AskFailure(reason: .handlerFailed, code: failure.code, message: failure.message))
            } catch {
                result = .failure(AskFailure(reason: .handlerFailed, code: 1, message: String(describing: error)))
            }
            self?.answer(ask, result)
        }
        let stale = state.withLock { state -> Bool in
            guard state.machine.connection(ofAsk: ask) != nil else { return true }
            state.askTasks[ask] = task
            return false
        }
        if stale { task.cancel() }
    }

    private func answer(_ ask: UInt64, _ result: Result<[UInt8], AskFailure>) {
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
    func messages(connection: UInt32) -> AppExtensionMessages {
        let buffer = AppExtensionMessages.Buffer()
        let accepted = state.withLock { state -> Bool in
            if state.termination != nil { return false }
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
            if let termination = state.termination { return termination }
            state.terminationObserver = observer
            return nil
        }
        if let ended { observer(ended) }
    }

    // MARK: Ending

    /// Ends the worker in an orderly way: pending requests fail, the worker gets `shutdown` and
    /// end-of-file, and is killed if it has not exited after `grace`. The interruption handler
    /// will not run. Idempotent.
    func invalidate(grace: Duration) {
        var actions = Actions()
        let first = state.withLock { state -> Bool in
            guard !state.machine.invalidated else { return false }
            state.machine.now = .now
            collect(state.machine.invalidate(grace: grace), into: &actions, state: &state)
            return true
        }
        guard first else { return }
        perform(actions)
        // End of file once the shutdown is written.
        loop.execute { [weak self] in self?.closeWhenWritten() }
    }

    /// Waits until the worker has exited and been reaped.
    func termination() async -> WorkerTermination {
        await withCheckedContinuation { continuation in
            let ended: WorkerTermination? = state.withLock { state in
                if let termination = state.termination { return termination }
                state.terminationWaiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    var isInvalidated: Bool {
        state.withLock { $0.machine.invalidated }
    }

    var isTerminated: Bool {
        state.withLock { $0.termination != nil }
    }

    /// Kills the worker because of `cause`, which the errors of pending requests will name.
    func stop(_ cause: StopCause) {
        let first = state.withLock { state -> Bool in
            guard state.termination == nil, state.stopCause == nil else { return false }
            state.stopCause = cause
            return true
        }
        if first { kill() }
    }

    /// Sends SIGKILL from the loop thread, which is also where the pidfd is closed, so that a
    /// late kill can never reach a recycled descriptor.
    private func kill() {
        let signal: @Sendable () -> Void = { [self] in
            guard !isTerminated else { return }
            try? processDescriptor.sendSignal(SIGKILL)
        }
        if loop.isOnLoopThread { signal() } else { loop.execute(signal) }
    }

    // MARK: Event loop side

    func handleEvent(descriptor: Int32, events: UInt32) {
        switch descriptor {
        case fromWorker.rawValue: readFromWorker()
        case diagnostics.rawValue: readDiagnostics()
        case toWorker.rawValue:
            if events & (Epoll.error | Epoll.hangUp) != 0 {
                closeWriteEnd()
            } else {
                flushFromLoop()
            }
        case processDescriptor.rawValue: processExited()
        default: break
        }
    }

    /// The pipe has room: write, and stop watching once nothing waits.
    private func flushFromLoop() {
        let before = writer.queuedBytes
        defer { noteDrained(from: before) }
        switch writer.flush() {
        case .closed: closeWriteEnd()
        case .done, .blocked, .busy: watchWritable()
        }
        if state.withLock({ $0.machine.invalidated }) { closeWhenWritten() }
    }

    /// After `invalidate`: closes the pipe once the shutdown left, so that the worker reads
    /// end-of-file after it.
    private func closeWhenWritten() {
        if writer.isEmpty { closeWriteEnd() } else { watchWritable() }
    }

    private func readFromWorker() {
        var frames: [Frame] = []
        var violation: WireError?
        var endOfStream = false
        reading.withLock { state in
            guard !state.closed else { return }
            // At most this much a turn, so that what the frames make the host send is weighed
            // against the budget before more is read (the loop calls again while data waits).
            var budget = Self.readPerTurn
            while budget > 0 {
                let count = state.decoder.receive { buffer in
                    Glibc.read(fromWorker.rawValue, buffer.baseAddress, buffer.count)
                }
                if count > 0 { budget -= count }
                if count == 0 {
                    endOfStream = true
                    break
                }
                if count < 0 {
                    if errno == EINTR { continue }
                    if errno != EAGAIN { endOfStream = true }
                    break
                }
                do throws(WireError) {
                    while let frame = try state.decoder.nextFrame() { frames.append(frame) }
                } catch {
                    violation = error
                    break
                }
            }
            if endOfStream {
                state.closed = true
                do throws(WireError) {
                    try state.decoder.finish()
                } catch {
                    violation = violation ?? error
                }
            }
        }
        // After a violation nothing more from this worker is believed, not even a later answer.
        for frame in frames where state.withLock({ $0.stopCause == nil }) { dispatch(frame) }
        pauseReadingIfOverBudget()
        if let violation {
            stop(.protocolViolation(violation.description))
        }
        if endOfStream {
            loop.deregister(fromWorker)
            // The worker closes this pipe when it exits, just before its pidfd reports the exit.
            // If it is still alive a moment later, it closed the pipe itself and cannot answer.
            loop.schedule(after: .milliseconds(500)) { [weak self] in
                guard let self, !self.isTerminated else { return }
                self.stop(.closedChannel)
            }
        }
    }

    private func dispatch(_ frame: Frame) {
        let message: WorkerMessage
        do {
            message = try WorkerMessage(frame)
        } catch {
            stop(.protocolViolation(error.description))
            return
        }
        decide { $0.receive(message) }
    }

    private func readDiagnostics() {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var closed = false
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(diagnostics.rawValue, $0.baseAddress, $0.count) }
            if count > 0 {
                chunk.withUnsafeBytes { bytes in
                    state.withLock { $0.output.append(UnsafeRawBufferPointer(rebasing: bytes[..<count])) }
                }
                continue
            }
            if count < 0 && errno == EINTR { continue }
            closed = count == 0 || errno != EAGAIN
            break
        }
        if closed { loop.deregister(diagnostics) }
    }

    /// Closes the descriptor to the worker, which reads end-of-file. Loop thread only.
    private func closeWriteEnd() {
        writer.close()
        let close = state.withLock { state -> Bool in
            guard !state.writeDescriptorClosed else { return false }
            state.writeDescriptorClosed = true
            return true
        }
        if close {
            loop.deregister(toWorker)
            toWorker.close()
        }
    }

    private func processExited() {
        // Take what the worker wrote before it died: final answers and its fatal-signal report.
        readFromWorker()
        readDiagnostics()
        let exit: ProcessExit
        do {
            guard let reaped = try processDescriptor.waitForProcessExit(noHang: true) else { return }
            exit = reaped
        } catch {
            exit = ProcessExit(reason: .exited(status: -1))
        }
        finish(exit)
    }

    private func finish(_ exit: ProcessExit) {
        var actions = Actions()
        var handshake: CheckedContinuation<Ready, any Error>?
        var subscribers: [(buffer: AppExtensionMessages.Buffer, connection: UInt32)] = []
        var waiters: [CheckedContinuation<WorkerTermination, Never>] = []
        var interruption: (@Sendable () -> Void)?
        var observer: (@Sendable (WorkerTermination) -> Void)?
        var closeWriteDescriptor = false
        // Read before the lock: a file of the kernel's.
        let hitMemoryLimit = cgroup?.hitMemoryLimit ?? false
        let termination: WorkerTermination? = state.withLock { state in
            guard state.termination == nil else { return nil }
            var termination = WorkerTermination(
                exit: exit,
                fatalReport: state.fatalReport,
                stopCause: state.stopCause,
                loadFailure: state.loadFailure,
                output: state.output.text,
                wasInvalidated: state.machine.invalidated
            )
            termination.cgroupHitMemoryLimit = hitMemoryLimit
            state.termination = termination
            let wasReady = state.ready != nil
            handshake = state.handshake
            state.handshake = nil
            collect(
                state.machine.ended(failure: termination.error(plugin: pluginIdentifier, limits: limits)), into: &actions, state: &state)
            if let token = state.armedToken { loop.cancelTimer(token) }
            state.armedToken = nil
            state.armedDeadline = nil
            subscribers = Array(state.subscribers.values)
            state.subscribers.removeAll()
            waiters = state.terminationWaiters
            state.terminationWaiters.removeAll()
            if !state.machine.invalidated && wasReady { interruption = state.interruptionHandler }
            state.interruptionHandler = nil
            observer = state.terminationObserver
            state.terminationObserver = nil
            state.handlers.removeAll()
            // Unmapped here rather than with the channel, which the caller may keep long after.
            state.sharedRequests = nil
            state.sharedMemoryOffered = nil
            closeWriteDescriptor = !state.writeDescriptorClosed
            state.writeDescriptorClosed = true
            return termination
        }
        guard let termination else { return }
        writer.close()
        actions.write = false
        if let cgroup { removeWhenEmpty(cgroup, attempts: 100) }

        var descriptors = [fromWorker, diagnostics, processDescriptor]
        if closeWriteDescriptor { descriptors.append(toWorker) }
        for descriptor in descriptors {
            loop.deregister(descriptor)
            descriptor.close()
        }

        observer?(termination)
        handshake?.resume(throwing: termination.launchError(plugin: pluginIdentifier, limits: limits))
        perform(actions)
        for subscriber in subscribers { subscriber.buffer.finish() }
        for waiter in waiters { waiter.resume(returning: termination) }
        if let interruption {
            Task.detached { interruption() }
        }
    }

    /// Removes the control group once the last of the worker's processes (dying with it, as pid 1
    /// of their namespace) has left it: retried on the loop, never waited for.
    private func removeWhenEmpty(_ cgroup: WorkerCgroup, attempts: Int) {
        Self.retryRemoval(cgroup, attempts: attempts, loop: loop)
    }

    private static func retryRemoval(_ cgroup: WorkerCgroup, attempts: Int, loop: WorkerEventLoop) {
        guard !cgroup.remove(), attempts > 1 else { return }
        loop.schedule(after: .milliseconds(20)) { retryRemoval(cgroup, attempts: attempts - 1, loop: loop) }
    }

    /// Copies a response out of the worker's region and tells the worker it may reuse it. Loop
    /// thread only. Nil when the location is not inside the region, the message is over the
    /// limit, or shared memory was never agreed.
    private func readSharedResponse(at location: SharedMemoryLocation) -> [UInt8]? {
        guard let sharedMemory = state.withLock({ state in state.sharedRequests.map { (memory: $0.memory, layout: $0.layout) } }),
            let range = location.range(inRegionOf: sharedMemory.layout.regionSize), UInt64(range.count) <= limits.maxMessageBytes,
            let bytes = sharedMemory.memory.copyBytes(at: sharedMemory.layout.toHostOffset + range.lowerBound, count: range.count)
        else { return nil }
        let read = state.withLock { state in
            state.sharedResponsesRead += 1
            return state.sharedResponsesRead
        }
        sharedMemory.memory.storeCounter(read, at: SharedMemoryLayout.consumedResponsesOffset)
        return bytes
    }

    /// How many requests and responses travelled through shared memory so far.
    var sharedMemoryTransfers: (requests: Int, responses: UInt64) {
        state.withLock { ($0.sharedRequests?.placedCount ?? 0, $0.sharedResponsesRead) }
    }

    /// The loop gave up: nothing will be read or written any more. The worker is killed and
    /// reaped here, and everyone waiting learns why.
    func loopFailed(_ error: SystemError) {
        let first = state.withLock { state -> Bool in
            guard state.termination == nil else { return false }
            if state.stopCause == nil { state.stopCause = .hostFailure("the host's event loop failed: \(error)") }
            return true
        }
        guard first else { return }
        try? processDescriptor.sendSignal(SIGKILL)
        let exit = (try? processDescriptor.waitForProcessExit()) ?? ProcessExit(reason: .signaled(signal: SIGKILL, coreDumped: false))
        finish(exit)
    }
}

/// The ask whose handler the current task runs, so that a request it sends to the same worker is
/// nested in the ask (run by the plugin thread that waits for the answer) instead of queued
/// behind it.
struct AskContext: Sendable {
    let channel: ObjectIdentifier
    let ask: UInt64

    @TaskLocal static var current: AskContext?
}

/// "250 ms", "2 s", "1.5 s".
struct DurationText: CustomStringConvertible {
    let duration: Duration

    init(_ duration: Duration) {
        self.duration = duration
    }

    var description: String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds == 0 { return "\(attoseconds / 1_000_000_000_000) µs" }
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
        return "\(Double(milliseconds) / 1000) s"
    }
}
