/// A message from the host to the worker. See `FrameKind` for the meaning of each.
package enum HostMessage: Equatable, Sendable {
    case hello(Hello)
    case request(id: UInt64, bytes: [UInt8])
    /// A request whose bytes lie in the host's shared-memory region.
    case sharedRequest(id: UInt64, SharedMemoryLocation)
    case call(id: UInt64, function: UInt32, arguments: [FunctionValue])
    case cancel(id: UInt64)
    case shutdown

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
        case .request(let id, let bytes):
            return Frame(header: FrameHeader(kind: .request, requestID: id, payloadLength: bytes.count), payload: bytes)
        case .sharedRequest(let id, let location):
            let payload = location.encoded
            return Frame(
                header: FrameHeader(kind: .request, flags: .sharedMemory, requestID: id, payloadLength: payload.count), payload: payload)
        case .call(let id, let function, let arguments):
            kind = .call
            requestID = id
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
        if frame.header.flags.contains(.sharedMemory) {
            guard frame.header.kind == .request else {
                throw .invalidHeader("the shared-memory flag is only allowed on requests, found it on \(frame.header.kind)")
            }
            self = .sharedRequest(id: id, try SharedMemoryLocation(frame.payload))
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
            self = .request(id: id, bytes: frame.payload)
            return
        case .call:
            let function = try reader.readUInt32()
            let arguments = try reader.readArray { (reader) throws(WireError) in try reader.readFunctionValue() }
            self = .call(id: id, function: function, arguments: arguments)
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
        write(load.confinement.allowsNetwork)
        write(load.confinement.allowsProcesses)
        write(load.confinement.readablePaths)
        write(load.confinement.writablePaths)
        write(load.confinement.requiresEveryLayer)
        write(load.confinement.disabled)
        write(load.confinement.skippedLayers)
        write(load.mode.rawValue)
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
            maxMessageBytes: try readUInt64()
        )
        load.confinement = ConfinementRequest(
            allowsNetwork: try readBool(),
            allowsProcesses: try readBool(),
            readablePaths: try readStrings(),
            writablePaths: try readStrings(),
            requiresEveryLayer: try readBool(),
            disabled: try readBool(),
            skippedLayers: try readStrings()
        )
        let rawMode = try readUInt8()
        guard let mode = LoadMode(rawValue: rawMode) else { throw .malformedPayload("unknown load mode \(rawMode)") }
        load.mode = mode
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
