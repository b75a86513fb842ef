import CPlugindShims
import FoundationEssentials
import Glibc
import PlugindSystem
import Synchronization

/// One thread per host process that owns every worker's descriptors: it waits in epoll for
/// protocol bytes, diagnostics output and process exits, fires deadlines, and runs the jobs that
/// must happen on a long-lived thread (spawning, because PR_SET_PDEATHSIG follows the thread that
/// spawned). No blocking call ever runs on Swift's cooperative pool. It is also a task executor,
/// for tasks that opt in (`AppExtensionProcess.taskExecutor`).
package final class WorkerEventLoop: TaskExecutor {
    typealias Job = @Sendable () -> Void

    /// One descriptor being watched: its handler, under a number of its own.
    private struct Registration {
        let descriptor: Int32
        let handler: any EventLoopHandler
    }

    private struct State {
        /// By registration number (what epoll reports), and the number of each watched descriptor.
        var registrations: [UInt64: Registration] = [:]
        var tokens: [Int32: UInt64] = [:]
        var nextToken: UInt64 = 1
        /// epoll_ctl failures on modify and remove, which callers cannot act on one by one.
        var controlFailures: [SystemError] = []
        var jobs: [Job] = []
        var tasks: [UnownedJob] = []
        var timers = TimerQueue<Job>()
        var plannedWake = PlannedWake.computing
    }

    /// When the loop will wake up by itself at the latest.
    private enum PlannedWake {
        /// Awake: the next wait is computed from the timers as they are then.
        case computing
        case at(ContinuousClock.Instant)
        /// Waiting for events only.
        case never
    }

    private let epoll: Epoll
    private let notifier: EventNotifier
    /// How the loop waits: epoll_wait, or a stand-in in tests that make it fail.
    private let wait: @Sendable (UnsafeMutableBufferPointer<epoll_event>, CInt) throws -> Int
    /// After this many failed waits in a row (with a pause between them that doubles up to
    /// `maximumBackoff`) the loop gives up: every handler is told, and a new loop serves new
    /// workers. A failing wait never spins.
    let maximumConsecutiveFailures: Int
    let maximumBackoff: Duration
    /// Set once the loop gave up.
    private let failed = Atomic(false)
    private let state = Locked(State())
    /// Set while the loop thread runs, to tell callers whether they are on it.
    private let loopThreadID = Atomic<UInt>(0)
    /// Requests sent to the workers of this loop's channels and not answered yet: the loop polls
    /// for answers only while few are awaited (`BusyPolling`). Kept by `WorkerChannel`.
    let awaitedAnswers = Atomic<Int>(0)
    /// Callers polling a worker's ring for their answers (`WorkerChannel.lookForAnswer`):
    /// meanwhile the loop does not poll too, which would take the processor the worker needs.
    let callersPolling = Atomic<Int>(0)
    /// When a request last started while another was awaited (`MonotonicInstant` nanoseconds):
    /// callers poll only once that has not happened for a while (`callerIsAlone`).
    private let lastConcurrentRequest = Atomic<Int64>(.min)

    /// A request started while others were awaited: more than one caller is at work.
    func noteConcurrentRequests() {
        lastConcurrentRequest.store(MonotonicInstant.now.nanoseconds, ordering: .relaxed)
    }

    /// Whether one caller alone has been sending for `aloneFor`: no request started beside an
    /// awaited one meanwhile, and nobody polls now. A caller that polls holds its thread, and
    /// tasks queued behind it (which the loop cannot see) would wait.
    func callerIsAlone(for aloneFor: Duration) -> Bool {
        guard awaitedAnswers.load(ordering: .relaxed) == 1, callersPolling.load(ordering: .relaxed) == 0 else { return false }
        let last = lastConcurrentRequest.load(ordering: .relaxed)
        return last == .min || MonotonicInstant(nanoseconds: last) + aloneFor < .now
    }
    /// The host's own work with the workers of this loop's channels so far: requests, calls,
    /// connections and answers to asks sent, requests and connections answered (not a launch's
    /// or an end's frames). Work made ahead waits for a moment when it stops moving
    /// (`QuietMoment`). Kept by `WorkerChannel`.
    let traffic = Atomic<UInt64>(0)

    private static let sharedLoop = Locked<WorkerEventLoop?>(nil)

    /// The process-wide loop, started on first use. Also ignores SIGPIPE for the process, so that
    /// writing to a dead worker fails with EPIPE instead of killing the host, and raises the soft
    /// limit on open files to the hard one, since every live worker holds four descriptors.
    static func shared() throws(SystemError) -> WorkerEventLoop {
        try sharedLoop.withLock { (loop) throws(SystemError) -> WorkerEventLoop in
            if let loop, !loop.failed.load(ordering: .acquiring) { return loop }
            try checkShim("sigaction(SIGPIPE)", plugind_shim_ignore_sigpipe())
            var openFiles: UInt64 = 0
            _ = plugind_shim_raise_open_file_limit(&openFiles)
            let created = try WorkerEventLoop()
            try created.start()
            loop = created
            return created
        }
    }

    /// The token of the notifier's registration: events that only wake the loop.
    private static let notifierToken: UInt64 = 0

    /// A loop; `wait` replaces epoll_wait in tests.
    init(
        maximumConsecutiveFailures: Int = 50,
        maximumBackoff: Duration = .milliseconds(100),
        wait: (@Sendable (UnsafeMutableBufferPointer<epoll_event>, CInt) throws -> Int)? = nil
    ) throws(SystemError) {
        let epoll = try Epoll()
        self.epoll = epoll
        notifier = try EventNotifier()
        try epoll.add(notifier.descriptor, events: Epoll.readable, token: Self.notifierToken)
        if let wait {
            self.wait = wait
        } else {
            self.wait = { events, timeout in try epoll.wait(into: events, timeoutMilliseconds: timeout) }
        }
        self.maximumConsecutiveFailures = maximumConsecutiveFailures
        self.maximumBackoff = maximumBackoff
    }

    func start() throws(SystemError) {
        let thread = try SystemThread.start(stackBytes: 1 << 20) { [self] in run() }
        pthread_detach(thread)
    }

    // MARK: Registration

    /// Watches `descriptor` for `events` and reports them to `handler` on the loop thread.
    func register(_ descriptor: FileDescriptor, events: UInt32, handler: any EventLoopHandler) throws(SystemError) {
        let token = state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.registrations[token] = Registration(descriptor: descriptor.rawValue, handler: handler)
            state.tokens[descriptor.rawValue] = token
            return token
        }
        do {
            try epoll.add(descriptor, events: events, token: token)
        } catch {
            state.withLock { state in
                state.registrations[token] = nil
                state.tokens[descriptor.rawValue] = nil
            }
            throw error
        }
    }

    /// Changes the events watched for `descriptor`. Throws when epoll refuses, which leaves the
    /// old interest in place: the caller must treat the descriptor as unusable.
    func modify(_ descriptor: FileDescriptor, events: UInt32) throws(SystemError) {
        guard let token = state.withLock({ $0.tokens[descriptor.rawValue] }) else {
            throw SystemError("epoll_ctl (modify an unwatched descriptor)", .badFileDescriptor)
        }
        try epoll.modify(descriptor, events: events, token: token)
    }

    /// Stops watching `descriptor`. Call before closing it. From then on no event reaches its
    /// handler, not even one already read in the current batch.
    func deregister(_ descriptor: FileDescriptor) {
        let known = state.withLock { state -> Bool in
            guard let token = state.tokens.removeValue(forKey: descriptor.rawValue) else { return false }
            state.registrations[token] = nil
            return true
        }
        guard known else { return }
        do {
            try epoll.remove(descriptor)
        } catch {
            // The descriptor is forgotten either way; the failure is kept for whoever looks.
            state.withLock { $0.controlFailures.append(error) }
        }
    }

    /// epoll_ctl failures of `modify` and `deregister` so far. For tests.
    var controlFailures: [SystemError] { state.withLock { $0.controlFailures } }

    /// Whether the loop gave up after repeated failures of its wait.
    var hasFailed: Bool { failed.load(ordering: .acquiring) }

    // MARK: Task executor

    /// Runs task jobs on the loop thread: a task that prefers this executor resumes on the thread
    /// that read its answer, without waking another.
    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        state.withLock { $0.tasks.append(unowned) }
        if !isOnLoopThread { notifier.signal() }
    }

    // MARK: Jobs and timers

    /// Runs `job` on the loop thread.
    func execute(_ job: @escaping Job) {
        state.withLock { $0.jobs.append(job) }
        notifier.signal()
    }

    /// Runs `body` on the loop thread and returns its result.
    func run<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            execute { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    /// Runs `action` on the loop thread after `delay`. Returns an identifier for `cancelTimer`.
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping Job) -> UInt64 {
        schedule(at: ContinuousClock.now.advanced(by: delay), action)
    }

    /// Runs `action` on the loop thread at `deadline` (at once if it has passed); returns a token
    /// for `cancelTimer`.
    @discardableResult
    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping Job) -> UInt64 {
        let (identifier, wakeLoop) = state.withLock { state in
            // The loop only needs waking when it would sleep past this deadline. A request's
            // deadline is usually later than the one before it (whose timer was cancelled but
            // still bounds the wait), so most requests cost the loop no wake-up.
            let wakeLoop =
                switch state.plannedWake {
                case .computing: false
                case .at(let planned): planned > deadline
                case .never: true
                }
            return (state.timers.schedule(at: deadline, action), wakeLoop)
        }
        if wakeLoop { notifier.signal() }
        return identifier
    }

    func cancelTimer(_ identifier: UInt64) {
        state.withLock { $0.timers.cancel(identifier) }
    }

    var isOnLoopThread: Bool {
        loopThreadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    // MARK: The loop

    /// The thread's name in ps, top and /proc (a new thread inherits its creator's otherwise).
    static let threadName = "plugind-events"

    private func run() {
        loopThreadID.store(UInt(pthread_self()), ordering: .relaxed)
        _ = plugind_shim_set_thread_name(Self.threadName)
        let capacity = 64
        let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: capacity)
        // Freed when the loop gives up (its thread ends).
        defer { events.deallocate() }
        var consecutiveFailures = 0
        var backoff = Duration.milliseconds(1)
        // Until when the loop polls instead of sleeping (`BusyPolling`): a moment after it
        // handled something, while few answers are awaited.
        var pollingUntil = MonotonicInstant(nanoseconds: .min)
        while true {
            let timeout = millisecondsUntilNextTimer()
            let count: Int
            do {
                var polled = 0
                while timeout != 0, MonotonicInstant.now < pollingUntil,
                    awaitedAnswers.load(ordering: .relaxed) <= BusyPolling.awaitedLimit,
                    callersPolling.load(ordering: .relaxed) == 0
                {
                    polled = try wait(events, 0)
                    if polled > 0 { break }
                    if !BusyPolling.yieldUncontended() { pollingUntil = .now }
                }
                count = polled > 0 ? polled : try wait(events, timeout)
                consecutiveFailures = 0
                backoff = .milliseconds(1)
            } catch {
                consecutiveFailures += 1
                if consecutiveFailures >= maximumConsecutiveFailures {
                    giveUp(error as? SystemError ?? SystemError("epoll_wait", .invalidArgument))
                    return
                }
                // A wait that keeps failing must not spin: pause, longer each time.
                SystemThread.sleep(backoff)
                backoff = min(backoff * 2, maximumBackoff)
                continue
            }
            if count > 0, BusyPolling.isWorthwhile { pollingUntil = .after(BusyPolling.window) }
            // Awake: timers scheduled from here on are seen when the next wait is computed.
            state.withLock { $0.plannedWake = .computing }
            for index in 0..<count {
                let event = events[index]
                let token = event.data.u64
                if token == Self.notifierToken {
                    notifier.drain()
                    continue
                }
                // Looked up for each event: one deregistered earlier in this batch is skipped.
                guard let registration = state.withLock({ $0.registrations[token] }) else { continue }
                registration.handler.handleEvent(descriptor: registration.descriptor, events: event.events)
            }
            let (jobs, due) = state.withLock { state in
                defer { state.jobs.removeAll(keepingCapacity: true) }
                return (state.jobs, state.timers.popDue(now: .now))
            }
            for job in jobs { job() }
            for action in due { action() }
            runTasks()
        }
    }

    /// Ends the loop after its wait failed for good: every handler learns it (workers are killed
    /// and their requests fail naming the cause), and the next launch starts a new loop.
    private func giveUp(_ error: SystemError) {
        failed.store(true, ordering: .releasing)
        let handlers = state.withLock { state -> [any EventLoopHandler] in
            defer {
                state.registrations.removeAll()
                state.tokens.removeAll()
            }
            var seen: Set<ObjectIdentifier> = []
            return state.registrations.values.map(\.handler).filter { seen.insert(ObjectIdentifier($0)).inserted }
        }
        for handler in handlers { handler.loopFailed(error) }
    }

    /// Runs the task jobs enqueued so far. Those they enqueue in turn wait for the next pass,
    /// after the loop has looked at its descriptors (without blocking), so that a task that keeps
    /// yielding cannot starve the I/O it may be waiting for.
    private func runTasks() {
        let tasks = state.withLock { state in
            defer { state.tasks.removeAll(keepingCapacity: true) }
            return state.tasks
        }
        for task in tasks { task.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    private func millisecondsUntilNextTimer() -> Int32 {
        let next = state.withLock { state -> ContinuousClock.Instant? in
            let next = state.jobs.isEmpty && state.tasks.isEmpty ? state.timers.wakeBound(now: .now) : .now
            state.plannedWake = next.map(PlannedWake.at) ?? .never
            return next
        }
        guard let next else { return -1 }
        let remaining = ContinuousClock.now.duration(to: next)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Round up, so that a timer never fires early.
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: milliseconds)
    }
}
