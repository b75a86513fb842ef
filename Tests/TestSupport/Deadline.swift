import Dispatch
import Foundation
import PlugindSystem

/// Waits for an asynchronous event with a deadline as a backstop: the operation normally wins;
/// if the deadline passes first, the wait fails with `Expired` instead of hanging the suite. The
/// default is generous because it is only a backstop: on a 2-core machine running every suite at
/// once, an event that takes milliseconds alone has been seen to take over 20 seconds.
package enum Deadline {
    package struct Expired: Error, CustomStringConvertible {
        package var what: String

        package init(what: String) {
            self.what = what
        }

        package var description: String { "timed out waiting for \(what)" }
    }

    package static func wait<Value: Sendable>(
        _ what: String,
        seconds: Double = 60,
        _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let race = Race<Value>()
        return try await withCheckedThrowingContinuation { continuation in
            race.start(continuation)
            let work = Task {
                do {
                    race.finish(.success(try await operation()))
                } catch {
                    race.finish(.failure(error))
                }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                race.finish(.failure(Expired(what: what)))
                work.cancel()
            }
        }
    }

    /// Whoever finishes first resumes the continuation; later results are dropped.
    private final class Race<Value: Sendable>: Sendable {
        private let continuation = Locked<CheckedContinuation<Value, any Error>?>(nil)

        func start(_ continuation: CheckedContinuation<Value, any Error>) {
            self.continuation.withLock { $0 = continuation }
        }

        func finish(_ result: Result<Value, any Error>) {
            continuation.withLock { stored in
                stored?.resume(with: result)
                stored = nil
            }
        }
    }

    /// Returns once child `pid` has been reaped (it no longer exists, not even as a zombie), or
    /// the deadline passes; returns whether it was. Polls /proc, pausing between looks: a reap
    /// is no event a test can wait on.
    package static func reaped(_ pid: Int32, seconds: Double = 60) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .milliseconds(Int(seconds * 1000))
        while ProcessInspection.exists(pid) {
            guard clock.now < end else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Blocks (off the cooperative pool) until process `pid` has exited, or the deadline passes.
    /// Returns whether it exited. Waits on a pidfd, so it works for processes that are not
    /// children of the test.
    package static func processExit(_ pid: Int32, seconds: Double = 60) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: ProcessInspection.waitForExit(pid, milliseconds: Int32(seconds * 1000)))
            }.start()
        }
    }
}
