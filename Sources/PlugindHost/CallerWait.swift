import Glibc
import PlugindEngine
import PlugindSystem

/// A blocking typed call of the C API, waited for on the caller's thread, which runs the C
/// handlers of the call's callbacks while it waits (`plugind_process_call_callbacks`).
///
/// A callback's handler must answer before the library goes on, and may itself call the same
/// process (a comparator that asks the library for a value). Run on plugind's threads like an
/// ask handler, it could do neither safely: a handler blocked in a nested call would hold a pool
/// thread the call needs, and a call started from a thread outside any task does not know it is
/// nested, so the worker would queue it behind the very call that waits for the handler. Run on
/// the caller's thread, which waits anyway and is the host's own, a handler may block; and a call
/// it makes is started by the handler's task (`CallbackFrame`), inside whose context the channel
/// sends it nested in the callback.
final class CallerWait: @unchecked Sendable {
    /// Work for the caller's thread: run there while the call waits, or refused once it ended.
    struct Job: Sendable {
        let run: @Sendable () -> Void
        let refuse: @Sendable () -> Void
    }

    // Every field below is read and written only with `condition` locked.
    private let condition = ThreadCondition()
    private var jobs: [Job] = []
    private var finished = false
    private var ended = false

    /// Runs `work` and waits for it on the calling thread, running the jobs its callbacks post
    /// meanwhile. Inside a callback's handler the work is started by that handler's task, so that
    /// a call of the same process is nested in the callback; elsewhere by a task of its own.
    static func run<Value: Sendable>(_ work: @escaping @Sendable (CallerWait) async throws -> Value) -> Result<Value, any Error> {
        let wait = CallerWait()
        let outcome = Locked<Result<Value, any Error>?>(nil)
        let body: @Sendable () async -> Void = {
            let result: Result<Value, any Error>
            do {
                result = .success(try await work(wait))
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            wait.finish()
        }
        if !(CallbackFrame.current?.spawn(body) ?? false) {
            Task { await body() }
        }
        wait.serve()
        return outcome.withLock { $0 } ?? .failure(Unfinished())
    }

    /// A wait that ended without the work's result: never expected (`serve` returns only once
    /// the work stored it).
    private struct Unfinished: Error, CustomStringConvertible {
        var description: String { "the call ended without a result" }
    }

    /// Hands `job` to the caller's thread; refuses it at once when the call has ended.
    func post(_ job: Job) {
        condition.lock()
        guard !ended else {
            condition.unlock()
            job.refuse()
            return
        }
        jobs.append(job)
        condition.broadcast()
        condition.unlock()
    }

    private func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// Runs the posted jobs, in order, until the work finished; refuses those it left behind (a
    /// callback the library called as the call timed out).
    private func serve() {
        condition.lock()
        while !finished {
            guard !jobs.isEmpty else {
                condition.wait()
                continue
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.run()
            condition.lock()
        }
        ended = true
        let left = jobs
        jobs = []
        condition.unlock()
        for job in left { job.refuse() }
    }
}

/// A callback's handler running on the caller's thread, and the task that waits for it: calls
/// the handler makes (on that thread) are started here as children of that task, which carry its
/// context: the channel sees them as made inside the callback and nests them.
final class CallbackFrame: Sendable {
    typealias Work = @Sendable () async -> Void

    private struct State {
        var work: [Work] = []
        var waiter: CheckedContinuation<Work?, Never>?
        var finished = false
    }

    private let state = Locked(State())

    /// The frames each thread is inside now, innermost last (a handler's nested call may have
    /// callbacks of its own).
    private static let frames = Locked<[UInt: [CallbackFrame]]>([:])

    /// The innermost frame of the calling thread.
    static var current: CallbackFrame? {
        let thread = UInt(pthread_self())
        return frames.withLock { $0[thread]?.last }
    }

    /// Runs `body` (the handler, on the caller's thread) inside this frame.
    func enter<Value>(_ body: () -> Value) -> Value {
        let thread = UInt(pthread_self())
        Self.frames.withLock { $0[thread, default: []].append(self) }
        defer {
            Self.frames.withLock { frames in
                frames[thread]?.removeLast()
                if frames[thread]?.isEmpty == true { frames[thread] = nil }
            }
        }
        return body()
    }

    /// Has the waiting task start `work`; false once the handler returned.
    func spawn(_ work: @escaping Work) -> Bool {
        enum Taken {
            case refused, queued
            case handed(CheckedContinuation<Work?, Never>)
        }
        let taken = state.withLock { state -> Taken in
            guard !state.finished else { return .refused }
            guard let waiter = state.waiter else {
                state.work.append(work)
                return .queued
            }
            state.waiter = nil
            return .handed(waiter)
        }
        switch taken {
        case .refused: return false
        case .queued: return true
        case .handed(let waiter):
            waiter.resume(returning: work)
            return true
        }
    }

    /// The handler returned (or was refused): `serve` returns once the work it started ended.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Work?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// In the handler's task: starts each call the handler makes, as a child task, until the
    /// handler returned. Not cancellable: the handler runs on a thread of its own, and finishes
    /// whatever happens to the task; a cancelled task's children fail at once.
    func serve() async {
        await withTaskGroup(of: Void.self) { group in
            while let work = await next() {
                group.addTask { await work() }
            }
        }
    }

    private func next() async -> Work? {
        await withCheckedContinuation { continuation in
            enum Ready {
                case work(Work)
                case finished
                case waiting
            }
            let ready = state.withLock { state -> Ready in
                if !state.work.isEmpty { return .work(state.work.removeFirst()) }
                if state.finished { return .finished }
                state.waiter = continuation
                return .waiting
            }
            switch ready {
            case .work(let work): continuation.resume(returning: work)
            case .finished: continuation.resume(returning: nil)
            case .waiting: break
            }
        }
    }
}
