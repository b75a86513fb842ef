import CPlugindShims
import Glibc

/// A lock with a condition variable, for the worker's threads: the request threads wait on it
/// for work, a thread that asked the host waits on it for the answer. POSIX directly, because
/// waiting with a deadline is the point.
final class ThreadCondition: @unchecked Sendable {
    // @unchecked: the pthread objects are used only through the calls below, which are the
    // synchronisation themselves.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        // Deadlines on the monotonic clock: a change of the wall clock moves no ask's deadline.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits, with the lock held, until woken.
    func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Waits, with the lock held, until woken or `deadline` (CLOCK_MONOTONIC) passed. False when
    /// the deadline passed.
    func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// Milliseconds from now until `deadline` (CLOCK_MONOTONIC); 0 or less when it passed.
    static func milliseconds(until deadline: timespec) -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(deadline.tv_sec - now.tv_sec) * 1000 + Int64(deadline.tv_nsec - now.tv_nsec) / 1_000_000
    }

    /// CLOCK_MONOTONIC `milliseconds` from now.
    static func deadline(afterMilliseconds milliseconds: UInt64) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = UInt64(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        return timespec(
            tv_sec: now.tv_sec + Int(milliseconds / 1000) + Int(nanoseconds / 1_000_000_000),
            tv_nsec: Int(nanoseconds % 1_000_000_000))
    }
}

/// Threads the worker starts for requests: joinable, with a stack of a fixed size, because the
/// address-space limit counts every thread's stack.
enum WorkerThread {
    static let stackBytes = 2 << 20

    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Starts `body` on a new thread; nil when the thread could not be created (the limit on
    /// threads, or memory).
    static func start(_ body: @escaping () -> Void) -> pthread_t? {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, stackBytes)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let result = pthread_create(
            &thread, &attributes,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return nil
        }
        return thread
    }

    static func join(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }
}
