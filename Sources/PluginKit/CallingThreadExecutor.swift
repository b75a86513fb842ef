import Glibc
import Synchronization

/// Runs an async request handler on the worker thread that called `handle`, which waits for it
/// anyway: the handler's task prefers this executor, so its jobs — the first and every one after
/// an `await` — run here, with no hop to the cooperative pool and back for each request. The
/// thread sleeps only while the handler waits for something (a timer, another task).
final class CallingThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `finished` are guarded by `mutex`.
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var jobs: [UnownedJob] = []
    private var finished = false

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        pthread_mutex_lock(&mutex)
        jobs.append(unowned)
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    /// Runs `operation` to its end on the calling thread and returns what it returned.
    static func run<Result: Sendable>(_ operation: @escaping @Sendable () async throws -> Result) throws -> Result {
        let executor = CallingThreadExecutor()
        let outcome = OutcomeSlot<Result>()
        Task(executorPreference: executor) {
            do {
                outcome.set(.success(try await operation()))
            } catch {
                outcome.set(.failure(error))
            }
            executor.finish()
        }
        executor.runUntilFinished()
        guard let result = outcome.take() else { throw PluginError("the request ended without an answer") }
        return try result.get()
    }

    private func finish() {
        pthread_mutex_lock(&mutex)
        finished = true
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    /// Runs the jobs enqueued here, waiting for the next, until the operation has finished.
    private func runUntilFinished() {
        pthread_mutex_lock(&mutex)
        while true {
            if !jobs.isEmpty {
                let job = jobs.removeFirst()
                pthread_mutex_unlock(&mutex)
                job.runSynchronously(on: asUnownedTaskExecutor())
                pthread_mutex_lock(&mutex)
                continue
            }
            if finished { break }
            pthread_cond_wait(&condition, &mutex)
        }
        pthread_mutex_unlock(&mutex)
    }
}

/// Where the handler's task leaves its result for the waiting thread.
private final class OutcomeSlot<Value: Sendable>: Sendable {
    private let value = Mutex<Result<Value, any Error>?>(nil)

    func set(_ result: Result<Value, any Error>) {
        value.withLock { $0 = result }
    }

    func take() -> Result<Value, any Error>? {
        value.withLock { $0 }
    }
}
