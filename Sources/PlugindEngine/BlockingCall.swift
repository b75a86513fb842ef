import Dispatch
import PlugindSystem

/// Runs async host API work for a caller that waits for it on its own thread: libplugind's C
/// callers, and the synchronous `AppExtensionProcess.init(configuration:)`. The caller's thread
/// must be outside Swift's concurrency pool, since it blocks on a semaphore while a task does the
/// work; from a pool thread it would hold a thread the work may need (libplugind's header and the
/// initializer's documentation say so).
package enum BlockingCall {
    package static func run<Value: Sendable>(_ work: @escaping @Sendable () async throws -> Value) -> Result<Value, any Error> {
        wait { finish in
            Task {
                do {
                    finish(.success(try await work()))
                } catch {
                    finish(.failure(error))
                }
            }
        }
    }

    /// Starts work that reports through a callback and waits for it: no task in between, so
    /// the thread that learns the result (plugind's event loop, for a reply) wakes this one
    /// directly. `start` must call its argument exactly once.
    package static func wait<Value: Sendable>(
        _ start: (@escaping @Sendable (Result<Value, any Error>) -> Void) -> Void
    ) -> Result<Value, any Error> {
        let outcome = Locked<Result<Value, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        start { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 } ?? .failure(BlockingCall.Unfinished())
    }

    /// A call whose work ended without reporting (a broken `start`): never expected.
    package struct Unfinished: Error, CustomStringConvertible {
        package var description: String { "the call ended without a result" }
    }
}
