#if PLUGIND_THREAD_SANITIZER
    import Glibc
#else
    import Synchronization
#endif

/// A value behind a lock: what plugind uses for every piece of shared mutable state. Normally
/// Synchronization's `Mutex`. Built with `-DPLUGIND_THREAD_SANITIZER` (for `swift test
/// --sanitize=thread`), a pthread mutex instead: ThreadSanitizer does not see the futexes `Mutex`
/// is made of on Linux, and would report every access it protects as a race. The value may be
/// non-copyable (the launch pool's spares are).
#if PLUGIND_THREAD_SANITIZER
    // @unchecked: every access to `value` holds `mutex`. The value lives behind a pointer, which
    // the exclusivity checks leave to the sanitizer (they know nothing of the mutex).
    package final class Locked<Value: ~Copyable>: @unchecked Sendable {
        private let value: UnsafeMutablePointer<Value>
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>

        package init(_ value: consuming sending Value) {
            self.value = .allocate(capacity: 1)
            self.value.initialize(to: value)
            mutex = .allocate(capacity: 1)
            pthread_mutex_init(mutex, nil)
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            value.deinitialize(count: 1)
            value.deallocate()
        }

        package func withLock<Result: ~Copyable, Failure: Error>(_ body: (inout sending Value) throws(Failure) -> sending Result)
            throws(Failure)
            -> sending Result
        {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }

        /// Runs `body` under the lock if nobody holds it (this thread included); nil otherwise.
        package func withLockIfAvailable<Result: ~Copyable, Failure: Error>(
            _ body: (inout sending Value) throws(Failure) -> sending Result
        ) throws(Failure) -> sending Result? {
            guard pthread_mutex_trylock(mutex) == 0 else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
#else
    // @unchecked: every access to `value` holds `mutex`. Why not a `Mutex<Value>`: `withLock` is
    // called from other modules, where the optimizer does not specialize it (`@inlinable` did not
    // change that), and unspecialized code finds the value inside a `Mutex<Value>` through that
    // type's metadata, looked up in the runtime's cache on every call. A lock of its own and the
    // value behind a pointer need no metadata at all.
    package final class Locked<Value: ~Copyable>: @unchecked Sendable {
        private let value: UnsafeMutablePointer<Value>
        private let mutex = Mutex(())

        package init(_ value: consuming sending Value) {
            self.value = .allocate(capacity: 1)
            self.value.initialize(to: value)
        }

        deinit {
            value.deinitialize(count: 1)
            value.deallocate()
        }

        package func withLock<Result: ~Copyable, Failure: Error>(_ body: (inout sending Value) throws(Failure) -> sending Result)
            throws(Failure)
            -> sending Result
        {
            try mutex.withLock { _ throws(Failure) -> sending Result in try body(&value.pointee) }
        }

        /// Runs `body` under the lock if nobody holds it (this thread included); nil otherwise.
        package func withLockIfAvailable<Result: ~Copyable, Failure: Error>(
            _ body: (inout sending Value) throws(Failure) -> sending Result
        ) throws(Failure) -> sending Result? {
            try mutex.withLockIfAvailable { _ throws(Failure) -> sending Result in try body(&value.pointee) }
        }
    }
#endif
