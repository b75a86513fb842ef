package import CPlugindShims
import Glibc

/// A thread of the system's own, for the code that runs without Foundation's `Thread`: joinable,
/// with a stack of a fixed size (the address-space limit of a worker counts every stack).
package enum SystemThread {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Starts `body` on a new thread; the error of `pthread_create` when it cannot be made (the
    /// limit on threads, or memory).
    package static func start(stackBytes: Int, _ body: @escaping () -> Void) throws(SystemError) -> pthread_t {
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
            throw SystemError("pthread_create", Errno(rawValue: result))
        }
        return thread
    }

    package static func join(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }

    /// Sleeps for `duration`, resuming after a signal until it has passed.
    package static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(max(seconds, 0)), tv_nsec: Int(max(attoseconds, 0) / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }
}
