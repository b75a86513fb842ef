import CPlugindShims
import Glibc

/// A moment on CLOCK_MONOTONIC that `ThreadCondition.wait(until:)` waits for.
package struct ThreadDeadline: Sendable {
    fileprivate var time: timespec
}

/// A lock with a condition variable, for threads of the system's own: the worker's request threads
/// wait on it for work, a thread that asked the host waits on it for the answer, libplugind's
/// callback gate waits on it for callbacks to return. POSIX directly, because waiting with a
/// deadline is the point (and the host library does without Foundation's `NSCondition`).
package final class ThreadCondition: @unchecked Sendable {
    // @unchecked: the pthread objects are used only through the calls below, which are the
    // synchronisation themselves.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
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

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }

    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits, with the lock held, until woken.
    package func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Waits, with the lock held, until woken or `deadline` (CLOCK_MONOTONIC) passed. False when
    /// the deadline passed.
    package func wait(until deadline: ThreadDeadline) -> Bool {
        var time = deadline.time
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }

    package func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// Wakes one waiting thread, whichever: for a turn that any waiter takes when woken.
    package func signal() {
        pthread_cond_signal(condition)
    }

    /// Milliseconds from now until `deadline` (CLOCK_MONOTONIC); 0 or less when it passed.
    package static func milliseconds(until deadline: ThreadDeadline) -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(deadline.time.tv_sec - now.tv_sec) * 1000 + Int64(deadline.time.tv_nsec - now.tv_nsec) / 1_000_000
    }

    /// CLOCK_MONOTONIC `milliseconds` from now.
    package static func deadline(afterMilliseconds milliseconds: UInt64) -> ThreadDeadline {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = UInt64(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        return ThreadDeadline(
            time: timespec(
                tv_sec: now.tv_sec + Int(milliseconds / 1000) + Int(nanoseconds / 1_000_000_000),
                tv_nsec: Int(nanoseconds % 1_000_000_000)))
    }
}
