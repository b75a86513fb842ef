/// A C type a manifest may use in a function signature.
public enum FunctionValueType: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case void, bool
    case int8, uint8, int16, uint16, int32, uint32, int64, uint64
    case float, double
    /// `const char *`: NUL-terminated UTF-8 in; a returned string is copied out.
    case string
    /// `const uint8_t *` followed by a `size_t` length (two C parameters); arguments only.
    case bytes
    /// An opaque pointer of a kind the manifest names (`"handles"`): the host sees a
    /// `FunctionHandle`, the library the pointer. A declaration says the kind
    /// (`FunctionParameter.Kind.handle`, `FunctionSignature.returnKind`).
    case handle

    public var description: String { rawValue }

    /// Whether the type may appear as an argument (`void` may not).
    public var isValidArgument: Bool { self != .void }

    /// Whether the type may be returned (`bytes` may not: a C function cannot return a length).
    public var isValidReturn: Bool { self != .bytes }

    /// Whether the type is one of the integers (not `bool`).
    public var isInteger: Bool {
        switch self {
        case .int8, .uint8, .int16, .uint16, .int32, .uint32, .int64, .uint64: true
        default: false
        }
    }

    /// Whether a pointer may point to the type and a buffer may hold it: `bool`, an integer,
    /// `float` or `double`.
    public var isScalar: Bool {
        isInteger || self == .bool || self == .float || self == .double
    }

    /// The size of one value in C, in bytes (a pointer's for `string` and `bytes`, 0 for `void`).
    public var byteWidth: Int {
        switch self {
        case .void: 0
        case .bool, .int8, .uint8: 1
        case .int16, .uint16: 2
        case .int32, .uint32, .float: 4
        case .int64, .uint64, .double, .string, .bytes, .handle: 8
        }
    }
}

/// A value passed to or returned from a manifest-declared C function.
public enum FunctionValue: Hashable, Sendable, CustomStringConvertible {
    case void
    case bool(Bool)
    case int8(Int8)
    case uint8(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case float(Float)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    /// An opaque pointer, as the number the worker's handle table gave it (or NULL).
    case handle(FunctionHandle)

    /// The value's C type.
    public var type: FunctionValueType {
        switch self {
        case .void: .void
        case .bool: .bool
        case .int8: .int8
        case .uint8: .uint8
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .float: .float
        case .double: .double
        case .string: .string
        case .bytes: .bytes
        case .handle: .handle
        }
    }

    /// The value as text: numbers in their shortest exact form, strings as they are, bytes in
    /// lowercase hexadecimal, handles as `kind#id` (`kind#null`).
    public var description: String {
        switch self {
        case .void: "void"
        case .bool(let value): String(value)
        case .int8(let value): String(value)
        case .uint8(let value): String(value)
        case .int16(let value): String(value)
        case .uint16(let value): String(value)
        case .int32(let value): String(value)
        case .uint32(let value): String(value)
        case .int64(let value): String(value)
        case .uint64(let value): String(value)
        case .float(let value): String(value)
        case .double(let value): String(value)
        case .string(let value): value
        case .bytes(let value): value.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        case .handle(let handle): handle.description
        }
    }

    /// An integer value as a count: nil for a negative number and for every other type.
    public var asCount: UInt64? {
        switch self {
        case .int8(let value): UInt64(exactly: value)
        case .uint8(let value): UInt64(value)
        case .int16(let value): UInt64(exactly: value)
        case .uint16(let value): UInt64(value)
        case .int32(let value): UInt64(exactly: value)
        case .uint32(let value): UInt64(value)
        case .int64(let value): UInt64(exactly: value)
        case .uint64(let value): value
        default: nil
        }
    }

    /// `count` as a value of the integer `type`, or nil when the type cannot hold it.
    public static func integer(_ count: UInt64, as type: FunctionValueType) -> FunctionValue? {
        switch type {
        case .int8: Int8(exactly: count).map(FunctionValue.int8)
        case .uint8: UInt8(exactly: count).map(FunctionValue.uint8)
        case .int16: Int16(exactly: count).map(FunctionValue.int16)
        case .uint16: UInt16(exactly: count).map(FunctionValue.uint16)
        case .int32: Int32(exactly: count).map(FunctionValue.int32)
        case .uint32: UInt32(exactly: count).map(FunctionValue.uint32)
        case .int64: Int64(exactly: count).map(FunctionValue.int64)
        case .uint64: .uint64(count)
        default: nil
        }
    }

    /// The zero of a scalar `type` (what an out pointer holds before the call); nil for the
    /// types that are not scalars.
    public static func zero(of type: FunctionValueType) -> FunctionValue? {
        switch type {
        case .bool: .bool(false)
        case .float: .float(0)
        case .double: .double(0)
        default: integer(0, as: type)
        }
    }
}

/// Which way the data behind a pointer argument goes.
public enum FunctionDirection: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// The function reads it: the caller passes the value.
    case `in`
    /// The function writes it: the call's result returns it.
    case out
    /// Both: the caller passes the value, the result returns what the function left there.
    case `inout`

    public var description: String { rawValue }

    /// Whether the caller passes a value (`in`, `inout`).
    public var isInput: Bool { self != .out }
    /// Whether the result returns a value (`out`, `inout`).
    public var isOutput: Bool { self != .in }
}

/// A buffer argument: one C pointer to `count` elements of a scalar type.
public struct FunctionBuffer: Hashable, Sendable {
    /// How many elements the buffer holds.
    public enum Count: Hashable, Sendable {
        /// Always this many.
        case constant(UInt64)
        /// As many as the integer argument at this index (0-based) says. When an `in` or `inout`
        /// buffer names it, the caller does not pass that argument: it is the buffer's length.
        case argument(Int)
        /// As many as the integer an `inout` pointer argument at this index points to: on entry
        /// the capacity the caller gives, on return the number the function used (never trusted
        /// beyond the capacity).
        case length(Int)
    }

    public var direction: FunctionDirection
    /// The type of one element (`uint8` for a plain byte buffer).
    public var element: FunctionValueType
    public var count: Count

    public init(direction: FunctionDirection, element: FunctionValueType = .uint8, count: Count) {
        self.direction = direction
        self.element = element
        self.count = count
    }
}

/// One C parameter of a declared function.
public struct FunctionParameter: Hashable, Sendable {
    /// What the parameter is in C.
    public enum Kind: Hashable, Sendable {
        /// A value the caller passes: a scalar, a string, or `bytes` (two C parameters).
        case value(FunctionValueType)
        /// A pointer to one scalar (`int *`): the caller passes the value for `in` and `inout`,
        /// the result returns it for `out` and `inout`.
        case pointer(FunctionValueType, FunctionDirection)
        /// A pointer to a buffer of elements.
        case buffer(FunctionBuffer)
        /// `NULL`, always: the caller passes nothing.
        case null
        /// An opaque pointer of the named kind (the manifest's `"handles"`): `in`, passed by value
        /// (`sqlite3 *db`), the caller passes a `FunctionHandle`; `out`, a pointer to one the
        /// function writes (`sqlite3 **ppDb`), which the result returns. For a kind that is a
        /// struct (`fields` says which), `out` is a struct the worker makes, zeroed, and passes
        /// (`deflateInit_(z_stream *strm, …)`): the handle lives in the worker from then on.
        case handle(String, FunctionDirection)
        /// A pointer to a struct the worker makes, zeroed, for this call only (`fields` gives
        /// its layout and which fields the caller sets and the result reports).
        case structure
        /// A struct passed by value (`struct in_addr`, `double complex` as two doubles): the
        /// worker makes it, zeroed, sets the fields the caller gives (`fields`), and the library
        /// gets a copy, so nothing it does to it comes back. Its layout declares every field, for
        /// the registers a struct travels in depend on all of them.
        case structureValue
        /// A function pointer the library calls during the call: the host's handler for it
        /// answers each call. The caller passes the handler, not a value.
        case callback(FunctionCallbackSignature)
    }

    /// The name the manifest gives it (required for pointers and buffers); nil when unnamed.
    public var name: String?
    public var kind: Kind
    /// For a `structure`, or a handle of a struct kind: the layout, and the fields the call
    /// sets and reads.
    public var fields: FunctionStructAccess?

    public init(_ kind: Kind, name: String? = nil, fields: FunctionStructAccess? = nil) {
        self.kind = kind
        self.name = name
        self.fields = fields
    }
}

/// The C signature of a function a manifest declares.
public struct FunctionSignature: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    /// One entry per C parameter (a `bytes` value stands for two).
    public var parameters: [FunctionParameter]
    public var returns: FunctionValueType
    /// The kind of handle the function returns, when `returns` is `handle`.
    public var returnKind: String?
    /// The struct the function returns by value (`div_t`), with `returns` `void`: the result
    /// reports the fields its `get` lists, as `return.field`.
    public var returnedStruct: FunctionStructAccess?
    /// Whether the result reports `errno` as the function left it (0 before the call).
    public var reportsErrno: Bool
    /// The kind of handle this function releases (it is that kind's release function in the
    /// manifest's `"handles"`): its one input is a handle of the kind, which a call consumes.
    public var releases: String?

    /// The most parameters a declaration may have.
    public static let maximumParameters = 64
    /// The largest buffer a declaration may size by a constant, and any call may ask for.
    public static let maximumBufferBytes: UInt64 = 1 << 32

    /// A signature of plain values, as a manifest's type names declare it.
    public init(name: String, arguments: [FunctionValueType], returns: FunctionValueType) {
        self.init(name: name, parameters: arguments.map { FunctionParameter(.value($0)) }, returns: returns)
    }

    public init(
        name: String, parameters: [FunctionParameter], returns: FunctionValueType, reportsErrno: Bool = false,
        returnKind: String? = nil, releases: String? = nil, returnedStruct: FunctionStructAccess? = nil
    ) {
        self.name = name
        self.parameters = parameters
        self.returns = returns
        self.returnedStruct = returnedStruct
        self.reportsErrno = reportsErrno
        self.returnKind = returnKind
        self.releases = releases
    }

    /// A value the caller passes: for the C parameter at `parameter`, of `type` (`bytes` for a
    /// buffer's contents, the pointee's type for a pointer).
    public struct Input: Hashable, Sendable {
        public var parameter: Int
        public var type: FunctionValueType
        /// The handle's kind, for a handle.
        public var kind: String?
        /// The struct field the value sets, for a field of a `structure` or a struct handle.
        public var field: String?
    }

    /// A value the result returns: the scalar an `out`/`inout` pointer points to, or the bytes of
    /// an `out`/`inout` buffer.
    public struct Output: Hashable, Sendable {
        /// The parameter's index; `parameters.count` (`returnIndex`) for a field of the returned
        /// struct.
        public var parameter: Int
        public var name: String
        public var type: FunctionValueType
        /// The handle's kind, for an out handle.
        public var kind: String?
        /// The struct field it reports (`name` is then `argument.field`).
        public var field: String?
    }

    /// The values a caller passes, in order: every parameter but `NULL`, `out` pointers, `out`
    /// buffers, and the counts of `in`/`inout` buffers (their lengths).
    public var inputs: [Input] {
        // One array appended to: this runs for every call, on both sides.
        let derived = derivedCounts
        var inputs: [Input] = []
        inputs.reserveCapacity(parameters.count)
        for (index, parameter) in parameters.enumerated() {
            switch parameter.kind {
            case .value(let type):
                if !derived.contains(index) { inputs.append(Input(parameter: index, type: type)) }
            case .pointer(let type, let direction):
                if direction.isInput { inputs.append(Input(parameter: index, type: type)) }
            case .buffer(let buffer):
                if buffer.direction.isInput { inputs.append(Input(parameter: index, type: .bytes)) }
            case .handle(let kind, let direction):
                if direction.isInput { inputs.append(Input(parameter: index, type: .handle, kind: kind)) }
            case .null, .structure, .structureValue, .callback:
                break
            }
            guard let access = parameter.fields else { continue }
            for field in access.inputFields {
                inputs.append(Input(parameter: index, type: FunctionStructAccess.valueType(of: field), field: field.name))
            }
        }
        return inputs
    }

    /// Where `Output.parameter` points for a field of the returned struct: past the parameters.
    public var returnIndex: Int { parameters.count }

    /// The layout and fields of the struct argument at `index`, or of the returned struct at
    /// `returnIndex`.
    public func structAccess(at index: Int) -> FunctionStructAccess? {
        parameters.indices.contains(index) ? parameters[index].fields : (index == returnIndex ? returnedStruct : nil)
    }

    /// The values a result returns besides the function's own, in parameter order, then the
    /// fields of a returned struct.
    public var outputs: [Output] {
        guard let returnedStruct else { return parameterOutputs }
        let returned = returnedStruct.gets.compactMap { fieldName -> Output? in
            guard let field = returnedStruct.layout.field(named: fieldName) else { return nil }
            return Output(
                parameter: returnIndex, name: "return." + fieldName, type: FunctionStructAccess.valueType(of: field), field: fieldName)
        }
        return parameterOutputs + returned
    }

    private var parameterOutputs: [Output] {
        var outputs: [Output] = []
        for (index, parameter) in parameters.enumerated() {
            // Named only when there is something to name: this runs for every call.
            func name() -> String { parameter.name ?? "argument \(index + 1)" }
            switch parameter.kind {
            case .pointer(let type, let direction):
                if direction.isOutput { outputs.append(Output(parameter: index, name: name(), type: type)) }
            case .buffer(let buffer):
                if buffer.direction.isOutput { outputs.append(Output(parameter: index, name: name(), type: .bytes)) }
            case .handle(let kind, let direction):
                if direction.isOutput { outputs.append(Output(parameter: index, name: name(), type: .handle, kind: kind)) }
            case .value, .null, .structure, .structureValue, .callback:
                break
            }
            guard let access = parameter.fields else { continue }
            for fieldName in access.gets {
                guard let field = access.layout.field(named: fieldName) else { continue }
                outputs.append(
                    Output(
                        parameter: index, name: name() + "." + fieldName, type: FunctionStructAccess.valueType(of: field), field: fieldName)
                )
            }
        }
        return outputs
    }

    /// The callback parameters, by parameter index: the handlers a call needs, by name.
    public var callbacks: [(parameter: Int, name: String, signature: FunctionCallbackSignature)] {
        parameters.indices.compactMap { index in
            guard case .callback(let callback) = parameters[index].kind else { return nil }
            return (index, parameters[index].name ?? "argument \(index + 1)", callback)
        }
    }

    /// The types of the values a caller passes, in order (`inputs`).
    public var arguments: [FunctionValueType] { inputs.map(\.type) }

    /// Parameters the caller does not pass because they count an `in` or `inout` buffer.
    public var derivedCounts: Set<Int> {
        var derived: Set<Int> = []
        for parameter in parameters {
            if case .buffer(let buffer) = parameter.kind, buffer.direction.isInput, case .argument(let index) = buffer.count {
                derived.insert(index)
            }
        }
        return derived
    }

    /// The parameter at `index` as messages name it: `'dest'`, or `argument 2` when unnamed.
    public func label(ofParameter index: Int) -> String {
        guard parameters.indices.contains(index) else { return "argument \(index + 1)" }
        return parameters[index].name.map { "'\($0)'" } ?? "argument \(index + 1)"
    }

    /// `name(int32, string) -> double`; other kinds as C would write them:
    /// `compress(out uint8 dest[*destLen], inout uint64 *destLen, in uint8 source[sourceLen], uint64 sourceLen) -> int32`,
    /// `sqlite3_open(string filename, out sqlite3 **ppDb) -> int32`.
    public var description: String {
        let list = parameters.indices.map(parameterDescription).joined(separator: ", ")
        var returned = returns == .handle ? "\(returnKind ?? "handle") *" : returns.rawValue
        if let returnedStruct { returned = "struct \(returnedStruct.layout.name)" + Self.fieldList(returnedStruct) }
        return "\(name)(\(list)) -> \(returned)" + (reportsErrno ? ", errno" : "")
    }

    private func parameterDescription(_ index: Int) -> String {
        let parameter = parameters[index]
        switch parameter.kind {
        case .value(let type):
            return parameter.name.map { "\(type) \($0)" } ?? type.rawValue
        case .pointer(let type, let direction):
            return "\(direction) \(type) *\(parameter.name ?? "")"
        case .buffer(let buffer):
            let count: String
            switch buffer.count {
            case .constant(let value): count = String(value)
            case .argument(let other): count = referenceName(other)
            case .length(let other): count = "*" + referenceName(other)
            }
            return "\(buffer.direction) \(buffer.element) \(parameter.name ?? "")[\(count)]"
        case .null:
            return "NULL"
        case .handle(let kind, let direction):
            if let fields = parameter.fields {
                return "\(direction == .in ? "" : "out ")\(kind) (struct \(fields.layout.name)) *\(parameter.name ?? "")"
                    + Self.fieldList(fields)
            }
            return (direction == .in ? "\(kind) *" : "\(direction) \(kind) **") + (parameter.name ?? "")
        case .structure:
            return "struct \(parameter.fields?.layout.name ?? "") *\(parameter.name ?? "")" + (parameter.fields.map(Self.fieldList) ?? "")
        case .structureValue:
            return "struct \(parameter.fields?.layout.name ?? "") \(parameter.name ?? "")" + (parameter.fields.map(Self.fieldList) ?? "")
        case .callback(let callback):
            return "callback \(parameter.name ?? ""): \(callback.described(outer: parameters))"
        }
    }

    /// ` {set a, b; get c}`, or nothing when the call exchanges no field.
    private static func fieldList(_ access: FunctionStructAccess) -> String {
        var parts: [String] = []
        if !access.sets.isEmpty { parts.append("set " + access.sets.joined(separator: ", ")) }
        if !access.gets.isEmpty { parts.append("get " + access.gets.joined(separator: ", ")) }
        return parts.isEmpty ? "" : " {" + parts.joined(separator: "; ") + "}"
    }

    func referenceName(_ index: Int) -> String {
        guard parameters.indices.contains(index) else { return "argument \(index + 1)" }
        return parameters[index].name ?? "argument \(index + 1)"
    }
}
