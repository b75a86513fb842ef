import Glibc
import PlugindWire

/// A declared struct in the worker's memory, zeroed when made, with the buffers bound to its
/// pointer fields: for one call (a `struct` argument), or for the life of a handle (a struct
/// kind, such as `z_stream`, which must not move while the library keeps pointers into it).
///
/// The host never writes a pointer field: a buffer field points to memory bound here, which
/// lives until the field is bound again or the struct is freed — so a stream the library has
/// not finished reading keeps its input between calls. What the library writes into pointer
/// fields is never followed, except a string field's, which is read up to a bound.
///
/// `@unchecked Sendable`: a handle's struct is used by one call at a time (the handle table
/// refuses a second), and a call's struct by that call alone.
final class WorkerStruct: @unchecked Sendable {
    let layout: FunctionStruct
    let memory: UnsafeMutableRawPointer
    /// The memory bound to each buffer field, and its capacity in bytes.
    private var bound: [String: (memory: UnsafeMutableRawPointer, capacity: Int)] = [:]

    /// The most bytes of a string field read: a message such as `z_stream.msg`.
    static let maximumStringBytes = 4096

    /// Nil when the memory cannot be had. `minimumBytes`: room to make beyond the struct's size.
    init?(layout: FunctionStruct, minimumBytes: Int = 0) {
        var memory: UnsafeMutableRawPointer?
        let size = max(layout.size, minimumBytes)
        guard posix_memalign(&memory, max(layout.alignment, MemoryLayout<UnsafeRawPointer>.size), size) == 0, let memory else {
            return nil
        }
        memset(memory, 0, size)
        self.layout = layout
        self.memory = memory
    }

    /// Sets what a call gives: scalars in place, buffers bound to fresh memory (the caller's
    /// bytes, or zeroed room). False when memory for a buffer cannot be had.
    func apply(_ settings: [FunctionArguments.FieldSetting]) -> Bool {
        for setting in settings {
            guard let field = layout.field(named: setting.field) else { continue }
            let location = memory + field.offset
            switch setting.value {
            case .value(let value):
                ForeignValue.store(value, at: location)
            case .buffer(let content, let capacity):
                guard let buffer = calloc(max(capacity, 1), 1) else { return false }
                content.withUnsafeBytes { source in
                    if let base = source.baseAddress { buffer.copyMemory(from: base, byteCount: min(content.count, capacity)) }
                }
                if let previous = bound[field.name] { Glibc.free(previous.memory) }
                bound[field.name] = (buffer, capacity)
                location.storeBytes(of: buffer, as: UnsafeMutableRawPointer?.self)
            }
        }
        return true
    }

    /// The value of `field` after a call. An out buffer's bytes are counted by its count field
    /// (what the library used, or the room less what it left when the field `advances`),
    /// never past the memory bound to it: a count beyond that gives no bytes, and the host,
    /// which reads the count too, refuses the result.
    func value(of name: String) -> FunctionValue {
        guard let field = layout.field(named: name) else { return .void }
        let location = UnsafeRawPointer(memory + field.offset)
        switch field.kind {
        case .scalar(let type):
            return ForeignValue.load(type, at: location)
        case .string:
            guard let text = location.load(as: UnsafePointer<CChar>?.self) else { return .string("") }
            let length = strnlen(text, Self.maximumStringBytes)
            return .string(String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self))
        case .buffer(_, let element, let counter, let advances):
            guard let binding = bound[name], let countField = layout.field(named: counter), case .scalar(let type) = countField.kind,
                let count = ForeignValue.load(type, at: UnsafeRawPointer(memory + countField.offset)).asCount
            else { return .bytes([]) }
            let width = UInt64(element.byteWidth)
            guard count <= UInt64(binding.capacity) / width else { return .bytes([]) }
            let used = advances ? binding.capacity - Int(count * width) : Int(count * width)
            return .bytes(Array(UnsafeRawBufferPointer(start: binding.memory, count: used)))
        }
    }

    /// Frees the struct and every buffer bound to it; nothing may use it afterwards.
    func free() {
        for binding in bound.values { Glibc.free(binding.memory) }
        bound = [:]
        Glibc.free(memory)
    }
}
