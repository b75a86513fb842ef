import CFFI
import Glibc
import PlugindWire

/// The manifest-declared functions of a plugin, each resolved and with its libffi call interface
/// prepared once at load. Part of the worker's loader: it calls into plugin code through raw
/// pointers.
struct ForeignFunctionTable {
    private struct Entry {
        let signature: FunctionSignature
        let function: UnsafeMutableRawPointer
        let interface: UnsafeMutablePointer<ffi_cif>
    }

    private let entries: [Entry]

    /// Why a call was refused before the function ran.
    struct Refusal: Error {
        let message: String
    }

    init(library: UnsafeMutableRawPointer, path: String, signatures: [FunctionSignature]) throws(LoadFailure) {
        var entries: [Entry] = []
        for signature in signatures {
            _ = dlerror()
            guard let function = dlsym(library, signature.name) else {
                throw LoadFailure(
                    kind: .symbolMissing,
                    message: "function '\(signature.name)' declared in the manifest is not exported by \(path)"
                )
            }
            let parameterTypes = signature.arguments.flatMap(Self.parameterTypes(for:))
            let types = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: max(parameterTypes.count, 1))
            for (index, type) in parameterTypes.enumerated() { types[index] = type }
            let interface = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
            let status = ffi_prep_cif(
                interface,
                FFI_DEFAULT_ABI,
                UInt32(parameterTypes.count),
                Self.returnType(for: signature.returns),
                types
            )
            guard status == FFI_OK else {
                throw LoadFailure(
                    kind: .invalidConfiguration,
                    message: "libffi cannot prepare a call to \(signature) (status \(status.rawValue))"
                )
            }
            entries.append(Entry(signature: signature, function: function, interface: interface))
        }
        self.entries = entries
    }

    /// Checks the arguments against the declaration, then calls the function.
    func call(_ index: UInt32, arguments: [FunctionValue]) -> Result<FunctionValue, Refusal> {
        guard Int(index) < entries.count else {
            return .failure(Refusal(message: "no function with index \(index) (the manifest declares \(entries.count))"))
        }
        let entry = entries[Int(index)]
        let signature = entry.signature
        guard arguments.count == signature.arguments.count else {
            return .failure(
                Refusal(message: "\(signature.name) takes \(signature.arguments.count) arguments, got \(arguments.count)")
            )
        }
        for (position, (argument, declared)) in zip(arguments, signature.arguments).enumerated()
        where argument.type != declared {
            return .failure(
                Refusal(message: "argument \(position + 1) of \(signature.name) must be \(declared), got \(argument.type)")
            )
        }
        for (position, argument) in arguments.enumerated() {
            if case .string(let text) = argument, text.utf8.contains(0) {
                return .failure(Refusal(message: "argument \(position + 1) of \(signature.name) contains a NUL byte"))
            }
        }

        let storage = ArgumentStorage(arguments)
        defer { storage.release() }
        var result = (UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &result) { returnBuffer in
            ffi_call(
                entry.interface,
                unsafeBitCast(entry.function, to: (@convention(c) () -> Void).self),
                returnBuffer.baseAddress,
                storage.values
            )
        }
        return Self.decodeReturn(result, as: signature.returns, function: signature.name)
    }

    private static func decodeReturn(
        _ raw: (UInt64, UInt64),
        as type: FunctionValueType,
        function: String
    ) -> Result<FunctionValue, Refusal> {
        // libffi widens integral results smaller than a register to a full ffi_arg.
        let word = raw.0
        switch type {
        case .void: return .success(.void)
        case .bool: return .success(.bool(UInt8(truncatingIfNeeded: word) != 0))
        case .int8: return .success(.int8(Int8(truncatingIfNeeded: word)))
        case .uint8: return .success(.uint8(UInt8(truncatingIfNeeded: word)))
        case .int16: return .success(.int16(Int16(truncatingIfNeeded: word)))
        case .uint16: return .success(.uint16(UInt16(truncatingIfNeeded: word)))
        case .int32: return .success(.int32(Int32(truncatingIfNeeded: word)))
        case .uint32: return .success(.uint32(UInt32(truncatingIfNeeded: word)))
        case .int64: return .success(.int64(Int64(bitPattern: word)))
        case .uint64: return .success(.uint64(word))
        case .float: return .success(.float(Float(bitPattern: UInt32(truncatingIfNeeded: word))))
        case .double: return .success(.double(Double(bitPattern: word)))
        case .string:
            guard let pointer = UnsafePointer<CChar>(bitPattern: UInt(word)) else {
                return .failure(Refusal(message: "\(function) returned a NULL string"))
            }
            return .success(.string(String(decoding: UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)), as: UTF8.self)))
        case .bytes:
            return .failure(Refusal(message: "\(function) cannot return bytes"))
        }
    }

    private static func parameterTypes(for type: FunctionValueType) -> [UnsafeMutablePointer<ffi_type>?] {
        switch type {
        case .bytes: [plugind_ffi_type_pointer(), plugind_ffi_type_uint64()]
        default: [returnType(for: type)]
        }
    }

    private static func returnType(for type: FunctionValueType) -> UnsafeMutablePointer<ffi_type> {
        switch type {
        case .void: plugind_ffi_type_void()
        case .bool, .uint8: plugind_ffi_type_uint8()
        case .int8: plugind_ffi_type_sint8()
        case .int16: plugind_ffi_type_sint16()
        case .uint16: plugind_ffi_type_uint16()
        case .int32: plugind_ffi_type_sint32()
        case .uint32: plugind_ffi_type_uint32()
        case .int64: plugind_ffi_type_sint64()
        case .uint64: plugind_ffi_type_uint64()
        case .float: plugind_ffi_type_float()
        case .double: plugind_ffi_type_double()
        case .string, .bytes: plugind_ffi_type_pointer()
        }
    }
}

/// C storage for one call's arguments: a slot per C parameter and the array of pointers to the
/// slots that `ffi_call` takes. Strings and byte buffers are copied into malloc'd memory that
/// stays put for the duration of the call.
private struct ArgumentStorage {
    let values: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let slots: UnsafeMutableRawPointer
    private let count: Int
    private var ownedBuffers: [UnsafeMutableRawPointer] = []

    private static let slotSize = 16

    init(_ arguments: [FunctionValue]) {
        let parameterCount = arguments.reduce(0) { $0 + ($1.type == .bytes ? 2 : 1) }
        count = max(parameterCount, 1)
        values = .allocate(capacity: count)
        slots = .allocate(byteCount: count * Self.slotSize, alignment: 16)
        var index = 0
        for argument in arguments {
            let slot = slots + index * Self.slotSize
            values[index] = slot
            index += 1
            switch argument {
            case .void: break
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
            case .string(let value):
                let copy = strdup(value)
                if let copy { ownedBuffers.append(UnsafeMutableRawPointer(copy)) }
                slot.storeBytes(of: UnsafeMutableRawPointer(copy), as: UnsafeMutableRawPointer?.self)
            case .bytes(let value):
                // A non-NULL pointer even for an empty buffer, as C callers expect.
                let copy = malloc(max(value.count, 1))
                if let copy {
                    ownedBuffers.append(copy)
                    value.withUnsafeBytes { source in
                        if let base = source.baseAddress { copy.copyMemory(from: base, byteCount: value.count) }
                    }
                }
                slot.storeBytes(of: copy, as: UnsafeMutableRawPointer?.self)
                let lengthSlot = slots + index * Self.slotSize
                lengthSlot.storeBytes(of: UInt64(value.count), as: UInt64.self)
                values[index] = lengthSlot
                index += 1
            }
        }
    }

    func release() {
        for buffer in ownedBuffers { free(buffer) }
        values.deallocate()
        slots.deallocate()
    }
}
