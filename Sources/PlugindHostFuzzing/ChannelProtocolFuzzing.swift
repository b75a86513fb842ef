import PlugindEngine
import PlugindSystem
import PlugindWire

/// The body of the channel-protocol fuzz target and of the test that replays its corpus: whatever
/// bytes a worker writes, interleaved with the host's own inputs (connections, requests, cancels,
/// closes, answers to asks, the clock, invalidation), driven through the host's protocol state
/// machine (`ChannelProtocol`, whose inputs and effects are `package` for it) as `WorkerChannel`
/// drives it.
///
/// What a hostile worker sends must never trap the host, complete a request or a connection
/// twice, or leave one that never completes once the worker has ended.
package enum ChannelProtocolFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    /// What one input reached: for the seeds' test, which checks that they reach what they mean to.
    package struct Reached: Equatable, Sendable {
        package var answered: Int
        package var failed: Int
        package var accepted: Int
        package var asks: Int
        package var stopped: Bool

        package init(answered: Int = 0, failed: Int = 0, accepted: Int = 0, asks: Int = 0, stopped: Bool = false) {
            (self.answered, self.failed, self.accepted, self.asks, self.stopped) = (answered, failed, accepted, asks, stopped)
        }
    }

    /// The input, one operation after another: an operation byte, then its arguments.
    private struct Input {
        var bytes: ArraySlice<UInt8>
        mutating func next() -> UInt8? { bytes.popFirst() }
        mutating func take(_ count: Int) -> [UInt8] {
            let taken = Array(bytes.prefix(count))
            bytes = bytes.dropFirst(count)
            return taken
        }
    }

    /// The host's side: what the machine said it completed, what is still waited for.
    private struct Host {
        var machine = ChannelProtocol(
            pluginIdentifier: "org.plugind.fuzz", hostIdentifier: "org.plugind.fuzz.host", maximumMessageBytes: 1024,
            asksPerConnection: 2, cancellationGracePeriod: .milliseconds(500), askByteBudget: 4096)
        var now = ContinuousClock.now
        var requests: [UInt64] = []
        var completedRequests: Set<UInt64> = []
        var connections: [UInt32] = []
        var completedConnections: Set<UInt32> = []
        var asks: [UInt64] = []
        var sharedResponses: [UInt64] = []
        var sharedCallResults: [UInt64] = []
        var released = false
        var reached = Reached()

        mutating func apply(_ effects: [ChannelProtocol.Effect]) throws {
            for effect in effects {
                switch effect {
                case .completeRequest(let id, let result):
                    guard requests.contains(id) else { throw InvariantViolation(description: "request \(id) was never made") }
                    guard completedRequests.insert(id).inserted else {
                        throw InvariantViolation(description: "request \(id) completed twice")
                    }
                    if case .success = result { reached.answered += 1 } else { reached.failed += 1 }
                case .completeConnection(let id, let result):
                    guard connections.contains(id) else { throw InvariantViolation(description: "connection \(id) was never opened") }
                    guard completedConnections.insert(id).inserted else {
                        throw InvariantViolation(description: "connection \(id) completed twice")
                    }
                    if case .success = result { reached.accepted += 1 }
                case .runAskHandler(_, let ask, _):
                    asks.append(ask)
                    reached.asks += 1
                case .runCallbackHandler(let call, let ask, _, _):
                    guard requests.contains(call), !completedRequests.contains(call) else {
                        throw InvariantViolation(description: "a callback of call \(call), which is not waited for, runs a handler")
                    }
                    asks.append(ask)
                    reached.asks += 1
                case .sharedResponse(let id, _):
                    sharedResponses.append(id)
                case .sharedCallResult(let id, _):
                    sharedCallResults.append(id)
                case .stop(let cause):
                    // As the real channel does: the stop is the machine's input, which decides the
                    // kill. Frames already written are still read here.
                    reached.stopped = true
                    try apply(machine.stop(cause))
                case .tearDown(let steps):
                    guard !released else { throw InvariantViolation(description: "a teardown after the worker was released") }
                    if steps.contains(.release) {
                        guard machine.isEnded, steps == [.release] else {
                            throw InvariantViolation(description: "released before the end: \(steps)")
                        }
                        released = true
                    }
                    // The kill now, not after a wait (which the machine's timer ends).
                    if steps.prefix(while: { if case .wait = $0 { false } else { true } }).contains(.kill) { reached.stopped = true }
                case .send, .handshakeDone, .cancelAskHandler, .broadcast, .captureStack:
                    break
                }
            }
        }
    }

    @discardableResult
    package static func run(_ input: [UInt8]) throws -> Reached {
        var input = Input(bytes: input[...])
        var host = Host()
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 16)
        host.machine.awaitReady(timeout: .seconds(5), now: host.now)
        operations: while let operation = input.next() {
            switch operation % 9 {
            case 0:
                let hasHandler = (input.next() ?? 0) & 1 == 1
                if case .success(let (id, effects)) = host.machine.openConnection(
                    hasHandler: hasHandler, timeout: .seconds(1), now: host.now)
                {
                    host.connections.append(id)
                    try host.apply(effects)
                }
            case 1:
                // A request on a known connection (or none, as a typed call has), with a deadline.
                let pick = Int(input.next() ?? 0)
                let connection = host.connections.isEmpty || pick == 0 ? 0 : host.connections[pick % host.connections.count]
                let timeout = (input.next() ?? 0).nonZero.map { Duration.milliseconds(10 * Int($0)) }
                if case .success(let id) = host.machine.reserveRequest(connection: connection, timeout: timeout) {
                    host.requests.append(id)
                    let bytes = input.take(Int(input.next() ?? 0) % 16)
                    try host.apply(host.machine.sendRequest(id, .request(id: id, connection: connection, bytes: bytes), now: host.now))
                }
            case 2:
                guard !host.requests.isEmpty else { continue }
                let id = host.requests[Int(input.next() ?? 0) % host.requests.count]
                try host.apply(host.machine.abandon(id, because: .cancelled, now: host.now))
            case 3:
                guard !host.connections.isEmpty else { continue }
                let id = host.connections[Int(input.next() ?? 0) % host.connections.count]
                try host.apply(host.machine.closeConnection(id, now: host.now))
            case 4:
                host.now = host.now + .milliseconds(5 * Int(input.next() ?? 0))
                try host.apply(host.machine.expire(now: host.now))
            case 5:
                // What the worker wrote: every frame it makes is received; bytes that are no frame
                // or no message end the worker, as a protocol violation does.
                let count = Int(input.next() ?? 0)
                decoder.append(input.take(count == 0 ? 256 : count))
                while true {
                    let message: WorkerMessage
                    do {
                        guard let frame = try decoder.nextFrame() else { break }
                        message = try WorkerMessage(frame)
                    } catch {
                        break operations
                    }
                    try host.apply(host.machine.receive(message))
                }
            case 6:
                guard !host.asks.isEmpty else { continue }
                let choice = input.next() ?? 0
                let ask = host.asks.remove(at: Int(choice) % host.asks.count)
                let result: Result<[UInt8], AskFailure> =
                    choice & 1 == 0 ? .success(input.take(Int(choice) % 32)) : .failure(AskFailure(reason: .closed, message: "no"))
                try host.apply(host.machine.answerAsk(ask, result, maximumBytes: 16))
            case 7:
                // A response or a call result read from shared memory: bytes (of any shape), or none.
                let bytes = (input.next() ?? 0) & 1 == 0 ? input.take(8) : nil
                if !host.sharedResponses.isEmpty {
                    try host.apply(host.machine.complete(sharedResponse: host.sharedResponses.removeFirst(), bytes: bytes))
                } else if !host.sharedCallResults.isEmpty {
                    try host.apply(host.machine.complete(sharedCallResult: host.sharedCallResults.removeFirst(), bytes: bytes))
                }
            default:
                try host.apply(host.machine.invalidate(grace: .seconds(1), now: host.now))
            }
        }
        // The worker ends (exits, or is killed after a stop): nothing may wait any longer.
        let termination = WorkerTermination(
            exit: ProcessExit(reason: .exited(status: 0)), fatalReport: nil, stopCause: nil, loadFailure: nil, output: "",
            wasInvalidated: false)
        try host.apply(host.machine.ended(termination, failure: AppExtensionError(.workerExited, plugin: "org.plugind.fuzz", "ended")))
        guard host.released else { throw InvariantViolation(description: "the ended worker was never released") }
        for id in host.requests where !host.completedRequests.contains(id) {
            // A request reserved but cancelled before it was sent completes when it is sent; the
            // fuzz body sends at once, so every one must have completed.
            throw InvariantViolation(description: "request \(id) never completed")
        }
        for id in host.connections where !host.completedConnections.contains(id) {
            throw InvariantViolation(description: "connection \(id) never completed")
        }
        return host.reached
    }

    /// Seeds for the corpus: conversations that reach the machine's paths (a ready worker, an
    /// accepted connection, answers, progress, an ask answered, a deadline with a stack report, a
    /// refused connection, shared memory), encoded as the fuzz input format.
    package static func seeds() -> [[UInt8]] {
        func worker(_ messages: [WorkerMessage]) -> [UInt8] {
            var bytes: [UInt8] = []
            for message in messages {
                let frame = message.encode()
                let encoded = frame.header.bytes + frame.payload
                var rest = encoded[...]
                while !rest.isEmpty {
                    let chunk = rest.prefix(255)
                    bytes += [5, UInt8(chunk.count)] + chunk
                    rest = rest.dropFirst(chunk.count)
                }
            }
            return bytes
        }
        let ready = WorkerMessage.ready(
            Ready(
                protocolVersion: ProtocolVersion.current, pluginABIVersion: 2, features: ProtocolFeature.all, pluginName: "p",
                pluginVersion: "1", hasRequestHandler: true, confinement: [], workerProcessIdentifier: 1, concurrency: 2))
        let open: [UInt8] = [0, 1]
        let request: [UInt8] = [1, 1, 20, 3, 65, 66, 67]
        return [
            // Ready, a connection, a request answered.
            worker([ready]) + open + worker([.connectionAccepted(1)]) + request + worker([.response(id: 1, bytes: [1, 2])]),
            // Progress, an event and a log line, then a failure.
            worker([ready]) + open + worker([.connectionAccepted(1)]) + request
                + worker([
                    .progress(requestID: 1, completed: 1, total: 2), .event(requestID: 1, bytes: [7]), .log(level: .info, message: "hi"),
                    .failure(id: 1, PluginFailure(code: 3, message: "no")),
                ]),
            // An ask, answered by the host, then the answer to the request.
            worker([ready]) + open + worker([.connectionAccepted(1)]) + request + worker([.ask(id: 1, connection: 1, bytes: [1])]) + [6, 0]
                + worker([.response(id: 1, bytes: [])]),
            // The deadline passes; the worker reports where it is; the grace passes.
            worker([ready]) + open + worker([.connectionAccepted(1)]) + request + [4, 60]
                + worker([.stackReport(requestID: 1, StackReport(reason: .requested, modules: [], frames: []))]) + [4, 200],
            // A refused connection, a typed call answered, a cancel confirmed, invalidation.
            worker([ready]) + open + worker([.connectionRefused(1, reason: "busy")]) + [1, 0, 0, 0]
                + worker([.callResult(id: 1, FunctionCallReply(.int64(5)))]) + [1, 0, 0, 0, 2, 1] + worker([.cancelled(id: 2)]) + [8],
            // A response in shared memory, read back.
            worker([ready]) + open + worker([.connectionAccepted(1)]) + request
                + worker([.sharedResponse(id: 1, SharedMemoryLocation(offset: 0, length: 4))]) + [7, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            // A typed call whose callback the library calls: the host answers it, then the call fails in it.
            worker([ready]) + [1, 0, 0, 0]
                + worker([.callback(id: 1, call: 1, parameter: 0, arguments: [.bytes([1, 2]), .int32(3)])]) + [6, 0]
                + worker([.callbackFailed(id: 1, message: "callback 'c' of f failed")]),
        ]
    }
}

extension UInt8 {
    fileprivate var nonZero: UInt8? { self == 0 ? nil : self }
}
