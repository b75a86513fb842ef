import Synchronization

/// Typed calls of one plugin's declared functions in a worker that a crash does not end the
/// session with: the counterpart of Sandboxed API's `Transaction`, for decoders of hostile input.
///
/// A session launches its worker lazily, at the first call (or `start()`), runs the set-up calls
/// (`Options.setUp`) on it in order, then the host's calls. When the worker ends during a call
/// (a crash, a resource limit, the library breaking the declaration), that call throws one
/// `AppExtensionError` that names the function and keeps the cause (`termination`,
/// `exceededLimit`, the backtrace); the session forgets the worker, and its next call launches a
/// new one and replays the set-up calls first. `Options.freshWorkerEvery` recycles the worker
/// after so many calls, so that state a library leaks or corrupts does not outlive them.
///
/// What it does not promise: a call the crash interrupted is lost, not retried (it may be the
/// input that crashed the library); set-up calls run again on every new worker, so their side
/// effects (a file written, a counter in a shared place) happen again; and crashes still count
/// toward the host's quarantine (`AppExtensionHost.quarantine`): a plugin quarantined meanwhile
/// fails the next launch with `quarantined`.
///
/// Handles live in the worker that gave them out. `setUpResults` returns what the set-up calls
/// returned on the current worker (launching one and replaying set-up when none runs); a call
/// that passes a handle of an earlier worker of the session is refused (`invalidArguments`, naming
/// the function and the argument) before anything is sent. Set-up calls take values, not
/// handles, since a handle from one worker means nothing to the next.
///
/// Calls are serialized: each waits until the calls that reached the session before it have
/// finished, and they run in that order, one at a time, so a set-up replay never interleaves with
/// a call. Call it from as many tasks as you like; for calls in parallel, use several sessions.
///
/// Each worker is the session's own (`Sharing.dedicated`): recycling one or a crash in one
/// touches no other process of the host.
public final class AppExtensionFunctionSession: Sendable {
    /// A call the session makes on every new worker before the host's next call.
    public struct SetUpCall: Sendable, Hashable, CustomStringConvertible {
        /// The declared function.
        public var function: String
        /// Its inputs, as for `AppExtensionConnection.callWithOutputs`; values, never handles.
        public var arguments: [FunctionValue]

        public init(_ function: String, arguments: [FunctionValue] = []) {
            self.function = function
            self.arguments = arguments
        }

        public var description: String { function }
    }

    /// How the session treats its workers.
    public struct Options: Sendable, Hashable {
        /// Recycle the worker after this many of the host's calls (set-up calls do not count),
        /// whatever they returned; nil keeps a worker until it ends. At least 1.
        public var freshWorkerEvery: Int?
        /// Run, in order, on every new worker before the host's next call. A set-up call fails
        /// when it throws, or when its value or an output is a NULL handle (it made no object);
        /// then the host's call that needed the worker fails with that reason, and the next call
        /// tries a new worker again.
        public var setUp: [SetUpCall]

        public init(freshWorkerEvery: Int? = nil, setUp: [SetUpCall] = []) {
            self.freshWorkerEvery = freshWorkerEvery
            self.setUp = setUp
        }
    }

    /// What `processConfiguration` launches; `sharing` is always `.dedicated`.
    public let configuration: AppExtensionProcess.Configuration

    private struct Worker {
        let process: AppExtensionProcess
        let connection: AppExtensionConnection
        /// One per set-up call run on it so far, in order.
        var setUpResults: [FunctionResult] = []
        /// The host's calls made on it.
        var calls = 0

        var handleOwner: ObjectIdentifier { process.handles.worker }
        var hasEnded: Bool { process.channel.isTerminated || process.channel.isInvalidated }
    }

    private struct State {
        var options: Options
        var worker: Worker?
        /// The handle tables of the session's earlier workers, to tell their handles from a
        /// foreign process's. A handle keeps its worker's channel alive, so an identifier in
        /// here cannot name a later channel while a handle that names it exists.
        var earlierWorkers: Set<ObjectIdentifier> = []
        /// Earlier workers not yet seen exit, for `invalidateAndWait()`.
        var ending: [AppExtensionProcess] = []
        var workersStarted = 0
        var functions: [FunctionSignature] = []
        var invalidated = false
        /// Whether a call has its turn, and the calls waiting for theirs, in arrival order.
        var busy = false
        var waiting: [(ticket: UInt64, turn: CheckedContinuation<Void, any Error>)] = []
        var nextTicket: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A session for the plugin of `configuration`, launched at its first call.
    public init(configuration: AppExtensionProcess.Configuration, options: Options = Options()) {
        var configuration = configuration
        configuration.sharing = .dedicated
        self.configuration = configuration
        self.state = Mutex(State(options: options))
    }

    /// A session for `identity`, with the host of the monitor that found it.
    public convenience init(identity: AppExtensionIdentity, options: Options = Options()) {
        self.init(configuration: AppExtensionProcess.Configuration(appExtensionIdentity: identity), options: options)
    }

    deinit {
        invalidate()
    }

    /// The options as they are now, with the set-up calls added since.
    public var options: Options { state.withLock { $0.options } }

    /// Adds a set-up call after the others: it runs on every new worker, and on the running
    /// one before the next call.
    public func addSetUpCall(_ call: SetUpCall) {
        state.withLock { $0.options.setUp.append(call) }
    }

    /// The current worker's process identifier; nil when none runs (before the first call, after
    /// a crash until the next one).
    public var processIdentifier: Int32? {
        state.withLock { $0.worker?.process.processIdentifier }
    }

    /// How many workers the session has launched so far, those whose set-up failed included.
    public var workersStarted: Int { state.withLock { $0.workersStarted } }

    /// The functions the manifest declares, as the last worker loaded them; empty before the
    /// first launch.
    public var functions: [FunctionSignature] { state.withLock { $0.functions } }

    /// The handle table of the current worker (`FunctionHandle.worker`); nil when none runs.
    package var currentHandleOwner: ObjectIdentifier? { state.withLock { $0.worker?.handleOwner } }

    /// Launches a worker and runs the set-up calls, unless one runs with its set-up done: to pay
    /// for the launch before the first call, or to learn early that it fails.
    ///
    /// - Throws: the errors of `AppExtensionProcess.init(configuration:)`; a set-up call's error.
    public func start() async throws {
        try await withTurn { _ = try await self.readyWorker() }
    }

    /// What each set-up call returned on the current worker, in order, launching one and
    /// replaying the set-up calls when none runs. The handles in it are valid until the worker
    /// ends: read them again after a call failed with the worker's end.
    ///
    /// - Throws: as `start()`.
    public var setUpResults: [FunctionResult] {
        get async throws {
            try await withTurn { try await self.readyWorker().setUpResults }
        }
    }

    /// `AppExtensionConnection.call` on the session's worker.
    ///
    /// - Throws: `AppExtensionError`: the errors of `callWithOutputs`.
    public func call(
        _ function: String, arguments: [FunctionValue] = [], callbacks: [String: FunctionCallbackHandler] = [:], timeout: Duration? = nil
    ) async throws -> FunctionValue {
        try await callWithOutputs(function, arguments: arguments, callbacks: callbacks, timeout: timeout).value
    }

    /// The session whose callback handler the current task runs: a call of it from there would
    /// wait for the call that runs the handler.
    @TaskLocal private static var handling: ObjectIdentifier?

    /// `AppExtensionConnection.callWithOutputs` on the session's worker, launched first (and set
    /// up) when none runs.
    ///
    /// - Throws: `AppExtensionError`: the errors of `AppExtensionConnection.callWithOutputs`,
    ///   those that end the worker (`workerCrashed`, `workerKilled`, `workerExited`,
    ///   `limitExceeded` with a termination, `protocolViolation`) with a reason that starts with
    ///   the function's name; `invalidArguments` for a handle of an earlier worker; the launch's
    ///   errors and a set-up call's error (its reason names the set-up call) when a new worker was
    ///   needed; `invalidated` after `invalidate()`; `invalidArguments` for a call of the session
    ///   from one of its own callback handlers (the session's calls run one at a time, so it
    ///   would wait for itself).
    public func callWithOutputs(
        _ function: String, arguments: [FunctionValue] = [], callbacks: [String: FunctionCallbackHandler] = [:],
        timeout: Duration? = nil
    ) async throws -> FunctionResult {
        let identifier = ObjectIdentifier(self)
        if Self.handling == identifier {
            throw AppExtensionError(
                .invalidArguments, plugin: configuration.appExtensionIdentity.bundleIdentifier,
                "\(function) was called from a callback handler of the same function session, whose calls run one at a time: it would wait for itself"
            )
        }
        let marked = callbacks.mapValues { handler -> FunctionCallbackHandler in
            { arguments in try await Self.$handling.withValue(identifier) { try await handler(arguments) } }
        }
        return try await withTurn {
            let worker = try await self.readyWorker()
            try self.refuseForeignHandles(function, arguments, worker: worker)
            do {
                let result = try await worker.connection.callWithOutputs(
                    function, arguments: arguments, callbacks: marked, timeout: timeout)
                self.counted(worker)
                return result
            } catch let error as AppExtensionError {
                self.counted(worker)
                guard error.termination != nil || worker.hasEnded else { throw error }
                self.retire(worker)
                throw error.naming("\(function) ended its worker", next: "the session's next call starts a new one")
            }
        }
    }

    /// Ends the current worker; calls waiting or made later fail with `invalidated`.
    /// Idempotent.
    public func invalidate() {
        let (worker, waiting) = state.withLock { state in
            state.invalidated = true
            defer {
                state.worker = nil
                state.waiting = []
            }
            return (state.worker, state.waiting)
        }
        for waiter in waiting { waiter.turn.resume(throwing: invalidatedError) }
        worker?.process.invalidate()
    }

    /// `invalidate()`, then waits until every worker of the session has exited.
    public func invalidateAndWait() async {
        let worker = state.withLock { $0.worker }
        invalidate()
        await worker?.process.invalidateAndWait()
        for process in state.withLock({ $0.ending }) { await process.invalidateAndWait() }
        state.withLock { $0.ending = [] }
    }

    private var invalidatedError: AppExtensionError {
        AppExtensionError(
            .invalidated, plugin: configuration.appExtensionIdentity.bundleIdentifier, "this function session was invalidated")
    }

    // MARK: Turns

    /// Runs `body` when every call that reached the session before has finished.
    private func withTurn<Value>(_ body: () async throws -> Value) async throws -> Value {
        try await takeTurn()
        defer { endTurn() }
        if state.withLock({ $0.invalidated }) { throw invalidatedError }
        return try await body()
    }

    private func takeTurn() async throws {
        let ticket = state.withLock { state -> UInt64 in
            defer { state.nextTicket += 1 }
            return state.nextTicket
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (turn: CheckedContinuation<Void, any Error>) in
                let now = state.withLock { state -> Result<Bool, AppExtensionError> in
                    if state.invalidated { return .failure(invalidatedError) }
                    guard state.busy else {
                        state.busy = true
                        return .success(true)
                    }
                    state.waiting.append((ticket, turn))
                    return .success(false)
                }
                switch now {
                case .success(true): turn.resume()
                case .success(false): break
                case .failure(let error): turn.resume(throwing: error)
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                return state.waiting.remove(at: index).turn
            }
            waiter?.resume(
                throwing: AppExtensionError(
                    .cancelled, plugin: configuration.appExtensionIdentity.bundleIdentifier,
                    "the call was cancelled while it waited for the session's earlier calls"))
        }
    }

    /// Hands the turn to the next call waiting, in arrival order.
    private func endTurn() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst().turn
        }
        next?.resume()
    }

    // MARK: Workers (only with the turn)

    /// The running worker with every set-up call done: launched, recycled or set up as needed.
    private func readyWorker() async throws -> Worker {
        let (current, options) = state.withLock { ($0.worker, $0.options) }
        var worker: Worker
        if let current, !current.hasEnded, current.calls < max(1, options.freshWorkerEvery ?? .max) {
            worker = current
        } else {
            if let current { retire(current) }
            worker = try await launch()
        }
        while worker.setUpResults.count < options.setUp.count {
            let index = worker.setUpResults.count
            do {
                worker.setUpResults.append(try await setUp(options.setUp[index], index: index, of: options.setUp.count, on: worker))
            } catch {
                retire(worker)
                throw error
            }
            let kept = worker
            state.withLock { $0.worker = kept }
        }
        return worker
    }

    private func launch() async throws -> Worker {
        state.withLock { $0.workersStarted += 1 }
        let process = try await AppExtensionProcess(configuration: configuration)
        do {
            let worker = Worker(process: process, connection: try await process.makeConnection())
            let kept = state.withLock { state -> Bool in
                guard !state.invalidated else { return false }
                state.worker = worker
                state.functions = process.functions
                return true
            }
            guard kept else { throw invalidatedError }
            return worker
        } catch {
            process.invalidate()
            throw error
        }
    }

    /// Runs set-up call `index` on `worker`; its result, or why it failed.
    private func setUp(_ call: SetUpCall, index: Int, of count: Int, on worker: Worker) async throws -> FunctionResult {
        let name = "set-up call \(index + 1) of \(count) (\(call.function))"
        let plugin = worker.process.plan.pluginIdentifier
        if let position = call.arguments.firstIndex(where: { if case .handle = $0 { true } else { false } }) {
            throw AppExtensionError(
                .invalidArguments, plugin: plugin,
                "\(name) takes a handle as argument \(position + 1); set-up calls take values only, since a handle lives in one worker")
        }
        let result: FunctionResult
        do {
            result = try await worker.connection.callWithOutputs(call.function, arguments: call.arguments)
        } catch let error as AppExtensionError {
            throw error.naming("\(name) failed", next: "the session's next call tries a new worker")
        }
        let values = [("its value", result.value)] + result.outputs.map { ("output \($0.name)", $0.value) }
        for (what, value) in values {
            guard case .handle(let handle) = value, handle.isNull else { continue }
            throw AppExtensionError(
                .pluginError, plugin: plugin,
                "\(name) failed: \(what) is \(handle), so it made no object; the session's next call tries a new worker")
        }
        return result
    }

    /// Counts a call made on `worker`.
    private func counted(_ worker: Worker) {
        state.withLock { state in
            guard state.worker?.process === worker.process else { return }
            state.worker?.calls += 1
        }
    }

    /// Ends `worker` (when it has not ended) and forgets it: the next call launches another.
    private func retire(_ worker: Worker) {
        state.withLock { state in
            if state.worker?.process === worker.process { state.worker = nil }
            state.earlierWorkers.insert(worker.handleOwner)
            state.ending.removeAll { $0.channel.isTerminated }
            state.ending.append(worker.process)
        }
        worker.process.invalidate()
    }

    /// Refuses a handle of an earlier worker of the session (or of another process), naming the
    /// function and the argument, before anything is sent.
    private func refuseForeignHandles(_ function: String, _ arguments: [FunctionValue], worker: Worker) throws {
        for (position, value) in arguments.enumerated() {
            guard case .handle(let handle) = value, let owner = handle.worker, owner != worker.handleOwner else { continue }
            let earlier = state.withLock { $0.earlierWorkers.contains(owner) }
            let whose =
                earlier
                ? "an earlier worker of this session gave out (read setUpResults again for the current worker's)"
                : "another process's worker gave out"
            throw AppExtensionError(
                .invalidArguments, plugin: worker.process.plan.pluginIdentifier,
                "argument \(position + 1) of \(function) is handle \(handle), which \(whose)")
        }
    }
}

extension AppExtensionError {
    /// The same error, its reason prefixed with `context` and followed by `next`.
    fileprivate func naming(_ context: String, next: String) -> AppExtensionError {
        var named = AppExtensionError(
            code, plugin: pluginIdentifier, "\(context): \(reason); \(next)", termination: termination, exceededLimit: exceededLimit,
            pluginErrorCode: pluginErrorCode, standardErrorTail: standardErrorTail, underlying: underlying)
        named.backtrace = backtrace
        named.unsymbolizedStack = unsymbolizedStack
        return named
    }
}
