public import CPlugindHostAPI
import ExtensionFoundation
import Glibc
import PlugindEngine
import PlugindSystem

/// `plugind_value` ↔ `FunctionValue`. A C value carries its own tag, but callers in other
/// languages know numbers, not C widths (Python's int, a C `long`): an argument is taken as the
/// kind of value it is (integer, unsigned, real, text, bytes, bool) and converted to the type the
/// manifest declares, range-checked, so `PLUGIND_TYPE_INT64` 300 for an `int8` is refused
/// naming the argument, and 7 for a `uint16` is 7.
enum TypedValue {
    enum Given {
        case bool(Bool)
        case integer(Int64)
        case unsigned(UInt64)
        case real(Double)
        case text(String)
        case bytes([UInt8])
        /// A handle's number, and its kind when the caller gave one.
        case handle(kind: String?, id: UInt64)
    }

    /// What argument `index` holds, or why it holds nothing usable.
    static func given(_ value: plugind_value, index: Int) -> Result<Given, HostError> {
        switch value.type {
        case PLUGIND_TYPE_BOOL: return .success(.bool(value.payload.integer != 0))
        case PLUGIND_TYPE_INT8, PLUGIND_TYPE_INT16, PLUGIND_TYPE_INT32, PLUGIND_TYPE_INT64:
            return .success(.integer(value.payload.integer))
        case PLUGIND_TYPE_UINT8, PLUGIND_TYPE_UINT16, PLUGIND_TYPE_UINT32, PLUGIND_TYPE_UINT64:
            return .success(.unsigned(value.payload.unsigned_integer))
        case PLUGIND_TYPE_FLOAT, PLUGIND_TYPE_DOUBLE: return .success(.real(value.payload.real))
        case PLUGIND_TYPE_STRING, PLUGIND_TYPE_BYTES:
            guard let bytes = copiedBytes(value.payload.data.bytes, value.payload.data.length) else {
                return .failure(.invalidArgument("argument \(index): NULL data with a length of \(value.payload.data.length)"))
            }
            guard value.type == PLUGIND_TYPE_STRING else { return .success(.bytes(bytes)) }
            guard let string = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else {
                return .failure(.invalidArgument("argument \(index): the string is not UTF-8 without NUL bytes"))
            }
            return .success(.text(string))
        case PLUGIND_TYPE_HANDLE:
            var kind: String?
            if let pointer = value.payload.handle.kind {
                guard let given = String(validatingCString: pointer) else {
                    return .failure(.invalidArgument("argument \(index): the handle's kind is not UTF-8"))
                }
                kind = given
            }
            return .success(.handle(kind: kind, id: value.payload.handle.id))
        default:
            return .failure(.invalidArgument("argument \(index): type \(value.type.rawValue) is not an argument type"))
        }
    }

    /// `given` as the declared `type` (of `kind`, for a handle), or why it cannot be one. A
    /// handle is the process's object for its number when the process holds one.
    static func convert(
        _ given: Given, to type: FunctionValueType, kind: String?, index: Int, handles: HeldHandles
    ) -> Result<FunctionValue, HostError> {
        func integer<Integer: FixedWidthInteger>(_ make: (Integer) -> FunctionValue, _: Integer.Type) -> Result<FunctionValue, HostError> {
            let exact: Integer? =
                switch given {
                case .integer(let number): Integer(exactly: number)
                case .unsigned(let number): Integer(exactly: number)
                default: nil
                }
            guard let exact else { return mismatch() }
            return .success(make(exact))
        }
        func mismatch() -> Result<FunctionValue, HostError> {
            .failure(
                HostError(
                    code: PLUGIND_ERROR_INVALID_ARGUMENTS,
                    message: "argument \(index): \(given) is not a value of the declared type \(type)"))
        }
        switch (type, given) {
        case (.bool, .bool(let flag)): return .success(.bool(flag))
        case (.int8, _): return integer(FunctionValue.int8, Int8.self)
        case (.uint8, _): return integer(FunctionValue.uint8, UInt8.self)
        case (.int16, _): return integer(FunctionValue.int16, Int16.self)
        case (.uint16, _): return integer(FunctionValue.uint16, UInt16.self)
        case (.int32, _): return integer(FunctionValue.int32, Int32.self)
        case (.uint32, _): return integer(FunctionValue.uint32, UInt32.self)
        case (.int64, _): return integer(FunctionValue.int64, Int64.self)
        case (.uint64, _): return integer(FunctionValue.uint64, UInt64.self)
        case (.float, .real(let number)): return .success(.float(Float(number)))
        case (.double, .real(let number)): return .success(.double(number))
        case (.float, .integer(let number)): return .success(.float(Float(number)))
        case (.double, .integer(let number)): return .success(.double(Double(number)))
        case (.string, .text(let string)): return .success(.string(string))
        case (.bytes, .bytes(let bytes)): return .success(.bytes(bytes))
        case (.handle, .handle(let givenKind, let id)):
            return .success(.handle(handles.handle(kind: givenKind ?? kind ?? "", id: id)))
        default: return mismatch()
        }
    }

    /// The C form of a result; a string's bytes are a `malloc` copy, NUL-terminated; a handle's
    /// kind is the process's (`handles`), which holds the handle until the caller releases it.
    static func encode(_ value: FunctionValue, handles: HeldHandles) -> plugind_value {
        var result = plugind_value()
        switch value {
        case .void: result.type = PLUGIND_TYPE_VOID
        case .bool(let flag): (result.type, result.payload.integer) = (PLUGIND_TYPE_BOOL, flag ? 1 : 0)
        case .int8(let number): (result.type, result.payload.integer) = (PLUGIND_TYPE_INT8, Int64(number))
        case .uint8(let number): (result.type, result.payload.unsigned_integer) = (PLUGIND_TYPE_UINT8, UInt64(number))
        case .int16(let number): (result.type, result.payload.integer) = (PLUGIND_TYPE_INT16, Int64(number))
        case .uint16(let number): (result.type, result.payload.unsigned_integer) = (PLUGIND_TYPE_UINT16, UInt64(number))
        case .int32(let number): (result.type, result.payload.integer) = (PLUGIND_TYPE_INT32, Int64(number))
        case .uint32(let number): (result.type, result.payload.unsigned_integer) = (PLUGIND_TYPE_UINT32, UInt64(number))
        case .int64(let number): (result.type, result.payload.integer) = (PLUGIND_TYPE_INT64, number)
        case .uint64(let number): (result.type, result.payload.unsigned_integer) = (PLUGIND_TYPE_UINT64, number)
        case .float(let number): (result.type, result.payload.real) = (PLUGIND_TYPE_FLOAT, Double(number))
        case .double(let number): (result.type, result.payload.real) = (PLUGIND_TYPE_DOUBLE, number)
        case .string(let string):
            let utf8 = Array(string.utf8)
            result.type = PLUGIND_TYPE_STRING
            result.payload.data.bytes = UnsafePointer(mallocCopy(utf8 + [0]))
            result.payload.data.length = utf8.count
        case .bytes(let bytes):
            result.type = PLUGIND_TYPE_BYTES
            result.payload.data.bytes = UnsafePointer(mallocCopy(bytes))
            result.payload.data.length = bytes.count
        case .handle(let handle):
            result.type = PLUGIND_TYPE_HANDLE
            result.payload.handle.kind = handles.hold(handle)
            result.payload.handle.id = handle.id
        }
        return result
    }
}

/// The handles a C host received: held here (a handle is released when its last reference goes,
/// and C holds none) until `plugind_handle_release` or the process's release; and each kind's
/// name as the `const char *` results carry, valid until the process is released.
final class HeldHandles: Sendable {
    private struct State {
        var handles: [UInt64: FunctionHandle] = [:]
        var kinds: [String: OwnedCString] = [:]
        /// The numbers of the handles a call of their release function consumed.
        var consumed: Set<UInt64> = []
    }

    /// What the process knows of a number.
    enum Taken {
        case held(FunctionHandle)
        /// A call of its release function consumed it.
        case consumed
        case unknown
    }

    private let state = Locked(State())

    /// Holds `handle` (not NULL); its kind's name.
    func hold(_ handle: FunctionHandle) -> UnsafePointer<CChar>? {
        state.withLock { state in
            if !handle.isNull { state.handles[handle.id] = handle }
            if let name = state.kinds[handle.kind] { return name.constPointer }
            let name = OwnedCString(handle.kind)
            state.kinds[handle.kind] = name
            return name.constPointer
        }
    }

    /// The handle held for `id`, or one made by hand for a number this process does not hold
    /// (the worker refuses it unless it gave it out).
    func handle(kind: String, id: UInt64) -> FunctionHandle {
        state.withLock { state in
            if let held = state.handles[id], held.kind == kind { return held }
            return FunctionHandle(kind: kind, id: id)
        }
    }

    /// Stops holding `id`: the handle, for its release.
    func take(_ id: UInt64) -> Taken {
        state.withLock { state in
            if let held = state.handles.removeValue(forKey: id) { return .held(held) }
            return state.consumed.contains(id) ? .consumed : .unknown
        }
    }

    /// Stops holding the handles a call of their release function consumed.
    func forgetReleased() {
        state.withLock { state in
            for (id, handle) in state.handles where handle.isReleased {
                state.handles[id] = nil
                state.consumed.insert(id)
            }
        }
    }
}

/// A call's arguments from C: the process, the function and the values converted to the
/// declared types; or the error to report.
private func preparedCall(
    _ process: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    hasResult: Bool
) -> Result<(process: HostProcess, function: String, values: [FunctionValue]), HostError> {
    guard let process = HandleRegistry.shared.object(process, as: HostProcess.self) else {
        return .failure(.invalidArgument("not a plugind process (NULL, or already released)"))
    }
    guard let function = text(name), hasResult else {
        return .failure(.invalidArgument("the function's name and the result must not be NULL"))
    }
    guard count >= 0 else { return .failure(.invalidArgument("the argument count \(count) is negative")) }
    guard count == 0 || arguments != nil else {
        return .failure(.invalidArgument("arguments is NULL with a count of \(count)"))
    }
    var given: [TypedValue.Given] = []
    for index in 0..<count {
        guard let arguments else { break }
        switch TypedValue.given(arguments[index], index: index) {
        case .success(let value): given.append(value)
        case .failure(let failure): return .failure(failure)
        }
    }
    // Converted to the declared types (the declaration's inputs); an unknown function or a
    // wrong count is left to the host API, whose errors name them.
    var values: [FunctionValue] = []
    let declared = process.process.functions.first { $0.name == function }
    for (index, value) in given.enumerated() {
        guard let declared, declared.arguments.count == given.count else { break }
        let input = declared.inputs[index]
        switch TypedValue.convert(value, to: input.type, kind: input.kind, index: index, handles: process.handles) {
        case .success(let converted): values.append(converted)
        case .failure(let failure): return .failure(failure)
        }
    }
    if values.count != given.count {
        values = given.map { value in
            switch value {
            case .bool(let flag): .bool(flag)
            case .integer(let number): .int64(number)
            case .unsigned(let number): .uint64(number)
            case .real(let number): .double(number)
            case .text(let string): .string(string)
            case .bytes(let bytes): .bytes(bytes)
            case .handle(let kind, let id): .handle(process.handles.handle(kind: kind ?? "", id: id))
            }
        }
    }
    return .success((process, function, values))
}

@_cdecl("plugind_process_call")
public func plugindProcessCall(
    _ process: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, _ result: UnsafeMutablePointer<plugind_value>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    typedCall(
        process, name, arguments, count, timeout, hasResult: result != nil, error,
        call: { connection, function, values, _, timeout in try await connection.call(function, arguments: values, timeout: timeout) },
        store: { value, handles in result?.pointee = TypedValue.encode(value, handles: handles) })
}

@_cdecl("plugind_process_call_outputs")
public func plugindProcessCallOutputs(
    _ process: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, _ result: UnsafeMutablePointer<plugind_call_result>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    typedCall(
        process, name, arguments, count, timeout, hasResult: result != nil, error,
        call: { connection, function, values, _, timeout in
            try await connection.callWithOutputs(function, arguments: values, timeout: timeout)
        },
        store: { value, handles in result?.pointee = CallResultStorage.encode(value, handles: handles) })
}

/// The handlers of a typed call's callbacks, by callback name.
typealias CallbackHandlers = [String: FunctionCallbackHandler]

/// A typed call from C: the arguments checked and converted, `call` made on the process's
/// connection for calls with a handler for each of `callbacks` (run on the calling thread while
/// it waits), and what it returned handed to `store`. 0, or -1 with `error` set. Made from inside
/// a callback's handler, the call is nested in the callback (`CallerWait`).
func typedCall<Value: Sendable>(
    _ process: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, hasResult: Bool, _ error: UnsafeMutablePointer<OpaquePointer?>?, callbacks: [HostCallback] = [],
    call: @escaping @Sendable (AppExtensionConnection, String, [FunctionValue], CallbackHandlers, Duration?) async throws -> Value,
    store: (Value, HeldHandles) -> Void
) -> CInt {
    let prepared: (process: HostProcess, function: String, values: [FunctionValue])
    switch preparedCall(process, name, arguments, count, hasResult: hasResult) {
    case .success(let call): prepared = call
    case .failure(let failure):
        failure.report(to: error)
        return -1
    }
    let declared = prepared.process.process.functions.first { $0.name == prepared.function }
    let called = CallerWait.run { wait in
        let handlers = HostCallback.handlers(
            callbacks, function: prepared.function, declared: declared, owner: prepared.process, wait: wait)
        return try await call(
            prepared.process.connectionForCalls(), prepared.function, prepared.values, handlers, requestTimeout(timeout))
    }
    prepared.process.handles.forgetReleased()
    switch called {
    case .success(let value):
        store(value, prepared.process.handles)
        return 0
    case .failure(let failure):
        HostError(failure).report(to: error)
        return -1
    }
}

@_cdecl("plugind_handle_release")
public func plugindHandleRelease(
    _ process: OpaquePointer?, _ handle: UnsafePointer<plugind_value>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let process = HandleRegistry.shared.object(process, as: HostProcess.self) else {
        HostError.invalidArgument("not a plugind process (NULL, or already released)").report(to: error)
        return -1
    }
    guard let value = handle?.pointee, value.type == PLUGIND_TYPE_HANDLE else {
        HostError.invalidArgument("not a handle (NULL, or a value of another type)").report(to: error)
        return -1
    }
    let id = value.payload.handle.id
    guard id != 0 else { return 0 }
    switch process.handles.take(id) {
    case .consumed:
        return 0
    case .unknown:
        HostError.invalidArgument("handle #\(id) is not held by this process (released already, or never returned by its calls)")
            .report(to: error)
        return -1
    case .held(let held):
        // As a call: nested in a callback when a handler releases a handle.
        switch CallerWait.run({ _ in try await held.release() }) {
        case .success:
            return 0
        case .failure(let failure):
            HostError(failure).report(to: error)
            return -1
        }
    }
}

@_cdecl("plugind_handle_drop")
public func plugindHandleDrop(_ process: OpaquePointer?, _ handle: UnsafePointer<plugind_value>?) {
    guard let process = HandleRegistry.shared.object(process, as: HostProcess.self), let value = handle?.pointee,
        value.type == PLUGIND_TYPE_HANDLE
    else { return }
    // The last reference goes here: the handle's release starts in the background.
    _ = process.handles.take(value.payload.handle.id)
}

@_cdecl("plugind_call_result_free")
public func plugindCallResultFree(_ result: UnsafeMutablePointer<plugind_call_result>?) {
    guard let result else { return }
    CallResultStorage.free(result.pointee)
    result.pointee = plugind_call_result()
}

/// `plugind_call_result` ↔ `FunctionResult`: every string, byte buffer, name and the outputs
/// array are `malloc` copies that `plugind_call_result_free` frees.
enum CallResultStorage {
    static func encode(_ result: FunctionResult, handles: HeldHandles) -> plugind_call_result {
        var encoded = plugind_call_result()
        encoded.value = TypedValue.encode(result.value, handles: handles)
        if !result.outputs.isEmpty,
            let outputs = calloc(result.outputs.count, MemoryLayout<plugind_output>.stride)?.assumingMemoryBound(to: plugind_output.self)
        {
            for (index, output) in result.outputs.enumerated() {
                outputs[index].name = UnsafePointer(strdup(output.name))
                outputs[index].value = TypedValue.encode(output.value, handles: handles)
            }
            encoded.outputs = outputs
            encoded.output_count = result.outputs.count
        }
        encoded.has_errno = result.errorNumber == nil ? 0 : 1
        encoded.error_number = result.errorNumber ?? 0
        return encoded
    }

    static func free(_ result: plugind_call_result) {
        freeValue(result.value)
        if let outputs = result.outputs {
            for index in 0..<result.output_count {
                Glibc.free(UnsafeMutablePointer(mutating: outputs[index].name))
                freeValue(outputs[index].value)
            }
            Glibc.free(outputs)
        }
    }

    private static func freeValue(_ value: plugind_value) {
        guard value.type == PLUGIND_TYPE_STRING || value.type == PLUGIND_TYPE_BYTES else { return }
        Glibc.free(UnsafeMutablePointer(mutating: value.payload.data.bytes))
    }
}
