import CFFI
import Glibc
import PlugindWire

/// The manifest-declared functions of a plugin, each resolved and with its libffi call interface
/// prepared once at load. Part of the worker's loader: it calls into plugin code through raw
/// pointers (`ForeignCallFrame` holds a call's C memory).
struct ForeignFunctionTable {
    private struct Entry {
        let signature: FunctionSignature
        let function: UnsafeMutableRawPointer
        let interface: UnsafeMutablePointer<ffi_cif>
        /// Known at load: a call without callbacks takes no stubs, and looks for none.
        let hasCallbacks: Bool
    }

    private let entries: [Entry]
    /// The opaque pointers the library gave out, by the numbers the host holds.
    private let handles = HandleTable()
    /// `__errno_location` as the library sees it: the worker's libc's for a library that needs
    /// it, the library's own when it is a libc (a sealed copy of libc.so.6 is a second libc, with
    /// an errno of its own).
    private let errnoLocation: (@convention(c) () -> UnsafeMutablePointer<Int32>?)?

    /// Why a call was refused before the function ran, or its result could not be sent; or,
    /// when `inCallback`, why a callback failed while it ran.
    struct Refusal: Error {
        let message: String
        var inCallback = false
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
            var parameterTypes: [UnsafeMutablePointer<ffi_type>?] = []
            for parameter in signature.parameters {
                if case .structureValue = parameter.kind, let layout = parameter.fields?.layout {
                    parameterTypes.append(try ForeignStructType.make(layout).get())
                } else {
                    parameterTypes += Self.parameterTypes(for: parameter.kind)
                }
            }
            var returnType: UnsafeMutablePointer<ffi_type>?
            if let returned = signature.returnedStruct { returnType = try ForeignStructType.make(returned.layout).get() }
            let types = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: max(parameterTypes.count, 1))
            for (index, type) in parameterTypes.enumerated() { types[index] = type }
            let interface = UnsafeMutablePointer<ffi_cif>.allocate(capacity: 1)
            let status = ffi_prep_cif(
                interface,
                FFI_DEFAULT_ABI,
                UInt32(parameterTypes.count),
                returnType ?? Self.returnType(for: signature.returns),
                types
            )
            guard status == FFI_OK else {
                throw LoadFailure(
                    kind: .invalidConfiguration,
                    message: "libffi cannot prepare a call to \(signature) (status \(status.rawValue))"
                )
            }
            entries.append(
                Entry(signature: signature, function: function, interface: interface, hasCallbacks: !signature.callbacks.isEmpty))
        }
        self.entries = entries
        errnoLocation = dlsym(library, "__errno_location").map {
            unsafeBitCast($0, to: (@convention(c) () -> UnsafeMutablePointer<Int32>?).self)
        }
    }

    /// Where the library's `errno` is for the calling thread.
    private func errnoPointer() -> UnsafeMutablePointer<Int32>? {
        if let errnoLocation { return errnoLocation() }
        return __errno_location()
    }

    /// Checks the arguments against the declaration, then calls the function and collects its
    /// outputs: never more of a buffer than its capacity, whatever length the function reports.
    ///
    /// - Parameter maximumBytes: the most bytes the outputs may hold together (the message limit).
    ///   - forward: forwards the library's calls of the function's callbacks to the host.
    func call(
        _ index: UInt32, arguments: [FunctionValue], maximumBytes: Int, forward: CallbackCall.Forward? = nil
    ) -> Result<FunctionCallReply, Refusal> {
        guard Int(index) < entries.count else {
            return .failure(Refusal(message: "no function with index \(index) (the manifest declares \(entries.count))"))
        }
        let entry = entries[Int(index)]
        let signature = entry.signature
        let bound: FunctionArguments
        do {
            bound = try signature.bind(arguments)
        } catch {
            return .failure(Refusal(message: error.message))
        }
        guard bound.outputCapacity <= maximumBytes else {
            return .failure(
                Refusal(
                    message:
                        "the out buffers of \(signature.name) would hold \(bound.outputCapacity) bytes, more than the message limit of \(maximumBytes)"
                ))
        }
        var callbacks: (call: CallbackCall, stubs: [Int: (slot: UInt32, pointer: UnsafeMutableRawPointer)])?
        if entry.hasCallbacks {
            switch Self.callbackStubs(signature, bound, maximumBytes: maximumBytes, forward: forward) {
            case .success(let taken): callbacks = taken
            case .failure(let refusal): return .failure(refusal)
            }
        }
        defer { if let callbacks { CallbackPool.shared.release(callbacks.stubs.values.map(\.slot)) } }
        let uses: [HandleTable.Use?]
        switch takeHandles(bound, of: signature) {
        case .success(let taken): uses = taken
        case .failure(let refusal): return .failure(refusal)
        }
        guard
            let frame = ForeignCallFrame(
                signature: signature, arguments: bound, handles: uses,
                callbacks: callbacks?.stubs.mapValues(\.pointer) ?? [:])
        else {
            abandon(uses, of: signature)
            return .failure(Refusal(message: "no memory for the arguments of \(signature.name)"))
        }
        defer { frame.release() }

        var result = (UInt64(0), UInt64(0))
        let errorLocation = signature.reportsErrno ? errnoPointer() : nil
        withUnsafeMutableBytes(of: &result) { returnBuffer in
            errorLocation?.pointee = 0
            ffi_call(
                entry.interface,
                unsafeBitCast(entry.function, to: (@convention(c) () -> Void).self),
                frame.returnedStruct ?? returnBuffer.baseAddress,
                frame.values
            )
        }
        let errorNumber = errorLocation?.pointee ?? 0
        // Read while the call still holds its handles: a struct handle's fields are its alone.
        let outputs = frame.outputs(handles: handles)
        // The release function ran and its fields were read: a released struct goes now.
        for case let use? in uses where use.releasing { use.resident?.free() }
        // A handle the function released is gone now; the others are free for its release.
        for case let use? in uses { handles.end(use) }
        let value: FunctionValue
        if signature.returns == .handle, let kind = signature.returnKind {
            let pointer = UnsafeMutableRawPointer(bitPattern: UInt(result.0))
            value = .handle(FunctionHandle(kind: kind, id: handles.number(of: pointer, kind: kind)))
        } else {
            switch Self.decodeReturn(result, as: signature.returns, function: signature.name) {
            case .success(let decoded): value = decoded
            case .failure(let refusal): return .failure(refusal)
            }
        }
        if let message = callbacks?.call.failureMessage { return .failure(Refusal(message: message, inCallback: true)) }
        let outputBytes = outputs.reduce(0) { total, output in
            if case .bytes(let bytes) = output { return total + bytes.count }
            return total + 16
        }
        guard outputBytes <= maximumBytes else {
            return .failure(
                Refusal(
                    message: "the outputs of \(signature.name) are \(outputBytes) bytes, more than the message limit of \(maximumBytes)"))
        }
        return .success(FunctionCallReply(value, outputs: outputs, errorNumber: signature.reportsErrno ? errorNumber : nil))
    }

    /// A stub of the pool for each callback of the call, bound to a `CallbackCall` that forwards
    /// to the host; refused where there are no stubs, none free, or nobody to forward to.
    private static func callbackStubs(
        _ signature: FunctionSignature, _ bound: FunctionArguments, maximumBytes: Int, forward: CallbackCall.Forward?
    ) -> Result<(call: CallbackCall, stubs: [Int: (slot: UInt32, pointer: UnsafeMutableRawPointer)]), Refusal> {
        guard CallbackPool.capacity > 0 else {
            return .failure(Refusal(message: "\(signature.name) takes a callback, and callbacks work only on x86-64 and AArch64"))
        }
        guard let forward else {
            return .failure(Refusal(message: "\(signature.name) takes a callback, and this call has no way to the host"))
        }
        let call = CallbackCall(signature: signature, arguments: bound, maximumBytes: maximumBytes, forward: forward)
        guard let stubs = CallbackPool.shared.acquire(for: call) else {
            return .failure(
                Refusal(
                    message:
                        "\(signature.name) takes \(signature.callbacks.count) callback(s), and all \(CallbackPool.capacity) callback stubs of the worker are in use by running calls"
                ))
        }
        return .success((call, stubs))
    }

    /// The table's use of every handle the call passes, by parameter index (nil for the other
    /// parameters; empty when the call passes none), each taken for the call (and for its
    /// release, when this is the kind's release function); nothing taken when one is refused.
    private func takeHandles(
        _ bound: FunctionArguments, of signature: FunctionSignature
    ) -> Result<[HandleTable.Use?], Refusal> {
        var uses: [HandleTable.Use?] = []
        for (index, slot) in bound.slots.enumerated() {
            guard case .handle(let handle) = slot else { continue }
            if uses.isEmpty {
                // Appended to, not made with `init(repeating:count:)`: see `FunctionSignature.bind`.
                uses.reserveCapacity(bound.slots.count)
                for _ in bound.slots.indices { uses.append(nil) }
            }
            let kind = Self.handleKind(signature.parameters[index].kind)
            switch handles.begin(handle.id, kind: kind, releasing: signature.releases == kind) {
            case .success(let use):
                uses[index] = use
            case .failure(let refusal):
                abandon(uses, of: signature)
                let position = (signature.inputs.firstIndex { $0.parameter == index } ?? index) + 1
                let named = signature.parameters[index].name.map { " ('\($0)')" } ?? ""
                return .failure(
                    Refusal(message: "argument \(position)\(named) of \(signature) is handle \(handle), \(refusal.reason)"))
            }
        }
        return .success(uses)
    }

    /// Gives back the handles `takeHandles` took, for a call that did not happen.
    private func abandon(_ uses: [HandleTable.Use?], of signature: FunctionSignature) {
        for (index, use) in uses.enumerated() {
            if let use { handles.abandon(use, kind: Self.handleKind(signature.parameters[index].kind)) }
        }
    }

    private static func handleKind(_ kind: FunctionParameter.Kind) -> String {
        guard case .handle(let name, _) = kind else { return "" }
        return name
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
        case .handle:
            return .failure(Refusal(message: "\(function) returns a handle of no kind"))
        }
    }

    /// The libffi types of one declared parameter: two for `bytes` (pointer and length), one
    /// pointer for pointers, buffers and NULL. A struct passed by value has a type of its own
    /// (`ForeignStructType`).
    static func parameterTypes(for kind: FunctionParameter.Kind) -> [UnsafeMutablePointer<ffi_type>?] {
        switch kind {
        case .value(.bytes): [plugind_ffi_type_pointer(), plugind_ffi_type_uint64()]
        case .value(let type): [returnType(for: type)]
        case .pointer, .buffer, .null, .handle, .structure, .structureValue, .callback: [plugind_ffi_type_pointer()]
        }
    }

    /// The libffi type of a field of a struct passed by value: a pointer's for a string.
    static func elementType(of field: FunctionStruct.Field) -> UnsafeMutablePointer<ffi_type> {
        guard case .scalar(let type) = field.kind else { return plugind_ffi_type_pointer() }
        return returnType(for: type)
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
        case .string, .bytes, .handle: plugind_ffi_type_pointer()
        }
    }
}
