import Foundation
import Glibc
import PlugindSystem
import PlugindWire
import Synchronization

/// What the worker answered to a request or a typed call.
enum WorkerReply: Sendable {
    case bytes([UInt8])
    case value(FunctionValue)
}

/// The host's side of one worker: frames out and in, the table of requests waiting for answers,
/// deadlines, the tail of the worker's output, and the end of the process.
///
/// All descriptor I/O runs on the `WorkerEventLoop` thread, except that a caller sending a frame
/// first tries one non-blocking write itself (the common case costs no thread hop). State lives
/// in one `Mutex`; continuations are always resumed after the lock is released.
final class WorkerChannel: EventLoopHandler {
    let pluginIdentifier: String
    let limits: ResourceLimits
    let processIdentifier: Int32
    let processDescriptor: FileDescriptor
    let toWorker: FileDescriptor
    let fromWorker: FileDescriptor
    let diagnostics: FileDescriptor
    let loop: WorkerEventLoop
    let state: Locked<State>

    /// How long a request whose deadline passed may take to acknowledge the cancel before the
    /// worker is considered stuck and killed.
    let cancellationGracePeriod: Duration
    /// The worker's control group, for a plugin that may start processes (where the host can make
    /// one): its CPU time is watched here, and it is removed once the worker is gone.
    let cgroup: WorkerCgroup?

    struct State {
        var phase: Phase = .handshaking(nil)
        var nextRequestID: UInt64 = 1
        var pending: [UInt64: PendingRequest] = [:]
        /// Requests the host gave up on (deadline or cancellation) and told the worker to drop,
        /// with the timer that kills the worker if it does not confirm in time.
        var abandoned: [UInt64: UInt64] = [:]
        var outbound = OutboundQueue()
        var writeInterest = false
        /// No more writes: the end is closed or broken.
        var writeClosed = false
        /// The descriptor itself has been closed (once, on the loop thread).
        var writeDescriptorClosed = false
        var readClosed = false
        var decoder: FrameDecoder
        var output: TailBuffer
        var fatalReport: FatalSignalReport?
        var loadFailure: LoadFailure?
        /// The worker's `ready`, kept after it ends: a worker that only inspects or probes may exit
        /// before anyone asked for its answer.
        var ready: Ready?
        /// Why the host stopped the worker itself, if it did.
        var stopCause: StopCause?
        var invalidated = false
        var interruptionHandler: (@Sendable () -> Void)?
        var terminationObserver: (@Sendable (WorkerTermination) -> Void)?
        var subscribers: [Int: AppExtensionMessages.Buffer] = [:]
        var nextSubscriberID = 0
        var terminationWaiters: [CheckedContinuation<WorkerTermination, Never>] = []
        var killTimer: UInt64?
        /// The memory large payloads travel through, when the host created it, until the worker
        /// answers `ready`: then it becomes `sharedRequests` if the worker agreed to it.
        var sharedMemoryOffered: (memory: SharedMemory, layout: SharedMemoryLayout)?
        /// Where large requests go; nil until the worker agreed to shared memory, and again once
        /// it ended (which unmaps the memory).
        var sharedRequests: SharedRequestRegion?
        /// Responses read from the worker's shared region; the worker reuses it when this
        /// count, published in the region's header, reaches the number it placed there.
        var sharedResponsesRead: UInt64 = 0
    }

    enum Phase {
        case handshaking(CheckedContinuation<Ready, any Error>?)
        case ready(Ready)
        case terminated(WorkerTermination)
    }

    struct PendingRequest {
        enum Slot {
            /// Registered; the caller has not suspended yet.
            case reserved
            /// Cancelled before the caller suspended.
            case cancelledEarly(AppExtensionError)
            case waiting(CheckedContinuation<WorkerReply, any Error>)
        }

        var slot: Slot
        var timer: UInt64?
        var timeout: Duration?
    }

    enum StopCause: Sendable {
        case protocolViolation(String)
        case unresponsive(requestID: UInt64, after: Duration)
        case launchTimedOut(Duration)
        case closedChannel
        case cancelledLaunch
        /// A limit the host enforces itself (the CPU time of a control group).
        case exceededLimit(AppExtensionError.ExceededLimit)
        /// The host could not go on serving the worker (its event loop failed).
        case hostFailure(String)
    }

    init(
        pluginIdentifier: String,
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
        self.cancellationGracePeriod = cancellationGracePeriod
        self.cgroup = cgroup
        self.state = Locked(
            State(
                decoder: FrameDecoder(direction: .workerToHost, maximumPayload: Int(limits.maxMessageBytes) + 4096),
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
        if !pending.isEmpty {
            state.withLock { state in
                pending.withUnsafeBytes { state.outbound.append($0, UnsafeRawBufferPointer(start: nil, count: 0), skipping: 0) }
                state.writeInterest = true
            }
        }
        try loop.register(fromWorker, events: Epoll.readable, handler: self)
        try loop.register(diagnostics, events: Epoll.readable, handler: self)
        try loop.register(toWorker, events: pending.isEmpty ? 0 : Epoll.writable, handler: self)
        try loop.register(processDescriptor, events: Epoll.readable, handler: self)
        if cgroup != nil && limits.cpuSeconds > 0 { watchCPUTime() }
    }

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

    // MARK: Handshake

    /// Waits for `ready`, the answer to the `hello` the launcher wrote into the pipe before the
    /// worker started. Kills the worker when it does not answer within `timeout` or the task is
    /// cancelled.
    func awaitReady(timeout: Duration) async throws -> Ready {
        let timer = loop.schedule(after: timeout) { [weak self] in
            self?.stop(.launchTimedOut(timeout))
        }
        defer { loop.cancelTimer(timer) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Ready, any Error>) in
                let immediate: Result<Ready, any Error>? = state.withLock { state in
                    if let ready = state.ready { return .success(ready) }
                    switch state.phase {
                    case .handshaking:
                        state.phase = .handshaking(continuation)
                        return nil
                    case .ready(let ready):
                        return .success(ready)
                    case .terminated(let termination):
                        return .failure(termination.launchError(plugin: pluginIdentifier, limits: limits))
                    }
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            stop(.cancelledLaunch)
        }
    }

    // MARK: Requests

    /// Sends request bytes and waits for the response.
    func request(_ bytes: [UInt8], timeout: Duration?) async throws -> [UInt8] {
        let reply = try await perform(timeout: timeout) { id in
            FrameHeader(kind: .request, requestID: id, payloadLength: bytes.count)
        } payload: { header, state in
            bytes.withUnsafeBytes { bytes in
                // Large payloads go through shared memory when there is room; the pipe carries
                // only where they are. The copy happens here, under the lock, so that the region
                // is never written once the worker has ended.
                if bytes.count >= SharedMemoryLayout.threshold, !state.writeClosed,
                    let location = state.sharedRequests?.place(bytes, for: header.requestID)
                {
                    let frame = HostMessage.sharedRequest(id: header.requestID, location).encode()
                    frame.payload.withUnsafeBytes { enqueue(frame.header, $0, in: &state) }
                } else {
                    enqueue(header, bytes, in: &state)
                }
            }
        }
        guard case .bytes(let response) = reply else {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a request with a call result")
        }
        return response
    }

    /// Calls the manifest-declared function at `index`.
    func call(function index: UInt32, arguments: [FunctionValue], timeout: Duration?) async throws -> FunctionValue {
        // Encoded once; only the header carries the request's identifier.
        let frame = HostMessage.call(id: 0, function: index, arguments: arguments).encode()
        let reply = try await perform(timeout: timeout) { id in
            var header = frame.header
            header.requestID = id
            return header
        } payload: { header, state in
            frame.payload.withUnsafeBytes { enqueue(header, $0, in: &state) }
        }
        guard case .value(let value) = reply else {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "answered a call with response bytes")
        }
        return value
    }

    private func perform(
        timeout: Duration?,
        header makeHeader: (UInt64) -> FrameHeader,
        payload enqueuePayload: (FrameHeader, inout State) -> Void
    ) async throws -> WorkerReply {
        let reservation: Result<UInt64, AppExtensionError> = state.withLock { state in
            guard case .ready = state.phase, !state.invalidated else { return .failure(unavailableError(state)) }
            let id = state.nextRequestID
            state.nextRequestID += 1
            state.pending[id] = PendingRequest(slot: .reserved, timeout: timeout)
            return .success(id)
        }
        let id = try reservation.get()
        let header = makeHeader(id)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<WorkerReply, any Error>) in
                let failure: AppExtensionError? = state.withLock { state in
                    guard var pending = state.pending[id] else { return unavailableError(state) }
                    if case .cancelledEarly(let error) = pending.slot {
                        state.pending[id] = nil
                        return error
                    }
                    pending.slot = .waiting(continuation)
                    if let timeout {
                        pending.timer = loop.schedule(after: timeout) { [weak self] in
                            self?.abandon(id, because: .timedOut)
                        }
                    }
                    state.pending[id] = pending
                    enqueuePayload(header, &state)
                    return nil
                }
                if let failure { continuation.resume(throwing: failure) }
            }
        } onCancel: {
            abandon(id, because: .cancelled)
        }
    }

    enum AbandonReason {
        case timedOut
        case cancelled
    }

    /// Fails a request now and tells the worker to drop it. If the worker neither answers nor
    /// confirms within the grace period, it is stuck in plugin code and is killed.
    func abandon(_ id: UInt64, because reason: AbandonReason) {
        let resume: (CheckedContinuation<WorkerReply, any Error>, AppExtensionError)? = state.withLock { state in
            guard var pending = state.pending[id] else { return nil }
            let error: AppExtensionError
            switch reason {
            case .timedOut:
                let limit = pending.timeout.map { DurationText($0).description } ?? "its deadline"
                error = AppExtensionError(.timedOut, plugin: pluginIdentifier, "request did not finish within \(limit)")
            case .cancelled:
                error = AppExtensionError(.cancelled, plugin: pluginIdentifier, "request was cancelled")
            }
            switch pending.slot {
            case .reserved:
                pending.slot = .cancelledEarly(error)
                state.pending[id] = pending
                return nil
            case .cancelledEarly:
                return nil
            case .waiting(let continuation):
                state.pending[id] = nil
                if let timer = pending.timer { loop.cancelTimer(timer) }
                let cancel = HostMessage.cancel(id: id).encode()
                enqueue(cancel.header, UnsafeRawBufferPointer(start: nil, count: 0), in: &state)
                let grace = cancellationGracePeriod
                state.abandoned[id] = loop.schedule(after: grace) { [weak self] in
                    self?.abandonedRequestExpired(id, grace: grace)
                }
                return (continuation, error)
            }
        }
        if let (continuation, error) = resume { continuation.resume(throwing: error) }
    }

    private func abandonedRequestExpired(_ id: UInt64, grace: Duration) {
        let stuck = state.withLock { $0.abandoned.removeValue(forKey: id) != nil }
        if stuck { stop(.unresponsive(requestID: id, after: grace)) }
    }

    // MARK: Messages the plugin sends unprompted

    /// A new sequence of the messages the plugin sends from now on, with a bounded buffer. A
    /// sequence nobody reads any more costs at most its budget until the process ends.
    func messages() -> AppExtensionMessages {
        let buffer = AppExtensionMessages.Buffer()
        let accepted = state.withLock { state -> Bool in
            if case .terminated = state.phase { return false }
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[id] = buffer
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
            if case .terminated(let termination) = state.phase { return termination }
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
        let failed: [CheckedContinuation<WorkerReply, any Error>] = state.withLock { state in
            guard !state.invalidated else { return [] }
            state.invalidated = true
            if case .terminated = state.phase { return [] }
            var continuations: [CheckedContinuation<WorkerReply, any Error>] = []
            for (id, pending) in state.pending {
                if let timer = pending.timer { loop.cancelTimer(timer) }
                if case .waiting(let continuation) = pending.slot {
                    continuations.append(continuation)
                    state.pending[id] = nil
                } else {
                    state.pending[id]?.slot = .cancelledEarly(invalidatedError)
                }
            }
            if state.outbound.isEmpty {
                let shutdown = HostMessage.shutdown.encode()
                enqueue(shutdown.header, UnsafeRawBufferPointer(start: nil, count: 0), in: &state)
            }
            state.killTimer = loop.schedule(after: grace) { [weak self] in self?.kill() }
            return continuations
        }
        for continuation in failed { continuation.resume(throwing: invalidatedError) }
        loop.execute { [self] in closeWriteEnd() }
    }

    private var invalidatedError: AppExtensionError {
        AppExtensionError(.cancelled, plugin: pluginIdentifier, "the process was invalidated")
    }

    /// Waits until the worker has exited and been reaped.
    func termination() async -> WorkerTermination {
        await withCheckedContinuation { continuation in
            let ended: WorkerTermination? = state.withLock { state in
                if case .terminated(let termination) = state.phase { return termination }
                state.terminationWaiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    var isInvalidated: Bool {
        state.withLock { $0.invalidated }
    }

    var isTerminated: Bool {
        state.withLock { state in
            if case .terminated = state.phase { return true }
            return false
        }
    }

    /// Kills the worker because of `cause`, which the errors of pending requests will name.
    func stop(_ cause: StopCause) {
        let first = state.withLock { state -> Bool in
            if case .terminated = state.phase { return false }
            guard state.stopCause == nil else { return false }
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
                state.withLock { flushOutbound(&$0) }
            }
        case processDescriptor.rawValue: processExited()
        default: break
        }
    }

    private func readFromWorker() {
        var frames: [Frame] = []
        var violation: WireError?
        var endOfStream = false
        state.withLock { state in
            guard !state.readClosed else { return }
            while true {
                let count = state.decoder.receive { buffer in
                    Glibc.read(fromWorker.rawValue, buffer.baseAddress, buffer.count)
                }
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
                state.readClosed = true
                do throws(WireError) {
                    try state.decoder.finish()
                } catch {
                    violation = violation ?? error
                }
            }
        }
        // After a violation nothing more from this worker is believed, not even a later answer.
        for frame in frames where state.withLock({ $0.stopCause == nil }) { dispatch(frame) }
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
        let close = state.withLock { state -> Bool in
            state.writeClosed = true
            state.outbound.removeAll()
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
        var continuations: [CheckedContinuation<WorkerReply, any Error>] = []
        var handshake: CheckedContinuation<Ready, any Error>?
        var subscribers: [AppExtensionMessages.Buffer] = []
        var waiters: [CheckedContinuation<WorkerTermination, Never>] = []
        var interruption: (@Sendable () -> Void)?
        var observer: (@Sendable (WorkerTermination) -> Void)?
        var wasReady = false
        var closeWriteDescriptor = false
        // Read before the lock: a file of the kernel's.
        let hitMemoryLimit = cgroup?.hitMemoryLimit ?? false
        let termination: WorkerTermination? = state.withLock { state in
            if case .terminated = state.phase { return nil }
            var termination = WorkerTermination(
                exit: exit,
                fatalReport: state.fatalReport,
                stopCause: state.stopCause,
                loadFailure: state.loadFailure,
                output: state.output.text,
                wasInvalidated: state.invalidated
            )
            termination.cgroupHitMemoryLimit = hitMemoryLimit
            switch state.phase {
            case .handshaking(let continuation): handshake = continuation
            case .ready: wasReady = true
            case .terminated: break
            }
            state.phase = .terminated(termination)
            for pending in state.pending.values {
                if let timer = pending.timer { loop.cancelTimer(timer) }
                if case .waiting(let continuation) = pending.slot { continuations.append(continuation) }
            }
            state.pending.removeAll()
            for timer in state.abandoned.values { loop.cancelTimer(timer) }
            state.abandoned.removeAll()
            if let timer = state.killTimer { loop.cancelTimer(timer) }
            subscribers = Array(state.subscribers.values)
            state.subscribers.removeAll()
            waiters = state.terminationWaiters
            state.terminationWaiters.removeAll()
            if !state.invalidated && wasReady { interruption = state.interruptionHandler }
            state.interruptionHandler = nil
            observer = state.terminationObserver
            state.terminationObserver = nil
            state.outbound.removeAll()
            state.writeClosed = true
            // Unmapped here rather than with the channel, which the caller may keep long after.
            state.sharedRequests = nil
            state.sharedMemoryOffered = nil
            closeWriteDescriptor = !state.writeDescriptorClosed
            state.writeDescriptorClosed = true
            return termination
        }
        guard let termination else { return }
        if let cgroup { removeWhenEmpty(cgroup, attempts: 100) }

        var descriptors = [fromWorker, diagnostics, processDescriptor]
        if closeWriteDescriptor { descriptors.append(toWorker) }
        for descriptor in descriptors {
            loop.deregister(descriptor)
            descriptor.close()
        }

        observer?(termination)
        if let handshake {
            handshake.resume(throwing: termination.launchError(plugin: pluginIdentifier, limits: limits))
        }
        if !continuations.isEmpty {
            let error = termination.error(plugin: pluginIdentifier, limits: limits)
            for continuation in continuations { continuation.resume(throwing: error) }
        }
        for subscriber in subscribers { subscriber.finish() }
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

    // MARK: Incoming frames

    private func dispatch(_ frame: Frame) {
        let message: WorkerMessage
        do {
            message = try WorkerMessage(frame)
        } catch {
            stop(.protocolViolation(error.description))
            return
        }
        switch message {
        case .ready(let ready):
            let continuation: CheckedContinuation<Ready, any Error>?? = state.withLock { state in
                guard case .handshaking(let continuation) = state.phase else { return .none }
                state.phase = .ready(ready)
                state.ready = ready
                if let offered = state.sharedMemoryOffered, ready.features.contains(ProtocolFeature.sharedMemory) {
                    state.sharedRequests = SharedRequestRegion(memory: offered.memory, layout: offered.layout)
                }
                state.sharedMemoryOffered = nil
                return .some(continuation)
            }
            switch continuation {
            case .none: stop(.protocolViolation("sent ready twice"))
            case .some(let waiting): waiting?.resume(returning: ready)
            }
        case .loadFailed(let failure):
            state.withLock { $0.loadFailure = failure }
        case .response(let id, let bytes):
            complete(id, with: .success(.bytes(bytes)))
        case .sharedResponse(let id, let location):
            guard let bytes = readSharedResponse(at: location) else {
                stop(.protocolViolation("response \(id) lies outside the shared-memory region or exceeds the message limit"))
                return
            }
            complete(id, with: .success(.bytes(bytes)))
        case .callResult(let id, let value):
            complete(id, with: .success(.value(value)))
        case .failure(let id, let failure):
            complete(id, with: .failure(pluginFailureError(failure)))
        case .callFailed(let id, let message):
            complete(id, with: .failure(AppExtensionError(.invalidArguments, plugin: pluginIdentifier, message)))
        case .cancelled(let id):
            complete(id, with: .failure(AppExtensionError(.cancelled, plugin: pluginIdentifier, "request was cancelled")))
        case .event(let id, let bytes):
            broadcast(.event(requestIdentifier: id == 0 ? nil : id, bytes: bytes))
        case .progress(let id, let completed, let total):
            broadcast(.progress(requestIdentifier: id == 0 ? nil : id, completed: completed, total: total))
        case .log(let level, let text):
            broadcast(.log(level: level, message: text))
        case .fatalSignal(let report):
            state.withLock { state in
                if state.fatalReport == nil { state.fatalReport = report }
            }
        case .goodbye:
            break
        }
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

    private func pluginFailureError(_ failure: PluginFailure) -> AppExtensionError {
        if failure.code == ReservedFailureCode.responseTooLarge {
            return AppExtensionError(
                .limitExceeded,
                plugin: pluginIdentifier,
                failure.message,
                exceededLimit: .init(kind: .messageSize, value: limits.maxMessageBytes)
            )
        }
        if failure.code == ReservedFailureCode.noRequestHandler {
            return AppExtensionError(.unsupported, plugin: pluginIdentifier, failure.message)
        }
        return AppExtensionError(
            .pluginError,
            plugin: pluginIdentifier,
            "failed with code \(failure.code): \(failure.message)",
            pluginErrorCode: failure.code
        )
    }

    /// Delivers an answer, or drops a late one for a request the host already gave up on.
    private func complete(_ id: UInt64, with result: Result<WorkerReply, AppExtensionError>) {
        let outcome: Result<CheckedContinuation<WorkerReply, any Error>?, WireError> = state.withLock { state in
            // Answered, so the worker is done reading the request's payload.
            state.sharedRequests?.release(id)
            if let timer = state.abandoned.removeValue(forKey: id) {
                loop.cancelTimer(timer)
                return .success(nil)
            }
            guard let pending = state.pending[id], case .waiting(let continuation) = pending.slot else {
                return id < state.nextRequestID
                    ? .success(nil) : .failure(.unexpectedMessage("answer to request \(id), which was never sent"))
            }
            if let timer = pending.timer { loop.cancelTimer(timer) }
            state.pending[id] = nil
            return .success(continuation)
        }
        switch outcome {
        case .success(let continuation): continuation?.resume(with: result.mapError { $0 as any Error })
        case .failure(let violation): stop(.protocolViolation(violation.description))
        }
    }

    private func broadcast(_ message: AppExtensionMessage) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(message) }
    }

    // MARK: Outgoing bytes

    /// Writes a frame now if nothing is queued and the pipe has room; queues the rest for the
    /// loop to write when the pipe drains.
    private func enqueue(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, in state: inout State) {
        guard !state.writeClosed else { return }
        var headerBytes = (UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &headerBytes) { headerBuffer in
            header.encode(into: headerBuffer)
            let headerView = UnsafeRawBufferPointer(headerBuffer)
            var written = 0
            if state.outbound.isEmpty {
                written = writeVectored(headerView, payload)
                if written < 0 {
                    state.writeClosed = true
                    return
                }
            }
            state.outbound.append(headerView, payload, skipping: written)
        }
        if !state.outbound.isEmpty && !state.writeInterest {
            state.writeInterest = true
            watchWritable(true, in: &state)
        }
    }

    /// Watches the pipe to the worker for room (or stops). When epoll refuses, nothing queued
    /// would ever be written: the worker is stopped, naming the cause, instead of hanging.
    private func watchWritable(_ writable: Bool, in state: inout State) {
        do {
            try loop.modify(toWorker, events: writable ? Epoll.writable : 0)
        } catch {
            state.writeClosed = true
            state.outbound.removeAll()
            let cause = "cannot watch the pipe to the worker: \(error)"
            loop.execute { [weak self] in self?.stop(.hostFailure(cause)) }
        }
    }

    /// The loop gave up: nothing will be read or written any more. The worker is killed and
    /// reaped here, and everyone waiting learns why.
    func loopFailed(_ error: SystemError) {
        let first = state.withLock { state -> Bool in
            if case .terminated = state.phase { return false }
            if state.stopCause == nil { state.stopCause = .hostFailure("the host's event loop failed: \(error)") }
            return true
        }
        guard first else { return }
        try? processDescriptor.sendSignal(SIGKILL)
        let exit = (try? processDescriptor.waitForProcessExit()) ?? ProcessExit(reason: .signaled(signal: SIGKILL, coreDumped: false))
        finish(exit)
    }

    /// Writes as much of both buffers as the pipe takes without blocking. Returns the count,
    /// or -1 when the worker's end is closed.
    private func writeVectored(_ header: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) -> Int {
        var vectors = [
            iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: payload.baseAddress), iov_len: payload.count),
        ]
        while true {
            let written = vectors.withUnsafeMutableBufferPointer { writev(toWorker.rawValue, $0.baseAddress, 2) }
            if written >= 0 { return written }
            if errno == EINTR { continue }
            return errno == EAGAIN ? 0 : -1
        }
    }

    private func flushOutbound(_ state: inout State) {
        while !state.outbound.isEmpty {
            let written = state.outbound.withFirstChunk { chunk in Glibc.write(toWorker.rawValue, chunk.baseAddress, chunk.count) }
            if written > 0 {
                state.outbound.consume(written)
                continue
            }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && errno != EAGAIN {
                state.writeClosed = true
                state.outbound.removeAll()
            }
            break
        }
        if state.outbound.isEmpty && state.writeInterest && !state.writeClosed {
            state.writeInterest = false
            watchWritable(false, in: &state)
        }
    }

    // MARK: Errors

    private func unavailableError(_ state: State) -> AppExtensionError {
        // After invalidate() the caller ended the process: say so, whatever the worker did next.
        if state.invalidated { return invalidatedError }
        if case .terminated(let termination) = state.phase {
            return termination.error(plugin: pluginIdentifier, limits: limits)
        }
        return AppExtensionError(.invalidated, plugin: pluginIdentifier, "the worker is not ready")
    }
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
