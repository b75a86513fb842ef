import Glibc
import PlugindWire

/// The C memory of one call: a slot per C parameter, the array of pointers to the slots that
/// `ffi_call` takes, what pointers point to, and the buffers. Strings, byte values and buffers
/// are malloc'd copies that stay put for the duration of the call; a buffer is as large as its
/// capacity (at least one byte, so that it is never NULL), zero past what the caller gave.
///
/// After the call, `outputs()` reads what the function left behind: the scalars behind `out`
/// and `inout` pointers, and each `out`/`inout` buffer, never past its capacity. A buffer counted
/// by a length the function set beyond the capacity is returned empty with that length, for the
/// host to refuse.
final class ForeignCallFrame {
    let values: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let slots: UnsafeMutableRawPointer
    /// What each pointer parameter points to, at `index * slotSize`.
    private let pointees: UnsafeMutableRawPointer
    private let slotCount: Int
    /// The buffer of each buffer parameter, and its capacity in bytes.
    private var buffers: [Int: (memory: UnsafeMutableRawPointer, capacity: Int)] = [:]
    private var ownedMemory: [UnsafeMutableRawPointer] = []
    private let signature: FunctionSignature

    private static let slotSize = 16

    /// Nil when memory for a copy cannot be had. `handles` holds the pointer of each handle the
    /// call passes, by parameter index (the worker's handle table's).
    init?(signature: FunctionSignature, arguments: FunctionArguments, handles: [Int: UnsafeMutableRawPointer]) {
        self.signature = signature
        let parameterCount = signature.parameters.count
        let cCount = signature.parameters.reduce(0) { count, parameter in
            if case .value(.bytes) = parameter.kind { return count + 2 }
            return count + 1
        }
        slotCount = max(cCount, 1)
        values = .allocate(capacity: slotCount)
        slots = .allocate(byteCount: slotCount * Self.slotSize, alignment: 16)
        pointees = .allocate(byteCount: max(parameterCount, 1) * Self.slotSize, alignment: 16)
        pointees.initializeMemory(as: UInt8.self, repeating: 0, count: max(parameterCount, 1) * Self.slotSize)
        var slotIndex = 0
        var complete = true
        for (index, slot) in arguments.slots.enumerated() {
            let cSlot = slots + slotIndex * Self.slotSize
            values[slotIndex] = cSlot
            slotIndex += 1
            switch slot {
            case .value(let value):
                if case .bytes(let bytes) = value {
                    // A non-NULL pointer even for an empty buffer, as C callers expect.
                    let copy = copied(bytes, capacity: bytes.count)
                    complete = complete && copy != nil
                    cSlot.storeBytes(of: copy, as: UnsafeMutableRawPointer?.self)
                    let lengthSlot = slots + slotIndex * Self.slotSize
                    lengthSlot.storeBytes(of: UInt64(bytes.count), as: UInt64.self)
                    values[slotIndex] = lengthSlot
                    slotIndex += 1
                } else if case .string(let text) = value {
                    let copy = strdup(text).map(UnsafeMutableRawPointer.init)
                    if let copy { ownedMemory.append(copy) }
                    complete = complete && copy != nil
                    cSlot.storeBytes(of: copy, as: UnsafeMutableRawPointer?.self)
                } else {
                    Self.store(value, at: cSlot)
                }
            case .pointer(let value):
                let pointee = pointees + index * Self.slotSize
                Self.store(value, at: pointee)
                cSlot.storeBytes(of: pointee, as: UnsafeMutableRawPointer?.self)
            case .buffer(let content, let capacity):
                let memory = copied(content, capacity: capacity)
                if let memory { buffers[index] = (memory, capacity) }
                complete = complete && memory != nil
                cSlot.storeBytes(of: memory, as: UnsafeMutableRawPointer?.self)
            case .null:
                cSlot.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
            case .handle:
                cSlot.storeBytes(of: handles[index], as: UnsafeMutableRawPointer?.self)
            case .handleOut:
                // The pointee slot is zero: the handle is NULL until the function writes one.
                cSlot.storeBytes(of: pointees + index * Self.slotSize, as: UnsafeMutableRawPointer?.self)
            }
        }
        guard complete else {
            release()
            return nil
        }
    }

    /// A zeroed malloc'd block of `capacity` bytes (at least one) starting with `bytes`.
    private func copied(_ bytes: [UInt8], capacity: Int) -> UnsafeMutableRawPointer? {
        guard let memory = calloc(max(capacity, 1), 1) else { return nil }
        ownedMemory.append(memory)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress { memory.copyMemory(from: base, byteCount: min(bytes.count, capacity)) }
        }
        return memory
    }

    private static func store(_ value: FunctionValue, at slot: UnsafeMutableRawPointer) {
        switch value {
        case .bool(let value): slot.storeBytes(of: value ? 1 : 0, as: UInt8.self)
        case .int8(let value): slot.storeBytes(of: value, as: Int8.self)
        case .uint8(let value): slot.storeBytes(of: value, as: UInt8.self)
        case .int16(let value): slot.storeBytes(of: value, as: Int16.self)
        case .uint16(let value): slot.storeBytes(of: value, as: UInt16.self)
        case .int32(let value): slot.storeBytes(of: value, as: Int32.self)
        case .uint32(let value): slot.storeBytes(of: value, as: UInt32.self)
        case .int64(let value): slot.storeBytes(of: value, as: Int64.self)
        case .uint64(let value): slot.storeBytes(of: value, as: UInt64.self)
        case .float(let value): slot.storeBytes(of: value, as: Float.self)
        case .double(let value): slot.storeBytes(of: value, as: Double.self)
        case .void, .string, .bytes, .handle: break
        }
    }

    private static func load(_ type: FunctionValueType, at slot: UnsafeRawPointer) -> FunctionValue {
        switch type {
        case .bool: .bool(slot.load(as: UInt8.self) != 0)
        case .int8: .int8(slot.load(as: Int8.self))
        case .uint8: .uint8(slot.load(as: UInt8.self))
        case .int16: .int16(slot.load(as: Int16.self))
        case .uint16: .uint16(slot.load(as: UInt16.self))
        case .int32: .int32(slot.load(as: Int32.self))
        case .uint32: .uint32(slot.load(as: UInt32.self))
        case .int64: .int64(slot.load(as: Int64.self))
        case .uint64: .uint64(slot.load(as: UInt64.self))
        case .float: .float(slot.load(as: Float.self))
        case .double: .double(slot.load(as: Double.self))
        case .void, .string, .bytes, .handle: .void
        }
    }

    /// The values of the declared outputs, in order (`FunctionSignature.outputs`); the pointer
    /// an out handle was left with gets its number from `handles`.
    func outputs(handles: HandleTable) -> [FunctionValue] {
        signature.outputs.map { output in
            switch signature.parameters[output.parameter].kind {
            case .pointer(let type, _):
                return Self.load(type, at: pointees + output.parameter * Self.slotSize)
            case .buffer(let buffer):
                guard let (memory, capacity) = buffers[output.parameter] else { return .bytes([]) }
                var used = capacity
                if case .length(let counter) = buffer.count, case .pointer(let type, _) = signature.parameters[counter].kind {
                    let width = UInt64(buffer.element.byteWidth)
                    // Checked before anything is copied: a length beyond the capacity copies nothing.
                    guard let count = Self.load(type, at: pointees + counter * Self.slotSize).asCount, count <= UInt64(capacity) / width
                    else { return .bytes([]) }
                    used = Int(count * width)
                }
                return .bytes(Array(UnsafeRawBufferPointer(start: memory, count: used)))
            case .handle(let kind, _):
                let pointer = (pointees + output.parameter * Self.slotSize).load(as: UnsafeMutableRawPointer?.self)
                return .handle(FunctionHandle(kind: kind, id: handles.number(of: pointer, kind: kind)))
            case .value, .null:
                return .void
            }
        }
    }

    func release() {
        for memory in ownedMemory { free(memory) }
        ownedMemory = []
        buffers = [:]
        values.deallocate()
        slots.deallocate()
        pointees.deallocate()
    }
}
