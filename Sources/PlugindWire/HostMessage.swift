/// A message from the host to the worker. See `FrameKind` for the meaning of each.
package enum HostMessage: Equatable, Sendable {
    case hello(Hello)
    case request(id: UInt64, connection: UInt32, bytes: [UInt8])
    /// A request whose bytes lie in the host's shared-memory region.
    case sharedRequest(id: UInt64, connection: UInt32, SharedMemoryLocation)
    case call(id: UInt64, function: UInt32, arguments: [FunctionValue])
    case cancel(id: UInt64)
    case shutdown
    case openConnection(UInt32, hostIdentifier: String)
    case closeConnection(UInt32)
    case answer(ask: UInt64, bytes: [UInt8])
    case askFailed(ask: UInt64, AskFailure)
    /// A request sent while the plugin waits for the answer to `ask`, for the thread that asked.
    case nestedRequest(id: UInt64, connection: UInt32, ask: UInt64, bytes: [UInt8])
    /// A typed call sent while the library waits for the answer to callback `ask`.
    case nestedCall(id: UInt64, ask: UInt64, function: UInt32, arguments: [FunctionValue])

    /// The frame for this message.
    package func encode() -> Frame {
        var writer = PayloadWriter()
        let kind: FrameKind
        var requestID: UInt64 = 0
        switch self {
        case .hello(let hello):
            kind = .hello
            writer.write(hello.minimumProtocolVersion)
            writer.write(hello.maximumProtocolVersion)
            writer.write(hello.features)
            writer.write(hello.load)
        case .request(let id, let connection, let bytes):
            return Frame(
                header: FrameHeader(kind: .request, requestID: id, payloadLength: bytes.count, connection: connection), payload: bytes)
        case .sharedRequest(let id, let connection, let location):
            let payload = location.encoded
            return Frame(
                header: FrameHeader(
                    kind: .request, flags: .sharedMemory, requestID: id, payloadLength: payload.count, connection: connection),
                payload: payload)
        case .openConnection(let connection, let hostIdentifier):
            writer.write(hostIdentifier)
            return Frame(
                header: FrameHeader(kind: .openConnection, payloadLength: writer.bytes.count, connection: connection),
                payload: writer.bytes)
        case .closeConnection(let connection):
            return Frame(header: FrameHeader(kind: .closeConnection, payloadLength: 0, connection: connection), payload: [])
        case .answer(let ask, let bytes):
            return Frame(header: FrameHeader(kind: .answer, requestID: ask, payloadLength: bytes.count), payload: bytes)
        case .askFailed(let ask, let failure):
            kind = .askFailed
            requestID = ask
            writer.write(failure.reason.rawValue)
            writer.write(failure.code)
            writer.write(failure.message)
        case .nestedRequest(let id, let connection, let ask, let bytes):
            writer.write(ask)
            let payload = writer.bytes + bytes
            return Frame(
                header: FrameHeader(kind: .nestedRequest, requestID: id, payloadLength: payload.count, connection: connection),
                payload: payload)
        case .call(let id, let function, let arguments):
            kind = .call
            requestID = id
            writer.write(function)
            writer.write(arguments) { $0.write($1) }
        case .nestedCall(let id, let ask, let function, let arguments):
            kind = .nestedCall
            requestID = id
            writer.write(ask)
            writer.write(function)
            writer.write(arguments) { $0.write($1) }
        case .cancel(let id):
            kind = .cancel
            requestID = id
        case .shutdown:
            kind = .shutdown
        }
        return Frame(header: FrameHeader(kind: kind, requestID: requestID, payloadLength: writer.bytes.count), payload: writer.bytes)
    }

    /// Decodes a frame the worker received.
    package init(_ frame: Frame) throws(WireError) {
        var reader = PayloadReader(frame.payload)
        let id = frame.header.requestID
        guard frame.header.kind.carriesRequestID || id == 0 else {
            throw .malformedPayload("a \(frame.header.kind) message carries no request identifier, found \(id)")
        }
        if frame.header.flags.contains(.pollForNext), frame.header.kind != .request, frame.header.kind != .call {
            throw .invalidHeader("the poll-for-next flag is only allowed on requests and calls, found it on \(frame.header.kind)")
        }
        if frame.header.flags.contains(.sharedMemory) {
            guard frame.header.kind == .request else {
                throw .invalidHeader("the shared-memory flag is only allowed on requests, found it on \(frame.header.kind)")
            }
            self = .sharedRequest(id: id, connection: frame.header.connection, try SharedMemoryLocation(frame.payload))
            return
        }
        switch frame.header.kind {
        case .hello:
            let minimum = try reader.readUInt16()
            let maximum = try reader.readUInt16()
            let features = try reader.readStrings()
            let load = try reader.readLoadConfiguration()
            self = .hello(Hello(minimumProtocolVersion: minimum, maximumProtocolVersion: maximum, features: features, load: load))
        case .request:
            self = .request(id: id, connection: frame.header.connection, bytes: frame.payload)
            return
        case .openConnection:
            self = .openConnection(frame.header.connection, hostIdentifier: try reader.readString())
        case .closeConnection:
            self = .closeConnection(frame.header.connection)
        case .answer:
            self = .answer(ask: id, bytes: frame.payload)
            return
        case .askFailed:
            let rawReason = try reader.readUInt8()
            guard let reason = AskFailure.Reason(rawValue: rawReason) else {
                throw .malformedPayload("unknown ask failure reason \(rawReason)")
            }
            self = .askFailed(ask: id, AskFailure(reason: reason, code: try reader.readInt32(), message: try reader.readString()))
        case .nestedRequest:
            let ask = try reader.readUInt64()
            self = .nestedRequest(id: id, connection: frame.header.connection, ask: ask, bytes: Array(frame.payload.dropFirst(8)))
            return
        case .call:
            let function = try reader.readUInt32()
            let arguments = try reader.readArray { (reader) throws(WireError) in try reader.readFunctionValue() }
            self = .call(id: id, function: function, arguments: arguments)
        case .nestedCall:
            let ask = try reader.readUInt64()
            let function = try reader.readUInt32()
            let arguments = try reader.readArray { (reader) throws(WireError) in try reader.readFunctionValue() }
            self = .nestedCall(id: id, ask: ask, function: function, arguments: arguments)
        case .cancel:
            self = .cancel(id: id)
        case .shutdown:
            self = .shutdown
        default:
            throw .unknownKind(frame.header.kind.rawValue)
        }
        try reader.finish("\(frame.header.kind) message")
    }
}

extension PayloadWriter {
    package mutating func write(_ load: LoadConfiguration) {
        write(load.pluginIdentifier)
        write(load.libraryPath)
        write(load.libraryDescriptor)
        write(load.bundlePath)
        write(load.view) { $0.write($1) }
        write(load.functions) { $0.write($1) }
        write(load.requiresEntryPoint)
        write(load.limits.addressSpaceBytes)
        write(load.limits.cpuSeconds)
        write(load.limits.openFiles)
        write(load.limits.tasks)
        write(load.limits.maxMessageBytes)
        write(load.limits.fileBytes)
        write(load.confinement.allowsNetwork)
        write(load.confinement.allowsProcesses)
        write(load.confinement.allowsSymlinks)
        write(load.confinement.readablePaths)
        write(load.confinement.writablePaths)
        write(load.confinement.requiresEveryLayer)
        write(load.confinement.disabled)
        write(load.confinement.skippedLayers)
        write(load.mode.rawValue)
        write(load.concurrency)
        write(load.askTimeoutMilliseconds)
        // Last and only when there are some: a hello without them reads as before.
        let accepted = load.confinement.acceptedMissingLayers
        let adapter = load.adapter
        if !load.preloadLibraries.isEmpty || !accepted.isEmpty || adapter != nil { write(load.preloadLibraries) }
        if !accepted.isEmpty || adapter != nil { write(accepted) }
        if let adapter {
            write(adapter.abi.rawValue)
            write(adapter.plugin)
            write(adapter.dataBytes)
        }
    }

    mutating func write(_ operation: ViewOperation) {
        switch operation {
        case .bind(let source, let path, let writable):
            write(UInt8(1))
            write(source)
            write(path)
            write(writable)
        case .symlink(let path, let target):
            write(UInt8(2))
            write(path)
            write(target)
        case .directory(let path):
            write(UInt8(3))
            write(path)
        case .sealed(let path, let descriptor):
            write(UInt8(4))
            write(path)
            write(descriptor)
        case .scratch(let path, let bytes):
            write(UInt8(5))
            write(path)
            write(bytes)
        }
    }
}

extension PayloadReader {
    package mutating func readLoadConfiguration() throws(WireError) -> LoadConfiguration {
        var load = LoadConfiguration(pluginIdentifier: try readString(), libraryPath: try readString())
        load.libraryDescriptor = try readInt32()
        load.bundlePath = try readString()
        load.view = try readArray { (reader) throws(WireError) in try reader.readViewOperation() }
        load.functions = try readArray { (reader) throws(WireError) in try reader.readFunctionSignature() }
        load.requiresEntryPoint = try readBool()
        load.limits = ResourceLimits(
            addressSpaceBytes: try readUInt64(),
            cpuSeconds: try readUInt64(),
            openFiles: try readUInt64(),
            tasks: try readUInt64(),
            maxMessageBytes: try readUInt64(),
            fileBytes: try readUInt64()
        )
        load.confinement = ConfinementRequest(
            allowsNetwork: try readBool(),
            allowsProcesses: try readBool(),
            allowsSymlinks: try readBool(),
            readablePaths: try readStrings(),
            writablePaths: try readStrings(),
            requiresEveryLayer: try readBool(),
            disabled: try readBool(),
            skippedLayers: try readStrings()
        )
        let rawMode = try readUInt8()
        guard let mode = LoadMode(rawValue: rawMode) else { throw .malformedPayload("unknown load mode \(rawMode)") }
        load.mode = mode
        load.concurrency = try readUInt32()
        load.askTimeoutMilliseconds = try readUInt32()
        if remaining > 0 { load.preloadLibraries = try readStrings() }
        if remaining > 0 { load.confinement.acceptedMissingLayers = try readStrings() }
        if remaining > 0 {
            let code = try readUInt8()
            guard let abi = ForeignPluginAdapter.ABI(rawValue: code) else { throw .malformedPayload("unknown foreign ABI \(code)") }
            load.adapter = ForeignPluginAdapter(abi: abi, plugin: try readString(), dataBytes: try readUInt64())
        }
        return load
    }

    mutating func readViewOperation() throws(WireError) -> ViewOperation {
        let kind = try readUInt8()
        switch kind {
        case 1: return .bind(source: try readString(), path: try readString(), writable: try readBool())
        case 2: return .symlink(path: try readString(), target: try readString())
        case 3: return .directory(path: try readString())
        case 4: return .sealed(path: try readString(), descriptor: try readInt32())
        case 5: return .scratch(path: try readString(), bytes: try readUInt64())
        default: throw .malformedPayload("unknown view operation \(kind)")
        }
    }
}
