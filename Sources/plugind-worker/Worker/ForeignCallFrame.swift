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
///
/// A struct argument, by pointer or by value, is a `WorkerStruct` the frame makes and frees; so
/// are a struct the function returns by value and the struct of an out
/// handle of a struct kind, until `outputs` gives it to the handle table. A handle of a struct
/// kind passed in brings its own, which the frame sets and reads but never frees.
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
    /// The struct of each struct argument and struct handle, by parameter index.
    private var structs: [Int: WorkerStruct] = [:]
    /// The structs the frame made and frees, unless the handle table took them.
    private var ownedStructs: [Int: WorkerStruct] = [:]
    /// Where `ffi_call` writes a struct the function returns by value; nil for other returns.
    private(set) var returnedStruct: UnsafeMutableRawPointer?

    private static let slotSize = 16

    /// Nil when memory for a copy cannot be had. `handles` holds each handle the call passes, by
    /// parameter index, as the worker's handle table gave it: its pointer, and for a struct kind
    /// its struct (empty when the call passes none).
    init?(
        signature: FunctionSignature, arguments: FunctionArguments, handles: [HandleTable.Use?],
        callbacks: [Int: UnsafeMutableRawPointer] = [:]
    ) {
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
                    ForeignValue.store(value, at: cSlot)
                }
            case .pointer(let value):
                let pointee = pointees + index * Self.slotSize
                ForeignValue.store(value, at: pointee)
                cSlot.storeBytes(of: pointee, as: UnsafeMutableRawPointer?.self)
            case .buffer(let content, let capacity):
                let memory = copied(content, capacity: capacity)
                if let memory { buffers[index] = (memory, capacity) }
                complete = complete && memory != nil
                cSlot.storeBytes(of: memory, as: UnsafeMutableRawPointer?.self)
            case .null:
                cSlot.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
            case .handle:
                let use = index < handles.count ? handles[index] : nil
                cSlot.storeBytes(of: use?.pointer, as: UnsafeMutableRawPointer?.self)
                if let resident = use?.resident { structs[index] = resident }
            case .handleOut where signature.parameters[index].fields == nil:
                // The pointee slot is zero: the handle is NULL until the function writes one.
                cSlot.storeBytes(of: pointees + index * Self.slotSize, as: UnsafeMutableRawPointer?.self)
            case .callback:
                cSlot.storeBytes(of: callbacks[index], as: UnsafeMutableRawPointer?.self)
            case .handleOut, .structure, .structureValue:
                let made = signature.parameters[index].fields.flatMap { WorkerStruct(layout: $0.layout) }
                structs[index] = made
                ownedStructs[index] = made
                complete = complete && made != nil
                if case .structureValue = slot {
                    // libffi copies a struct argument from where its value pointer points.
                    values[slotIndex - 1] = made?.memory
                } else {
                    cSlot.storeBytes(of: made?.memory, as: UnsafeMutableRawPointer?.self)
                }
            }
            if let settings = arguments.fieldSettings[index] {
                complete = complete && structs[index]?.apply(settings) == true
            }
        }
        if let returned = signature.returnedStruct {
            // libffi may store whole registers of a struct returned in them: room for two.
            let made = WorkerStruct(layout: returned.layout, minimumBytes: 16)
            structs[signature.returnIndex] = made
            ownedStructs[signature.returnIndex] = made
            returnedStruct = made?.memory
            complete = complete && made != nil
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

    /// The values of the declared outputs, in order (`FunctionSignature.outputs`); the pointer
    /// an out handle was left with gets its number from `handles`.
    func outputs(handles: HandleTable) -> [FunctionValue] {
        signature.outputs.map { output in
            if let field = output.field { return structs[output.parameter]?.value(of: field) ?? .void }
            if let made = ownedStructs[output.parameter], case .handle(let kind, .out) = signature.parameters[output.parameter].kind {
                // The library initialised the struct the worker made: the table keeps it now.
                ownedStructs[output.parameter] = nil
                return .handle(FunctionHandle(kind: kind, id: handles.register(made, kind: kind)))
            }
            switch signature.parameters[output.parameter].kind {
            case .pointer(let type, _):
                return ForeignValue.load(type, at: pointees + output.parameter * Self.slotSize)
            case .buffer(let buffer):
                guard let (memory, capacity) = buffers[output.parameter] else { return .bytes([]) }
                var used = capacity
                if case .length(let counter) = buffer.count, case .pointer(let type, _) = signature.parameters[counter].kind {
                    let width = UInt64(buffer.element.byteWidth)
                    // Checked before anything is copied: a length beyond the capacity copies nothing.
                    guard let count = ForeignValue.load(type, at: pointees + counter * Self.slotSize).asCount,
                        count <= UInt64(capacity) / width
                    else { return .bytes([]) }
                    used = Int(count * width)
                }
                return .bytes(Array(UnsafeRawBufferPointer(start: memory, count: used)))
            case .handle(let kind, _):
                let pointer = (pointees + output.parameter * Self.slotSize).load(as: UnsafeMutableRawPointer?.self)
                return .handle(FunctionHandle(kind: kind, id: handles.number(of: pointer, kind: kind)))
            case .value, .null, .structure, .structureValue, .callback:
                return .void
            }
        }
    }

    func release() {
        for made in ownedStructs.values { made.free() }
        ownedStructs = [:]
        structs = [:]
        for memory in ownedMemory { free(memory) }
        ownedMemory = []
        buffers = [:]
        values.deallocate()
        slots.deallocate()
        pointees.deallocate()
    }
}
