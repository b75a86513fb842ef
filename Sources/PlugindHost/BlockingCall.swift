import Dispatch
import PlugindSystem

/// Runs async host API work for a C caller that waits for it: the caller's thread is the host's
/// own, outside Swift's concurrency pool, so it may block on a semaphore while a task does the
/// work. (Called from a plugind callback, which runs on the pool, it would hold a thread the work
/// may need: the header forbids that.)
enum BlockingCall {
    static func run<Value: Sendable>(_ work: @escaping @Sendable () async throws -> Value) -> Result<Value, any Error> {
        let outcome = Locked<Result<Value, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await work())
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 } ?? .failure(HostError.invalidArgument("the call ended without a result"))
    }

    /// Starts work that reports through a callback and waits for it: no task in between, so
    /// the thread that learns the result (plugind's event loop, for a reply) wakes this one
    /// directly. `start` must call its argument exactly once.
    static func wait<Value: Sendable>(
        _ start: (@escaping @Sendable (Result<Value, any Error>) -> Void) -> Void
    ) -> Result<Value, any Error> {
        let outcome = Locked<Result<Value, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        start { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 } ?? .failure(HostError.invalidArgument("the call ended without a result"))
    }
}

/// A C function pointer and its context, called from plugind's threads. The header makes the
/// host responsible for what the callback touches from another thread, so the pair crosses
/// concurrency domains as it is.
struct CallbackContext: @unchecked Sendable {
    let context: UnsafeMutableRawPointer?
}
