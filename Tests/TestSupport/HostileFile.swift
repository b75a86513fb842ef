import Dispatch
import Foundation
import Glibc
import PlugindSystem

/// What a hostile writer puts where a reader expects a small regular file (a FIFO, a file larger
/// than the reader takes), and a way to call a reader that fails, instead of hanging the suite,
/// when it waits on one.
package enum HostileFile {
    /// Makes a FIFO at `path`: a reader that opens it without `O_NONBLOCK` waits for a writer
    /// forever.
    package static func makeFIFO(at path: String) throws {
        guard mkfifo(path, 0o600) == 0 else { throw SystemError("mkfifo \(path)", .current) }
    }

    /// Makes a sparse regular file of `size` bytes of zeros at `path`: nothing on disk, but a
    /// reader that reads it whole reads every byte.
    package static func makeSparse(at path: String, size: Int) throws {
        let descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL, permissions: 0o600)
        defer { descriptor.close() }
        guard ftruncate(descriptor.rawValue, off_t(size)) == 0 else { throw SystemError("ftruncate \(path)", .current) }
    }

    /// Runs `read` on a thread of its own (never the cooperative pool, which a blocked read would
    /// starve) and returns what it returns. The reader is expected to return at once; `seconds`
    /// is only a backstop. When it passes first, `Deadline.Expired` is thrown and then each FIFO
    /// of `fifos` is opened for writing and closed, which wakes a reader blocked opening or
    /// reading it, so that a regression fails the test and leaves no thread behind.
    package static func readPromptly<Value: Sendable>(
        _ what: String,
        seconds: Double = 60,
        unblocking fifos: [String] = [],
        _ read: @escaping @Sendable () -> Value
    ) async throws -> Value {
        let outcome = Outcome<Value>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.start(continuation)
            Thread { outcome.finish(.success(read())) }.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                guard outcome.finish(.failure(Deadline.Expired(what: what))) else { return }
                for fifo in fifos {
                    let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                    if writer >= 0 { close(writer) }
                }
            }
        }
    }

    /// Whoever finishes first resumes the continuation; later results are dropped.
    private final class Outcome<Value: Sendable>: Sendable {
        private let continuation = Locked<CheckedContinuation<Value, any Error>?>(nil)

        func start(_ continuation: CheckedContinuation<Value, any Error>) {
            self.continuation.withLock { $0 = continuation }
        }

        /// Whether this result was the first.
        @discardableResult
        func finish(_ result: Result<Value, any Error>) -> Bool {
            continuation.withLock { stored in
                guard let waiting = stored else { return false }
                waiting.resume(with: result)
                stored = nil
                return true
            }
        }
    }
}
