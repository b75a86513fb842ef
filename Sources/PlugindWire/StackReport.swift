/// A thread's stack as the worker took it inside a signal handler (`stack_capture.c`): the
/// addresses of its frames and the loaded objects they lie in, unsymbolized. The host names the
/// functions from its own copies of the objects; nothing here is believed beyond its bounds: a
/// hostile worker may send any bytes, and a module path is only a key the host looks up among
/// the files it gave the worker. Every report decodes to one that encodes back to its bytes.
///
/// Payload (little-endian): reason u8, flags u8 (1: truncated), module count u8, frame count u8;
/// per module its load bias u64, start address u64, path length u16 and path (UTF-8); per frame
/// its address u64 and module index u8 (0xFF: in no loaded object).
package struct StackReport: Equatable, Sendable {
    package enum Reason: UInt8, Sendable {
        /// The faulting thread, from the fatal-signal handler.
        case fatalSignal = 0
        /// The thread serving a request, answering the host's stack signal.
        case requested = 1
    }

    package struct Module: Equatable, Sendable {
        /// The object's path as the worker's dynamic loader knows it; empty for the worker
        /// executable itself.
        package var path: String
        /// What the loader added to the object's addresses.
        package var loadBias: UInt64
        /// The lowest address of its mapping.
        package var start: UInt64

        package init(path: String, loadBias: UInt64, start: UInt64) {
            self.path = path
            self.loadBias = loadBias
            self.start = start
        }
    }

    package struct Frame: Equatable, Sendable {
        /// Frame 0: the interrupted instruction; the others: return addresses.
        package var address: UInt64
        /// Index into `modules`; nil when the address lies in no loaded object.
        package var module: Int?

        package init(address: UInt64, module: Int?) {
            self.address = address
            self.module = module
        }
    }

    package static let maximumFrames = 64
    package static let maximumModules = 16
    package static let maximumPathLength = 160

    package var reason: Reason
    package var truncated: Bool
    package var modules: [Module]
    package var frames: [Frame]

    package init(reason: Reason, truncated: Bool = false, modules: [Module], frames: [Frame]) {
        self.reason = reason
        self.truncated = truncated
        self.modules = modules
        self.frames = frames
    }

    package init(payload: [UInt8]) throws(WireError) {
        var reader = PayloadReader(payload)
        let rawReason = try reader.readUInt8()
        guard let reason = Reason(rawValue: rawReason) else { throw .malformedPayload("unknown stack report reason \(rawReason)") }
        self.reason = reason
        let flags = try reader.readUInt8()
        guard flags & ~1 == 0 else { throw .malformedPayload("unknown stack report flags 0x\(String(flags, radix: 16))") }
        truncated = flags & 1 != 0
        let moduleCount = Int(try reader.readUInt8())
        let frameCount = Int(try reader.readUInt8())
        guard moduleCount <= Self.maximumModules, frameCount <= Self.maximumFrames else {
            throw .malformedPayload("a stack report of \(frameCount) frames in \(moduleCount) objects exceeds the bounds")
        }
        var modules: [Module] = []
        for _ in 0..<moduleCount {
            let bias = try reader.readUInt64()
            let start = try reader.readUInt64()
            let length = Int(try reader.readUInt16())
            guard length <= Self.maximumPathLength, length <= reader.remaining else {
                throw .malformedPayload("a stack report's object path of \(length) bytes exceeds the bounds")
            }
            var bytes: [UInt8] = []
            for _ in 0..<length { bytes.append(try reader.readUInt8()) }
            guard !bytes.contains(0) else { throw .malformedPayload("a stack report's object path holds a NUL byte") }
            // Repaired, a path would stand for other bytes than it came as (and grow past the
            // bound): the worker sends UTF-8 (`plugind_shim_stack_object_path`), so only a
            // hostile one sends anything else.
            guard let path = String(validating: bytes, as: UTF8.self) else {
                throw .malformedPayload("a stack report's object path is not UTF-8")
            }
            modules.append(Module(path: path, loadBias: bias, start: start))
        }
        var frames: [Frame] = []
        for _ in 0..<frameCount {
            let address = try reader.readUInt64()
            let module = try reader.readUInt8()
            guard module == 0xFF || Int(module) < moduleCount else {
                throw .malformedPayload("a stack frame names object \(module) of \(moduleCount)")
            }
            frames.append(Frame(address: address, module: module == 0xFF ? nil : Int(module)))
        }
        try reader.finish("stack report")
        self.modules = modules
        self.frames = frames
    }

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: 4 + modules.count * 40 + frames.count * 9)
        writer.write(reason.rawValue)
        writer.write(UInt8(truncated ? 1 : 0))
        writer.write(UInt8(modules.count))
        writer.write(UInt8(frames.count))
        for module in modules {
            let path = Array(module.path.utf8)
            writer.write(module.loadBias)
            writer.write(module.start)
            writer.write(UInt16(path.count))
            for byte in path { writer.write(byte) }
        }
        for frame in frames {
            writer.write(frame.address)
            writer.write(UInt8(frame.module ?? 0xFF))
        }
        return writer.bytes
    }
}
