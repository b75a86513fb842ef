/// A message from the worker to the host. See `FrameKind` for the meaning of each.
package enum WorkerMessage: Equatable, Sendable {
    case ready(Ready)
    case loadFailed(LoadFailure)
    case response(id: UInt64, bytes: [UInt8])
    /// A response whose bytes lie in the worker's shared-memory region.
    case sharedResponse(id: UInt64, SharedMemoryLocation)
    case failure(id: UInt64, PluginFailure)
    case callResult(id: UInt64, FunctionCallReply)
    /// A call result whose encoding (`FunctionCallReply`) lies in the worker's shared-memory
    /// region: a large out buffer crosses in one copy, not through the ring a piece at a time.
    case sharedCallResult(id: UInt64, SharedMemoryLocation)
    case callFailed(id: UInt64, message: String)
    case callbackFailed(id: UInt64, message: String)
    case cancelled(id: UInt64)
    case event(requestID: UInt64, bytes: [UInt8])
    case progress(requestID: UInt64, completed: UInt64, total: UInt64)
    case log(level: PluginLogLevel, message: String)
    case fatalSignal(FatalSignalReport)
    /// A thread's stack: after `fatalSignal` (request 0), or where request `id` is, when the host asked.
    case stackReport(requestID: UInt64, StackReport)
    case sandboxRefusal(SandboxRefusal)
    case goodbye
    case connectionAccepted(UInt32)
    case connectionRefused(UInt32, reason: String)
    case ask(id: UInt64, connection: UInt32, bytes: [UInt8])
    case askCancelled(id: UInt64)
    /// The library called the callback at `parameter` of typed call `call`: ask `id` waits for
    /// the host's handler.
    case callback(id: UInt64, call: UInt64, parameter: UInt32, arguments: [FunctionValue])

    /// The frame for this message.
    package func encode() -> Frame {
        var writer = PayloadWriter()
        let kind: FrameKind
        var requestID: UInt64 = 0
        switch self {
        case .ready(let ready):
            kind = .ready
            writer.write(ready.protocolVersion)
            writer.write(ready.pluginABIVersion)
            writer.write(ready.features)
            writer.write(ready.pluginName)
            writer.write(ready.pluginVersion)
            writer.write(ready.hasRequestHandler)
            writer.write(ready.confinement) { writer, layer in
                writer.write(layer.layer)
                writer.write(layer.state.rawValue)
                writer.write(layer.detail)
            }
            writer.write(ready.workerProcessIdentifier)
            writer.write(ready.concurrency)
        case .loadFailed(let failure):
            kind = .loadFailed
            writer.write(failure.kind.rawValue)
            writer.write(failure.message)
            writer.write(failure.pluginCode)
        case .response(let id, let bytes):
            return Frame(header: FrameHeader(kind: .response, requestID: id, payloadLength: bytes.count), payload: bytes)
        case .sharedResponse(let id, let location):
            let payload = location.encoded
            return Frame(
                header: FrameHeader(kind: .response, flags: .sharedMemory, requestID: id, payloadLength: payload.count), payload: payload)
        case .sharedCallResult(let id, let location):
            let payload = location.encoded
            return Frame(
                header: FrameHeader(kind: .callResult, flags: .sharedMemory, requestID: id, payloadLength: payload.count), payload: payload)
        case .failure(let id, let failure):
            kind = .failure
            requestID = id
            writer.write(failure.code)
            writer.write(failure.message)
        case .callResult(let id, let reply):
            kind = .callResult
            requestID = id
            writer.write(reply)
        case .callFailed(let id, let message):
            kind = .callFailed
            requestID = id
            writer.write(message)
        case .callbackFailed(let id, let message):
            kind = .callbackFailed
            requestID = id
            writer.write(message)
        case .cancelled(let id):
            kind = .cancelled
            requestID = id
        case .event(let id, let bytes):
            return Frame(header: FrameHeader(kind: .event, requestID: id, payloadLength: bytes.count), payload: bytes)
        case .progress(let id, let completed, let total):
            kind = .progress
            requestID = id
            writer.write(completed)
            writer.write(total)
        case .log(let level, let message):
            kind = .log
            writer.write(level.rawValue)
            writer.write(message)
        case .fatalSignal(let report):
            kind = .fatalSignal
            writer.write(report.signal)
            writer.write(report.code)
            writer.write(report.faultAddress)
            writer.write(report.addressSpaceBytes)
            writer.write(report.openDescriptors)
        case .sandboxRefusal(let refusal):
            kind = .sandboxRefusal
            writer.write(refusal.call)
            writer.write(refusal.detail)
            writer.write(refusal.layer.rawValue)
            writer.write(refusal.errorNumber)
            writer.write(refusal.dropped)
        case .stackReport(let id, let report):
            let payload = report.encoded
            return Frame(header: FrameHeader(kind: .stackReport, requestID: id, payloadLength: payload.count), payload: payload)
        case .goodbye:
            kind = .goodbye
        case .connectionAccepted(let connection):
            return Frame(header: FrameHeader(kind: .connectionAccepted, payloadLength: 0, connection: connection), payload: [])
        case .connectionRefused(let connection, let reason):
            writer.write(reason)
            return Frame(
                header: FrameHeader(kind: .connectionRefused, payloadLength: writer.bytes.count, connection: connection),
                payload: writer.bytes)
        case .ask(let id, let connection, let bytes):
            return Frame(header: FrameHeader(kind: .ask, requestID: id, payloadLength: bytes.count, connection: connection), payload: bytes)
        case .askCancelled(let id):
            kind = .askCancelled
            requestID = id
        case .callback(let id, let call, let parameter, let arguments):
            kind = .callback
            requestID = id
            writer.write(call)
            writer.write(parameter)
            writer.write(arguments) { $0.write($1) }
        }
        return Frame(header: FrameHeader(kind: kind, requestID: requestID, payloadLength: writer.bytes.count), payload: writer.bytes)
    }

    /// Decodes a frame the host received.
    package init(_ frame: Frame) throws(WireError) {
        var reader = PayloadReader(frame.payload)
        let id = frame.header.requestID
        guard frame.header.kind.carriesRequestID || id == 0 else {
            throw .malformedPayload("a \(frame.header.kind) message carries no request identifier, found \(id)")
        }
        if frame.header.flags.contains(.sharedMemory) {
            switch frame.header.kind {
            case .response: self = .sharedResponse(id: id, try SharedMemoryLocation(frame.payload))
            case .callResult: self = .sharedCallResult(id: id, try SharedMemoryLocation(frame.payload))
            default:
                throw .invalidHeader(
                    "the shared-memory flag is only allowed on responses and call results, found it on \(frame.header.kind)")
            }
            return
        }
        switch frame.header.kind {
        case .ready:
            let version = try reader.readUInt16()
            let abi = try reader.readUInt32()
            let features = try reader.readStrings()
            let name = try reader.readString()
            let pluginVersion = try reader.readString()
            let hasHandler = try reader.readBool()
            let layers = try reader.readArray { (reader) throws(WireError) -> ConfinementLayerReport in
                let layer = try reader.readString()
                let rawState = try reader.readUInt8()
                guard let state = ConfinementLayerReport.State(rawValue: rawState) else {
                    throw .malformedPayload("unknown confinement state \(rawState)")
                }
                return ConfinementLayerReport(layer: layer, state: state, detail: try reader.readString())
            }
            let pid = try reader.readInt32()
            let concurrency = try reader.readUInt32()
            self = .ready(
                Ready(
                    protocolVersion: version,
                    pluginABIVersion: abi,
                    features: features,
                    pluginName: name,
                    pluginVersion: pluginVersion,
                    hasRequestHandler: hasHandler,
                    confinement: layers,
                    workerProcessIdentifier: pid,
                    concurrency: concurrency
                )
            )
        case .loadFailed:
            let rawKind = try reader.readUInt8()
            guard let kind = LoadFailure.Kind(rawValue: rawKind) else {
                throw .malformedPayload("unknown load failure kind \(rawKind)")
            }
            self = .loadFailed(LoadFailure(kind: kind, message: try reader.readString(), pluginCode: try reader.readInt32()))
        case .response:
            self = .response(id: id, bytes: frame.payload)
            return
        case .failure:
            self = .failure(id: id, PluginFailure(code: try reader.readInt32(), message: try reader.readString()))
        case .callResult:
            self = .callResult(id: id, try reader.readFunctionCallReply())
        case .callFailed:
            self = .callFailed(id: id, message: try reader.readString())
        case .callbackFailed:
            self = .callbackFailed(id: id, message: try reader.readString())
        case .cancelled:
            self = .cancelled(id: id)
        case .event:
            self = .event(requestID: id, bytes: frame.payload)
            return
        case .progress:
            self = .progress(requestID: id, completed: try reader.readUInt64(), total: try reader.readUInt64())
        case .log:
            let rawLevel = try reader.readUInt8()
            guard let level = PluginLogLevel(rawValue: rawLevel) else {
                throw .malformedPayload("unknown log level \(rawLevel)")
            }
            self = .log(level: level, message: try reader.readString())
        case .fatalSignal:
            self = .fatalSignal(
                FatalSignalReport(
                    signal: try reader.readInt32(),
                    code: try reader.readInt32(),
                    faultAddress: try reader.readUInt64(),
                    addressSpaceBytes: try reader.readUInt64(),
                    openDescriptors: try reader.readUInt64()
                )
            )
        case .stackReport:
            self = .stackReport(requestID: id, try StackReport(payload: frame.payload))
            return
        case .sandboxRefusal:
            let call = try reader.readString()
            let detail = try reader.readString()
            let rawLayer = try reader.readUInt8()
            guard let layer = SandboxRefusal.Layer(rawValue: rawLayer) else {
                throw .malformedPayload("unknown confinement layer \(rawLayer)")
            }
            self = .sandboxRefusal(
                SandboxRefusal(
                    call: call, detail: detail, layer: layer, errorNumber: try reader.readInt32(), dropped: try reader.readUInt32()))
        case .goodbye:
            self = .goodbye
        case .connectionAccepted:
            self = .connectionAccepted(frame.header.connection)
        case .connectionRefused:
            self = .connectionRefused(frame.header.connection, reason: try reader.readString())
        case .ask:
            self = .ask(id: id, connection: frame.header.connection, bytes: frame.payload)
            return
        case .askCancelled:
            self = .askCancelled(id: id)
        case .callback:
            let call = try reader.readUInt64()
            let parameter = try reader.readUInt32()
            let count = try reader.readCount()
            guard count <= FunctionSignature.maximumParameters else {
                throw .malformedPayload("a callback with \(count) arguments; a callback has at most \(FunctionSignature.maximumParameters)")
            }
            var arguments: [FunctionValue] = []
            for _ in 0..<count { arguments.append(try reader.readFunctionValue()) }
            self = .callback(id: id, call: call, parameter: parameter, arguments: arguments)
        default:
            throw .unknownKind(frame.header.kind.rawValue)
        }
        try reader.finish("\(frame.header.kind) message")
    }
}
