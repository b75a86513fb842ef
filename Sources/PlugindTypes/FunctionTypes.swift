/// A C type a manifest may use in a function signature.
public enum FunctionValueType: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case void, bool
    case int8, uint8, int16, uint16, int32, uint32, int64, uint64
    case float, double
    /// `const char *`: NUL-terminated UTF-8 in; a returned string is copied out.
    case string
    /// `const uint8_t *` followed by a `size_t` length (two C parameters); arguments only.
    case bytes

    public var description: String { rawValue }

    /// Whether the type may appear as an argument (`void` may not).
    public var isValidArgument: Bool { self != .void }

    /// Whether the type may be returned (`bytes` may not: a C function cannot return a length).
    public var isValidReturn: Bool { self != .bytes }
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
        }
    }

    /// The value as text: numbers in their shortest exact form, strings as they are, bytes in
    /// lowercase hexadecimal.
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
        }
    }
}

/// The C signature of a function a manifest declares.
public struct FunctionSignature: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    public var arguments: [FunctionValueType]
    public var returns: FunctionValueType

    public init(name: String, arguments: [FunctionValueType], returns: FunctionValueType) {
        self.name = name
        self.arguments = arguments
        self.returns = returns
    }

    /// `name(int32, string) -> double`
    public var description: String {
        "\(name)(\(arguments.map(\.rawValue).joined(separator: ", "))) -> \(returns.rawValue)"
    }
}
