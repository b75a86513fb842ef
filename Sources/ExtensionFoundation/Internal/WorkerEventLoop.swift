import CPlugindShims
import Foundation
import PlugindSystem
import Synchronization

/// One thread per host process that owns every worker's descriptors: it waits in epoll for
/// protocol bytes, diagnostics output and process exits, fires deadlines, and runs the jobs that
/// must happen on a long-lived thread (spawning, because PR_SET_PDEATHSIG follows the thread that
/// spawned). No blocking call ever runs on Swift's cooperative pool. It is also a task executor,
/// for tasks that opt in (`AppExtensionProcess.taskExecutor`).
final class WorkerEventLoop: TaskExecutor {
    typealias Job = @Sendable () -> Void

    private struct State {
        var handlers: [Int32: any EventLoopHandler] = [:]
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
    private let state = Mutex(State())
    /// Set while the loop thread runs, to tell callers whether they are on it.
    private let loopThreadID = Atomic<UInt>(0)

    private static let sharedLoop = Mutex<WorkerEventLoop?>(nil)

    /// The process-wide loop, started on first use. Also ignores SIGPIPE for the process, so that
    /// writing to a dead worker fails with EPIPE instead of killing the host, and raises the soft
    /// limit on open files to the hard one, since every live worker holds four descriptors.
    static func shared() throws(SystemError) -> WorkerEventLoop {
        try sharedLoop.withLock { (loop) throws(SystemError) -> WorkerEventLoop in
            if let loop { return loop }
            try checkShim("sigaction(SIGPIPE)", plugind_shim_ignore_sigpipe())
            var openFiles: UInt64 = 0
            _ = plugind_shim_raise_open_file_limit(&openFiles)
            let created = try WorkerEventLoop()
            created.start()
            loop = created
            return created
        }
    }

    private init() throws(SystemError) {
        epoll = try Epoll()
        notifier = try EventNotifier()
        try epoll.add(notifier.descriptor, events: Epoll.readable)
    }

    private func start() {
        let thread = Thread { [self] in run() }
        thread.name = Self.threadName
        thread.stackSize = 1 << 20
        thread.start()
    }

    // MARK: Registration

    /// Watches `descriptor` for `events` and reports them to `handler` on the loop thread.
    func register(_ descriptor: FileDescriptor, events: UInt32, handler: any EventLoopHandler) throws(SystemError) {
        state.withLock { $0.handlers[descriptor.rawValue] = handler }
        do {
            try epoll.add(descriptor, events: events)
        } catch {
            state.withLock { $0.handlers[descriptor.rawValue] = nil }
            throw error
        }
    }

    func modify(_ descriptor: FileDescriptor, events: UInt32) {
        try? epoll.modify(descriptor, events: events)
    }

    /// Stops watching `descriptor`. Call before closing it.
    func deregister(_ descriptor: FileDescriptor) {
        try? epoll.remove(descriptor)
        state.withLock { $0.handlers[descriptor.rawValue] = nil }
    }

    // MARK: Task executor

    /// Runs task jobs on the loop thread: a task that prefers this executor resumes on the thread
    /// that read its answer, without waking another.
    func enqueue(_ job: consuming ExecutorJob) {
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
        let deadline = ContinuousClock.now.advanced(by: delay)
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
        while true {
            let timeout = millisecondsUntilNextTimer()
            let count = (try? epoll.wait(into: events, timeoutMilliseconds: timeout)) ?? 0
            // Awake: timers scheduled from here on are seen when the next wait is computed.
            state.withLock { $0.plannedWake = .computing }
            for index in 0..<count {
                let event = events[index]
                let descriptor = event.data.fd
                if descriptor == notifier.descriptor.rawValue {
                    notifier.drain()
                    continue
                }
                let handler = state.withLock { $0.handlers[descriptor] }
                handler?.handleEvent(descriptor: descriptor, events: event.events)
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
