import PlugindSystem
package import PlugindWire

/// What the worker answered to a request or a typed call.
package enum WorkerReply: Sendable, Equatable {
    case bytes([UInt8])
    case value(FunctionCallReply)
}

/// The host's side of the conversation with one worker, as a state machine with no system calls:
/// the handshake, requests and their deadlines, cancellation, connections, the plugin's asks and
/// the end. Each input returns the effects to carry out, in order; `WorkerChannel` carries them
/// out (writes, resumes) after releasing its lock. Tests drive it directly, over an in-memory
/// transport.
///
/// It owns the worker's life (`Lifecycle`: launching, ready, ending, reaped, ended) and what the
/// worker reported of its end (a load failure, a fatal signal and its stack), which
/// `WorkerChannel` reads, and decides how a worker is ended: a list of `TeardownStep`s
/// (`Effect.tearDown`) that the channel carries out.
///
/// Deadlines are data: every timer the conversation needs is an entry of `deadlines`, armed at
/// the time the input that arms it is given (each such input takes `now`, so that no deadline is
/// reckoned from a stale clock) plus its duration. `nextDeadline` is the earliest;
/// `expire(now:)` fires those due. One channel needs one timer.
///
/// Longer than a file should be: its inputs share private bookkeeping (requests, abandoned
/// requests, connections, asks and their budget) that files of their own would have to expose
/// to the whole module.
///
/// Its inputs and effects are `package` for the fuzz target that drives it as `WorkerChannel`
/// does (`PlugindHostFuzzing`, which no shipped library links).
package struct ChannelProtocol {
    /// The machine's timers; `expire(now:)` fires those whose deadline passed.
    enum Timer: Hashable {
        /// The time the worker has to answer the handshake (`launchTimeout`).
        case launch
        /// A teardown's `wait`: the time the worker has to exit before the steps after it run.
        case exitGrace
        /// A request's deadline.
        case deadline(UInt64)
        /// The time a worker has to confirm an abandoned request before it is judged stuck.
        case grace(UInt64)
        /// The time the plugin has to accept or refuse a connection.
        case accepting(UInt32)
        /// The time a worker has, after a connection it did not answer was closed, to answer
        /// before it is judged stuck.
        case closingGrace(UInt32)
        /// After a request's deadline, the time the worker has to say where the request is
        /// (`Effect.captureStack`) before the request fails without.
        case stackWait(UInt64)
    }

    package enum Effect {
        /// Writes a frame to the worker, in this order.
        case send(HostMessage)
        case completeRequest(UInt64, Result<WorkerReply, AppExtensionError>)
        case completeConnection(UInt32, Result<Void, AppExtensionError>)
        case handshakeDone(Ready)
        /// Runs the connection's request handler for the plugin's ask.
        case runAskHandler(connection: UInt32, ask: UInt64, bytes: [UInt8])
        /// Runs the handler the caller of typed call `call` gave for its callback at
        /// `parameter`; its answer goes back as an ask's (`answerAsk`).
        case runCallbackHandler(call: UInt64, ask: UInt64, parameter: UInt32, arguments: [FunctionValue])
        case cancelAskHandler(UInt64)
        /// A message for the readers of `connection`'s messages, or (nil) of every connection's:
        /// a log line, or what the plugin posted outside any request.
        case broadcast(AppExtensionMessage, connection: UInt32?)
        /// The worker must be stopped, for this cause: `stop(_:)` is the input that does it.
        case stop(WorkerChannel.StopCause)
        /// Ends the worker: these steps, in order.
        case tearDown([TeardownStep])
        /// Asks the worker where request `id` is (its stack signal): `stackReport` answers.
        case captureStack(UInt64)
        case sharedResponse(UInt64, SharedMemoryLocation)
        /// A call result to read from the worker's region, then `complete(sharedCallResult:)`.
        case sharedCallResult(UInt64, SharedMemoryLocation)
    }

    package enum Abandonment {
        case timedOut(Duration?)
        case cancelled
        case connectionClosed
    }

    private struct Request {
        enum Slot {
            /// Registered; the caller has not handed over its continuation yet.
            case reserved
            /// Abandoned before the caller suspended.
            case cancelledEarly(AppExtensionError)
            case sent
        }

        var connection: UInt32
        var slot: Slot
        var timeout: Duration?
        /// Its deadline passed and the worker was asked where it is (`Effect.captureStack`).
        var awaitingStack = false
    }

    private enum ConnectionState {
        case opening
        case open
    }

    private struct Connection {
        var state: ConnectionState
        var hasHandler: Bool
        var asks: Set<UInt64> = []
    }

    let pluginIdentifier: String
    let hostIdentifier: String
    let maximumMessageBytes: UInt64
    /// How many of the plugin's asks may wait on one connection; more get `tooManyAsks`.
    let asksPerConnection: Int
    let cancellationGracePeriod: Duration
    /// How long a request whose deadline passed waits for the worker's `stackReport` before it
    /// fails without one: the worker answers within its own 50 ms or not at all.
    static let stackWait: Duration = .milliseconds(250)
    /// The most payload bytes of the plugin's asks the host holds at once, every connection
    /// together: a plugin that asks more while the handlers run gets `tooManyAsks` at once. By
    /// default 64 MiB, or two messages where the message limit is higher.
    let askByteBudget: Int

    private(set) var lifecycle: Lifecycle = .launching
    /// The steps of a teardown after its `wait`, for when `Timer.exitGrace` fires.
    private var afterExitGrace: [TeardownStep] = []
    /// The time of the latest input that carried one: timers armed now fire at `now` plus their
    /// duration.
    private(set) var now = ContinuousClock.now
    /// When each armed timer fires.
    private(set) var deadlines = Deadlines<Timer>()
    /// How long the launch waits for `ready`, once `awaitReady` armed its timer.
    private var launchTimeout: Duration = .zero
    private var requests: [UInt64: Request] = [:]
    /// Requests the host gave up on and told the worker to drop.
    private var abandoned: Set<UInt64> = []
    private var connections: [UInt32: Connection] = [:]
    /// Connections the host closed because the plugin did not answer them in time: an answer
    /// must still come within the grace period.
    private var unansweredConnections: Set<UInt32> = []
    /// Asks whose handler runs, by ask identifier: their connection (0 for a callback).
    private var asks: [UInt64: UInt32] = [:]
    /// The callbacks whose handler runs, by ask identifier: their typed call.
    private var callbackCalls: [UInt64: UInt64] = [:]
    /// The payload bytes of each running ask, and their sum: what the host holds for them.
    private var askPayloads: [UInt64: Int] = [:]
    private var askBytes = 0
    /// Why the worker could not load the plugin, as it said (`loadFailed`).
    private(set) var loadFailure: LoadFailure?
    /// The fatal signal the worker reported, the first one.
    private(set) var fatalReport: FatalSignalReport?
    /// The crashed thread's stack, which the worker sends after `fatalReport`.
    private(set) var fatalStack: StackReport?
    /// Calls the sandbox refused the plugin, those the worker's rate limit dropped included.
    private(set) var refusals = 0
    private(set) var lastRefusal: SandboxRefusal?

    /// Forgets the payload of ask `id`, which no longer runs.
    private mutating func releasePayload(of id: UInt64) {
        if let bytes = askPayloads.removeValue(forKey: id) { askBytes -= bytes }
    }
    private var nextRequestID: UInt64 = 1
    private var nextConnectionID: UInt32 = 1

    package init(
        pluginIdentifier: String, hostIdentifier: String, maximumMessageBytes: UInt64, asksPerConnection: Int = 64,
        cancellationGracePeriod: Duration, askByteBudget: Int? = nil
    ) {
        self.askByteBudget = askByteBudget ?? max(64 << 20, 2 * Int(clamping: maximumMessageBytes))
        self.pluginIdentifier = pluginIdentifier
        self.hostIdentifier = hostIdentifier
        self.maximumMessageBytes = maximumMessageBytes
        self.asksPerConnection = asksPerConnection
        self.cancellationGracePeriod = cancellationGracePeriod
    }

    // MARK: Deadlines

    private mutating func arm(_ timer: Timer, after duration: Duration) {
        deadlines.arm(timer, at: now + duration)
    }

    private mutating func disarm(_ timer: Timer) {
        deadlines.disarm(timer)
    }

    /// When the next timer fires; nil when none is armed.
    var nextDeadline: ContinuousClock.Instant? {
        mutating get { deadlines.next }
    }

    /// Fires, in the order of their deadlines, the timers due at `now`.
    package mutating func expire(now: ContinuousClock.Instant) -> [Effect] {
        self.now = now
        var effects: [Effect] = []
        while let timer = deadlines.firstDue(at: now) { effects += timerFired(timer) }
        return effects
    }

    package var isEnded: Bool { lifecycle.isEnded }

    private func error(_ code: AppExtensionError.Code, _ reason: String) -> AppExtensionError {
        AppExtensionError(code, plugin: pluginIdentifier, reason)
    }

    /// The worker answers its stack signal and follows a fatal-signal report with the stack.
    private var reportsStacks: Bool {
        !isEnded && lifecycle.ready?.features.contains(ProtocolFeature.stacks) == true
    }

    /// Requests and connections may start: the worker is ready, not ended, and the host has not
    /// asked it to end.
    private var takesRequests: Bool {
        lifecycle.hasAnsweredHandshake && !lifecycle.isInvalidated && !isEnded
    }

    /// The worker has not answered the handshake, and has not ended.
    private var awaitsReady: Bool {
        !lifecycle.hasAnsweredHandshake && !isEnded
    }

    private var notReady: AppExtensionError {
        if lifecycle.isInvalidated { return error(.cancelled, "the process was invalidated") }
        return error(.invalidated, isEnded ? "the process has ended" : "the worker is not ready")
    }

    // MARK: Handshake

    /// The launch waits for the worker's `ready` from `now`, for at most `timeout`.
    package mutating func awaitReady(timeout: Duration, now: ContinuousClock.Instant) {
        self.now = now
        guard awaitsReady else { return }
        launchTimeout = timeout
        arm(.launch, after: timeout)
    }

    /// The worker's `ready`: once, and only first.
    private mutating func received(_ ready: Ready) -> [Effect] {
        guard awaitsReady else { return [.stop(.protocolViolation("sent ready twice"))] }
        switch lifecycle {
        case .launching, .ready: lifecycle = .ready(ready)
        case .ending(var ending):
            ending.ready = ready
            lifecycle = .ending(ending)
        case .reaped(var ending):
            ending.ready = ready
            lifecycle = .reaped(ending)
        case .ended: break
        }
        disarm(.launch)
        return [.handshakeDone(ready)]
    }

    // MARK: Requests

    /// Reserves an identifier for a request on `connection` (0: none, for typed calls).
    package mutating func reserveRequest(connection: UInt32, timeout: Duration?) -> Result<UInt64, AppExtensionError> {
        guard takesRequests else { return .failure(notReady) }
        if connection != 0 {
            guard let open = connections[connection], open.state == .open else {
                return .failure(error(.connectionClosed, "the connection is closed"))
            }
        }
        let id = nextRequestID
        nextRequestID += 1
        requests[id] = Request(connection: connection, slot: .reserved, timeout: timeout)
        return .success(id)
    }

    /// Sends a reserved request (`message` carries its identifier), now that its caller waits.
    package mutating func sendRequest(_ id: UInt64, _ message: HostMessage, now: ContinuousClock.Instant) -> [Effect] {
        self.now = now
        guard var request = requests[id] else { return [.completeRequest(id, .failure(notReady))] }
        if case .cancelledEarly(let failure) = request.slot {
            requests[id] = nil
            return [.completeRequest(id, .failure(failure))]
        }
        request.slot = .sent
        requests[id] = request
        if let timeout = request.timeout { arm(.deadline(id), after: timeout) }
        return [.send(message)]
    }

    /// Fails a request now and tells the worker to drop it; if the worker neither answers nor
    /// confirms within the grace period, it is judged stuck.
    package mutating func abandon(
        _ id: UInt64, because reason: Abandonment, stack: StackReport? = nil, now: ContinuousClock.Instant
    ) -> [Effect] {
        self.now = now
        guard var request = requests[id] else { return [] }
        var failure: AppExtensionError
        switch reason {
        case .timedOut(let limit):
            failure = timedOut(limit)
            failure.unsymbolizedStack = stack
        case .cancelled:
            failure = error(.cancelled, "request was cancelled")
        case .connectionClosed:
            failure = error(.connectionClosed, "the connection was closed while the request waited")
        }
        switch request.slot {
        case .reserved:
            request.slot = .cancelledEarly(failure)
            requests[id] = request
            return []
        case .cancelledEarly:
            return []
        case .sent:
            requests[id] = nil
            abandoned.insert(id)
            disarm(.deadline(id))
            disarm(.stackWait(id))
            arm(.grace(id), after: cancellationGracePeriod)
            return [.send(.cancel(id: id)), .completeRequest(id, .failure(failure))]
        }
    }

    private func timedOut(_ limit: Duration?) -> AppExtensionError {
        error(.timedOut, "request did not finish within \(limit.map { DurationText($0).description } ?? "its deadline")")
    }

    /// `timer` fired (whether or not it was still armed): what follows from it.
    mutating func timerFired(_ timer: Timer) -> [Effect] {
        disarm(timer)
        switch timer {
        case .launch:
            guard awaitsReady else { return [] }
            return [.stop(.launchTimedOut(launchTimeout))]
        case .exitGrace:
            return isEnded ? [] : [tearDown(afterExitGrace)]
        case .deadline(let id):
            // Where the request is, asked before it is cancelled: a plugin that honours the
            // cancel would otherwise have left the place by the time its stack is taken.
            if reportsStacks, var request = requests[id], case .sent = request.slot, !request.awaitingStack {
                request.awaitingStack = true
                requests[id] = request
                arm(.stackWait(id), after: Self.stackWait)
                return [.captureStack(id)]
            }
            return abandon(id, because: .timedOut(requests[id]?.timeout), now: now)
        case .stackWait(let id):
            guard requests[id]?.awaitingStack == true else { return [] }
            return abandon(id, because: .timedOut(requests[id]?.timeout), now: now)
        case .grace(let id):
            guard abandoned.remove(id) != nil else { return [] }
            return [.stop(.unresponsive(requestID: id, after: cancellationGracePeriod))]
        case .accepting(let id):
            guard let connection = connections[id], connection.state == .opening else { return [] }
            connections[id] = nil
            unansweredConnections.insert(id)
            let failure = error(.timedOut, "did not accept or refuse the connection in time; it was closed")
            arm(.closingGrace(id), after: cancellationGracePeriod)
            return [.completeConnection(id, .failure(failure)), .send(.closeConnection(id))]
        case .closingGrace(let id):
            guard unansweredConnections.remove(id) != nil else { return [] }
            return [.stop(.unresponsiveConnection(id, after: cancellationGracePeriod))]
        }
    }

    /// An answer from the worker: delivered, dropped when the host gave up on it, a violation
    /// when it answers what was never sent.
    private mutating func complete(_ id: UInt64, _ result: Result<WorkerReply, AppExtensionError>) -> [Effect] {
        if abandoned.remove(id) != nil {
            disarm(.grace(id))
            return []
        }
        guard let request = requests[id], case .sent = request.slot else {
            return id < nextRequestID ? [] : [.stop(.protocolViolation("answer to request \(id), which was never sent"))]
        }
        requests[id] = nil
        disarm(.deadline(id))
        var effects: [Effect] = []
        // A call's callbacks end with it (a worker that answered while one ran does not wait).
        for (ask, call) in callbackCalls where call == id {
            callbackCalls[ask] = nil
            asks[ask] = nil
            releasePayload(of: ask)
            effects.append(.cancelAskHandler(ask))
        }
        if request.awaitingStack {
            // Answered past its deadline, while the host asked where it was: the deadline holds,
            // and there is nothing left to cancel.
            disarm(.stackWait(id))
            return effects + [.completeRequest(id, .failure(timedOut(request.timeout)))]
        }
        return effects + [.completeRequest(id, result)]
    }

    // MARK: Connections

    /// Opens a connection; `completeConnection` follows when the plugin accepts or refuses it,
    /// or with `timedOut` when it has done neither within `timeout`.
    package mutating func openConnection(hasHandler: Bool, timeout: Duration, now: ContinuousClock.Instant) -> Result<
        (UInt32, [Effect]), AppExtensionError
    > {
        self.now = now
        guard takesRequests else { return .failure(notReady) }
        let id = nextConnectionID
        nextConnectionID &+= 1
        if nextConnectionID == 0 { nextConnectionID = 1 }
        connections[id] = Connection(state: .opening, hasHandler: hasHandler)
        arm(.accepting(id), after: timeout)
        return .success((id, [.send(.openConnection(id, hostIdentifier: hostIdentifier))]))
    }

    /// The plugin answered connection `id` (accepted or refused): the answer ends the grace of a
    /// connection the host closed for want of one; another is a violation.
    private mutating func lateAnswer(connection id: UInt32, _ verb: String) -> [Effect] {
        if unansweredConnections.remove(id) != nil {
            disarm(.closingGrace(id))
            return []
        }
        return id < nextConnectionID ? [] : [.stop(.protocolViolation("\(verb) connection \(id), which was never opened"))]
    }

    /// Closes a connection: its waiting requests fail, its asks stop, the plugin is told.
    package mutating func closeConnection(_ id: UInt32, now: ContinuousClock.Instant) -> [Effect] {
        self.now = now
        guard let connection = connections.removeValue(forKey: id) else { return [] }
        var effects: [Effect] = []
        if connection.state == .opening {
            disarm(.accepting(id))
            effects.append(.completeConnection(id, .failure(error(.connectionClosed, "the connection was closed while it opened"))))
        }
        for requestID in requests.keys.sorted() where requests[requestID]?.connection == id {
            effects += abandon(requestID, because: .connectionClosed, now: now)
        }
        for ask in connection.asks.sorted() {
            asks[ask] = nil
            releasePayload(of: ask)
            effects.append(.cancelAskHandler(ask))
        }
        if !isEnded { effects.append(.send(.closeConnection(id))) }
        return effects
    }

    // MARK: The plugin's asks

    private mutating func received(ask id: UInt64, connection: UInt32, bytes: [UInt8]) -> [Effect] {
        guard asks[id] == nil else { return [.stop(.protocolViolation("sent ask \(id) twice"))] }
        guard var open = connections[connection], open.state == .open else {
            return [.send(.askFailed(ask: id, AskFailure(reason: .closed, message: "connection \(connection) is closed")))]
        }
        guard open.hasHandler else {
            return [
                .send(.askFailed(ask: id, AskFailure(reason: .unsupported, message: "the host has no request handler on this connection")))
            ]
        }
        guard open.asks.count < asksPerConnection else {
            let message = "\(asksPerConnection) asks of this connection are waiting already"
            return [.send(.askFailed(ask: id, AskFailure(reason: .tooManyAsks, message: message)))]
        }
        guard askBytes + bytes.count <= askByteBudget else {
            let message =
                "the host holds \(ByteCount(UInt64(askBytes))) of this plugin's asks already (at most \(ByteCount(UInt64(askByteBudget))))"
            return [.send(.askFailed(ask: id, AskFailure(reason: .tooManyAsks, message: message)))]
        }
        open.asks.insert(id)
        connections[connection] = open
        asks[id] = connection
        askPayloads[id] = bytes.count
        askBytes += bytes.count
        return [.runAskHandler(connection: connection, ask: id, bytes: bytes)]
    }

    /// The library called a callback of typed call `call`, which the worker forwards as ask `id`:
    /// the caller's handler runs, unless the call is no longer waited for.
    private mutating func received(
        callback id: UInt64, call: UInt64, parameter: UInt32, arguments: [FunctionValue]
    ) -> [Effect] {
        guard asks[id] == nil else { return [.stop(.protocolViolation("sent ask \(id) twice"))] }
        guard let request = requests[call], request.connection == 0, case .sent = request.slot else {
            let message = "typed call \(call) is not waited for: its callback has no handler"
            return [.send(.askFailed(ask: id, AskFailure(reason: .closed, message: message)))]
        }
        let bytes = arguments.reduce(0) { total, value in
            switch value {
            case .bytes(let bytes): total + bytes.count
            case .string(let text): total + text.utf8.count
            default: total + 16
            }
        }
        guard askBytes + bytes <= askByteBudget else {
            let message =
                "the host holds \(ByteCount(UInt64(askBytes))) of this plugin's asks already (at most \(ByteCount(UInt64(askByteBudget))))"
            return [.send(.askFailed(ask: id, AskFailure(reason: .tooManyAsks, message: message)))]
        }
        asks[id] = 0
        callbackCalls[id] = call
        askPayloads[id] = bytes
        askBytes += bytes
        return [.runCallbackHandler(call: call, ask: id, parameter: parameter, arguments: arguments)]
    }

    /// The host's handler finished: its answer goes to the plugin, unless the ask was cancelled or
    /// its connection closed meanwhile.
    package mutating func answerAsk(_ id: UInt64, _ result: Result<[UInt8], AskFailure>, maximumBytes: Int) -> [Effect] {
        guard let connection = asks.removeValue(forKey: id) else { return [] }
        callbackCalls[id] = nil
        connections[connection]?.asks.remove(id)
        releasePayload(of: id)
        switch result {
        case .success(let bytes) where bytes.count > maximumBytes:
            let message = "the answer of \(bytes.count) bytes exceeds the message limit of \(maximumBytes) bytes"
            return [.send(.askFailed(ask: id, AskFailure(reason: .tooLarge, message: message)))]
        case .success(let bytes):
            return [.send(.answer(ask: id, bytes: bytes))]
        case .failure(let failure):
            return [.send(.askFailed(ask: id, failure))]
        }
    }

    /// The one request awaited on `connection` (0: typed calls), if exactly one is.
    func onlyRequest(on connection: UInt32) -> UInt64? {
        var found: UInt64?
        for (id, request) in requests where request.connection == connection {
            if found != nil { return nil }
            found = id
        }
        return found
    }

    /// The connection an ask arrived on, while its handler runs.
    func connection(ofAsk id: UInt64) -> UInt32? {
        asks[id]
    }

    // MARK: What the worker sends

    package mutating func receive(_ message: WorkerMessage) -> [Effect] {
        switch message {
        case .ready(let ready):
            return received(ready)
        case .loadFailed(let failure):
            loadFailure = failure
            return []
        case .response(let id, let bytes):
            return complete(id, .success(.bytes(bytes)))
        case .sharedResponse(let id, let location):
            // The bytes are read outside, then handed back through `complete(sharedResponse:)`.
            if abandoned.contains(id) || requests[id] != nil { return [.sharedResponse(id, location)] }
            return complete(id, .success(.bytes([])))
        case .callResult(let id, let reply):
            return complete(id, .success(.value(reply)))
        case .sharedCallResult(let id, let location):
            // Read outside, like a shared response, then `complete(sharedCallResult:)`.
            if abandoned.contains(id) || requests[id] != nil { return [.sharedCallResult(id, location)] }
            return complete(id, .success(.value(FunctionCallReply(.void))))
        case .failure(let id, let failure):
            return complete(id, .failure(pluginFailureError(failure)))
        case .callFailed(let id, let message):
            return complete(id, .failure(error(.invalidArguments, message)))
        case .callbackFailed(let id, let message):
            return complete(id, .failure(error(.callbackFailed, message)))
        case .cancelled(let id):
            return complete(id, .failure(error(.cancelled, "request was cancelled")))
        case .event(let id, let bytes):
            return deliver(.event(requestIdentifier: id == 0 ? nil : id, bytes: bytes), request: id)
        case .progress(let id, let completed, let total):
            return deliver(.progress(requestIdentifier: id == 0 ? nil : id, completed: completed, total: total), request: id)
        case .log(let level, let text):
            return [.broadcast(.log(level: level, message: text), connection: nil)]
        case .fatalSignal(let report):
            if fatalReport == nil { fatalReport = report }
            return []
        case .sandboxRefusal(let refusal):
            // Each frame may claim 2^32 − 1 dropped: a flood of them must not trap the host.
            refusals = refusals.addingSaturating(1 + Int(refusal.dropped))
            lastRefusal = refusal
            return [.broadcast(.sandboxRefusal(.init(refusal)), connection: nil)]
        case .stackReport(let id, let report):
            switch report.reason {
            case .fatalSignal:
                if fatalStack == nil { fatalStack = report }
                return []
            case .requested:
                // A late answer (the wait ended, or the request finished meanwhile) is dropped.
                guard requests[id]?.awaitingStack == true else { return [] }
                let stack = report.frames.isEmpty ? nil : report
                return abandon(id, because: .timedOut(requests[id]?.timeout), stack: stack, now: now)
            }
        case .goodbye:
            return []
        case .connectionAccepted(let id):
            guard let connection = connections[id], connection.state == .opening else {
                // Closed by the host while the plugin accepted it: the close is on its way.
                return lateAnswer(connection: id, "accepted")
            }
            connections[id]?.state = .open
            disarm(.accepting(id))
            return [.completeConnection(id, .success(()))]
        case .connectionRefused(let id, let reason):
            guard let connection = connections[id], connection.state == .opening else {
                return lateAnswer(connection: id, "refused")
            }
            connections[id] = nil
            disarm(.accepting(id))
            return [.completeConnection(id, .failure(error(.connectionRefused, "refused the connection: \(reason)")))]
        case .ask(let id, let connection, let bytes):
            return received(ask: id, connection: connection, bytes: bytes)
        case .callback(let id, let call, let parameter, let arguments):
            return received(callback: id, call: call, parameter: parameter, arguments: arguments)
        case .askCancelled(let id):
            guard let connection = asks.removeValue(forKey: id) else { return [] }
            callbackCalls[id] = nil
            connections[connection]?.asks.remove(id)
            releasePayload(of: id)
            return [.cancelAskHandler(id)]
        }
    }

    /// What the plugin posted about request `id` goes to the readers of that request's
    /// connection only, so that two documents or two users served by one shared process never
    /// see each other's events. Outside a request (0), or for a typed call, to every reader; for a
    /// request that is not running (finished, or never sent), to nobody.
    private func deliver(_ message: AppExtensionMessage, request id: UInt64) -> [Effect] {
        guard id != 0 else { return [.broadcast(message, connection: nil)] }
        guard let request = requests[id] else { return [] }
        return [.broadcast(message, connection: request.connection == 0 ? nil : request.connection)]
    }

    /// A response read from shared memory (nil: outside the region or over the limit).
    package mutating func complete(sharedResponse id: UInt64, bytes: [UInt8]?) -> [Effect] {
        guard let bytes else {
            return [.stop(.protocolViolation("response \(id) lies outside the shared-memory region or exceeds the message limit"))]
        }
        return complete(id, .success(.bytes(bytes)))
    }

    /// A call result read from shared memory (nil: outside the region or over the limit), decoded
    /// as the pipe's would be.
    package mutating func complete(sharedCallResult id: UInt64, bytes: [UInt8]?) -> [Effect] {
        complete(sharedCallResult: id, decoded: Self.decodeSharedCallResult(bytes))
    }

    /// A call result decoded by `decodeSharedCallResult`, which the channel runs before it takes
    /// the lock this state lives under: a large result is a large copy.
    package mutating func complete(sharedCallResult id: UInt64, decoded: Result<FunctionCallReply, SharedCallResultError>) -> [Effect] {
        switch decoded {
        case .success(let reply): return complete(id, .success(.value(reply)))
        case .failure(.unreadable):
            return [.stop(.protocolViolation("call result \(id) lies outside the shared-memory region or exceeds the message limit"))]
        case .failure(.malformed(let error)): return [.stop(.protocolViolation("call result \(id) in shared memory: \(error)"))]
        }
    }

    /// Why the bytes of a call result in shared memory are none.
    package enum SharedCallResultError: Error {
        /// Outside the region, or over the message limit.
        case unreadable
        case malformed(WireError)
    }

    /// The call result in `bytes` (nil: outside the region or over the limit), checked whole.
    package static func decodeSharedCallResult(_ bytes: [UInt8]?) -> Result<FunctionCallReply, SharedCallResultError> {
        guard let bytes else { return .failure(.unreadable) }
        var reader = PayloadReader(bytes)
        do {
            let reply = try reader.readFunctionCallReply()
            try reader.finish("call result")
            return .success(reply)
        } catch {
            return .failure(.malformed(error))
        }
    }

    private func pluginFailureError(_ failure: PluginFailure) -> AppExtensionError {
        switch failure.code {
        case ReservedFailureCode.responseTooLarge:
            return AppExtensionError(
                .limitExceeded, plugin: pluginIdentifier, failure.message,
                exceededLimit: .init(kind: .messageSize, value: maximumMessageBytes))
        case ReservedFailureCode.noRequestHandler:
            return error(.unsupported, failure.message)
        case ReservedFailureCode.connectionClosed:
            return error(.connectionClosed, failure.message)
        default:
            return AppExtensionError(
                .pluginError, plugin: pluginIdentifier, "failed with code \(failure.code): \(failure.message)",
                pluginErrorCode: failure.code)
        }
    }

    // MARK: The end

    /// The host ends the process in an orderly way: everything waiting fails, and the worker is
    /// torn down (`teardown(invalidatedWith:)`): `shutdown`, end-of-file, and a kill if it has
    /// not exited after `grace`.
    package mutating func invalidate(grace: Duration, now: ContinuousClock.Instant) -> [Effect] {
        self.now = now
        switch lifecycle {
        case .launching, .ready:
            lifecycle = .ending(Ending(ready: lifecycle.ready, invalidated: true))
        case .ending(var ending):
            guard !ending.invalidated else { return [] }
            ending.invalidated = true
            lifecycle = .ending(ending)
        case .reaped(var ending):
            guard !ending.invalidated else { return [] }
            ending.invalidated = true
            lifecycle = .reaped(ending)
        case .ended(let termination, var ending):
            // Nothing left to end; later requests learn that the host invalidated it.
            ending.invalidated = true
            lifecycle = .ended(termination, ending)
            return []
        }
        let failure = error(.cancelled, "the process was invalidated")
        var effects = failEverything(with: failure)
        effects.append(tearDown(Self.teardown(invalidatedWith: grace)))
        return effects
    }

    /// The host kills the worker for `cause` (`Effect.stop` asked for it, or the host judged it
    /// itself): its teardown, once; nothing when it was stopped already or is reaped.
    package mutating func stop(_ cause: WorkerChannel.StopCause) -> [Effect] {
        guard lifecycle.isRunning else { return [] }
        var ending = lifecycle.asEnding
        ending.stopCause = cause
        lifecycle = .ending(ending)
        return [tearDown(Self.teardown(stoppedFor: cause))]
    }

    /// The worker's exit was reaped; its end is told (`ended`) once the stack of its crash is
    /// named. Nothing can stop it any more.
    mutating func reaped() {
        switch lifecycle {
        case .launching, .ready, .ending: lifecycle = .reaped(lifecycle.asEnding)
        case .reaped, .ended: break
        }
    }

    /// The worker is gone, as `termination` tells: everything waiting fails with `failure`, and
    /// what the worker held is let go.
    package mutating func ended(_ termination: WorkerTermination, failure: AppExtensionError) -> [Effect] {
        guard !isEnded else { return [] }
        lifecycle = .ended(termination, lifecycle.asEnding)
        var effects = failEverything(with: failure)
        abandoned.removeAll()
        unansweredConnections.removeAll()
        deadlines.removeAll()
        afterExitGrace = []
        effects.append(.tearDown(Self.teardownOnceReaped))
        return effects
    }

    /// The effect for `steps`: a `wait` arms the protocol's timer, which runs the steps after it.
    private mutating func tearDown(_ steps: [TeardownStep]) -> Effect {
        if let wait = steps.firstIndex(where: { if case .wait = $0 { true } else { false } }),
            case .wait(let grace) = steps[wait]
        {
            afterExitGrace = Array(steps[(wait + 1)...])
            arm(.exitGrace, after: grace)
        }
        return .tearDown(steps)
    }

    private mutating func failEverything(with failure: AppExtensionError) -> [Effect] {
        var effects: [Effect] = []
        for id in requests.keys.sorted() {
            guard let request = requests[id] else { continue }
            switch request.slot {
            case .reserved:
                requests[id]?.slot = .cancelledEarly(failure)
            case .cancelledEarly:
                break
            case .sent:
                requests[id] = nil
                disarm(.deadline(id))
                disarm(.stackWait(id))
                effects.append(.completeRequest(id, .failure(failure)))
            }
        }
        for id in connections.keys.sorted() where connections[id]?.state == .opening {
            disarm(.accepting(id))
            effects.append(.completeConnection(id, .failure(failure)))
            connections[id] = nil
        }
        for ask in asks.keys.sorted() { effects.append(.cancelAskHandler(ask)) }
        asks.removeAll()
        callbackCalls.removeAll()
        askPayloads.removeAll()
        askBytes = 0
        for id in connections.keys { connections[id]?.asks.removeAll() }
        return effects
    }
}
