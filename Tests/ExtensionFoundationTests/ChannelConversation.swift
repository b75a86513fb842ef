import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

/// The host's protocol state machine, driven without a process: what it sends goes through an
/// in-memory byte stream to a pretend worker, what the worker answers comes back the same way.
struct Conversation {
    var machine = ChannelProtocol(
        pluginIdentifier: "org.plugind.tests.machine", hostIdentifier: "org.plugind.tests.host", maximumMessageBytes: 1024,
        asksPerConnection: 2, cancellationGracePeriod: .milliseconds(500), askByteBudget: 1500)
    private let toWorker = InMemoryConnection()
    private var atWorker: InMemoryFrameReceiver
    private let toHost = InMemoryConnection()
    private var atHost: InMemoryFrameReceiver

    var requests: [UInt64: Result<WorkerReply, AppExtensionError>] = [:]
    var connections: [UInt32: Result<Void, AppExtensionError>] = [:]
    /// The timers armed now.
    var timers: Set<ChannelProtocol.Timer> { Set(machine.deadlines.entries.keys) }
    var stops: [WorkerChannel.StopCause] = []
    var handlers: [UInt64: [UInt8]] = [:]
    var cancelledHandlers: [UInt64] = []
    var readyCount = 0
    var stackRequests: [UInt64] = []
    /// Each teardown the machine decided, in order.
    /// The callback handlers started, by ask: their typed call, parameter and arguments.
    var callbackHandlers: [UInt64: (call: UInt64, parameter: UInt32, arguments: [FunctionValue])] = [:]
    var teardowns: [[ChannelProtocol.TeardownStep]] = []
    /// The kills carried out: those of each teardown before its `wait` (the steps after it come
    /// back when its timer fires).
    var kills: Int {
        teardowns.map { $0.prefix { if case .wait = $0 { false } else { true } }.count { $0 == .kill } }.reduce(0, +)
    }
    /// The time the next input is given at.
    var clock = ContinuousClock.now

    init() {
        atWorker = InMemoryFrameReceiver(toWorker, direction: .hostToWorker)
        atHost = InMemoryFrameReceiver(toHost, direction: .workerToHost)
    }

    mutating func apply(_ effects: [ChannelProtocol.Effect]) {
        for effect in effects {
            switch effect {
            case .send(let message): toWorker.send(message.encode())
            case .completeRequest(let id, let result):
                #expect(requests[id] == nil, "request \(id) completed twice")
                requests[id] = result
            case .completeConnection(let id, let result): connections[id] = result
            case .handshakeDone: readyCount += 1
            case .runAskHandler(_, let ask, let bytes): handlers[ask] = bytes
            case .runCallbackHandler(let call, let ask, let parameter, let arguments):
                callbackHandlers[ask] = (call, parameter, arguments)
            case .cancelAskHandler(let ask): cancelledHandlers.append(ask)
            case .stop(let cause):
                // As `WorkerChannel` does: the stop is an input of its own, which decides the
                // teardown.
                stops.append(cause)
                apply(machine.stop(cause))
            case .tearDown(let steps): teardowns.append(steps)
            case .captureStack(let id): stackRequests.append(id)
            case .broadcast, .sharedResponse, .sharedCallResult: break
            }
        }
    }

    /// What the worker has been sent since the last call, decoded as the worker decodes it.
    mutating func sentToWorker() throws -> [HostMessage] {
        var messages: [HostMessage] = []
        while let frame = try atWorker.receive() { messages.append(try HostMessage(frame)) }
        return messages
    }

    /// The worker sends `message`; the machine receives it from the byte stream.
    mutating func worker(_ message: WorkerMessage) throws {
        toHost.send(message.encode())
        while let frame = try atHost.receive() { apply(machine.receive(try WorkerMessage(frame))) }
    }

    /// The worker is ready, with `features` (by default every one but stack reports, so that a
    /// deadline fails its request at once).
    mutating func ready(features: [String] = ProtocolFeature.all.filter { $0 != ProtocolFeature.stacks }) throws {
        try worker(
            .ready(
                Ready(
                    protocolVersion: ProtocolVersion.current, pluginABIVersion: 2, features: features, pluginName: "p",
                    pluginVersion: "1", hasRequestHandler: true, confinement: [], workerProcessIdentifier: 1)))
    }

    /// Opens a connection the worker accepts.
    mutating func open(handler: Bool = true) throws -> UInt32 {
        let (id, effects) = try machine.openConnection(hasHandler: handler, timeout: .seconds(1), now: clock).get()
        apply(effects)
        #expect(try sentToWorker() == [.openConnection(id, hostIdentifier: "org.plugind.tests.host")])
        try worker(.connectionAccepted(id))
        #expect(try connections[id]?.get() != nil)
        return id
    }

    /// The worker was reaped with `reason`: its end, as `WorkerChannel` tells it.
    mutating func end(_ reason: ProcessExit.Reason) {
        let termination = WorkerTermination(
            exit: ProcessExit(reason: reason), fatalReport: nil, stopCause: machine.lifecycle.stopCause, loadFailure: nil, output: "",
            wasInvalidated: machine.lifecycle.isInvalidated)
        apply(machine.ended(termination, failure: termination.error(plugin: "org.plugind.tests.machine", limits: ResourceLimits())))
    }

    /// Reserves and sends a typed call of function 0.
    mutating func call(timeout: Duration? = .seconds(1)) throws -> UInt64 {
        let id = try machine.reserveRequest(connection: 0, timeout: timeout).get()
        apply(machine.sendRequest(id, .call(id: id, function: 0, arguments: []), now: clock))
        return id
    }

    /// Reserves and sends a request.
    mutating func send(_ bytes: [UInt8], on connection: UInt32, timeout: Duration? = .seconds(1)) throws -> UInt64 {
        let id = try machine.reserveRequest(connection: connection, timeout: timeout).get()
        apply(machine.sendRequest(id, .request(id: id, connection: connection, bytes: bytes), now: clock))
        return id
    }
}

/// The code a failed result carries; nil for a success or no result.
func failureCode<Success>(_ result: Result<Success, AppExtensionError>?) -> AppExtensionError.Code? {
    guard case .failure(let error)? = result else { return nil }
    return error.code
}

extension HostMessage {
    var askFailureReason: AskFailure.Reason? {
        if case .askFailed(_, let failure) = self { return failure.reason }
        return nil
    }
}
