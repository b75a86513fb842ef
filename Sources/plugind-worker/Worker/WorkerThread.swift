import Glibc
import PlugindSystem

/// Threads the worker starts for requests: joinable, with a stack of a fixed size, because the
/// address-space limit counts every thread's stack.
enum WorkerThread {
    static let stackBytes = 2 << 20

    /// Starts `body` on a new thread; nil when the thread could not be created (the limit on
    /// threads, or memory).
    static func start(_ body: @escaping () -> Void) -> pthread_t? {
        try? SystemThread.start(stackBytes: stackBytes, body)
    }

    static func join(_ thread: pthread_t) {
        SystemThread.join(thread)
    }
}
