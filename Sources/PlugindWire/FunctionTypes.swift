@_exported public import PlugindTypes

extension FunctionValueType {
    /// The type's number on the wire: fixed here, whatever the order of the cases.
    package var wireCode: UInt8 {
        switch self {
        case .void: 0
        case .bool: 1
        case .int8: 2
        case .uint8: 3
        case .int16: 4
        case .uint16: 5
        case .int32: 6
        case .uint32: 7
        case .int64: 8
        case .uint64: 9
        case .float: 10
        case .double: 11
        case .string: 12
        case .bytes: 13
        }
    }

    private static let byWireCode: [FunctionValueType] = [
        .void, .bool, .int8, .uint8, .int16, .uint16, .int32, .uint32, .int64, .uint64, .float, .double, .string, .bytes,
    ]

    package init(wireCode: UInt8) throws(WireError) {
        guard Int(wireCode) < Self.byWireCode.count else { throw .malformedPayload("unknown value type \(wireCode)") }
        self = Self.byWireCode[Int(wireCode)]
    }
}

extension PayloadWriter {
    package mutating func write(_ value: FunctionValue) {
        write(value.type.wireCode)
        switch value {
        case .void: break
        case .bool(let value): write(value)
        case .int8(let value): writeInteger(value)
        case .uint8(let value): writeInteger(value)
        case .int16(let value): writeInteger(value)
        case .uint16(let value): writeInteger(value)
        case .int32(let value): writeInteger(value)
        case .uint32(let value): writeInteger(value)
        case .int64(let value): writeInteger(value)
        case .uint64(let value): writeInteger(value)
        case .float(let value): writeInteger(value.bitPattern)
        case .double(let value): writeInteger(value.bitPattern)
        case .string(let value): write(value)
        case .bytes(let value): write(bytes: value)
        }
    }

    package mutating func write(_ signature: FunctionSignature) {
        write(signature.name)
        write(bytes: signature.arguments.map(\.wireCode))
        write(signature.returns.wireCode)
    }
}

extension PayloadReader {
    package mutating func readFunctionValue() throws(WireError) -> FunctionValue {
        switch try FunctionValueType(wireCode: readUInt8()) {
        case .void: .void
        case .bool: .bool(try readBool())
        case .int8: .int8(try readInteger())
        case .uint8: .uint8(try readInteger())
        case .int16: .int16(try readInteger())
        case .uint16: .uint16(try readInteger())
        case .int32: .int32(try readInteger())
        case .uint32: .uint32(try readInteger())
        case .int64: .int64(try readInteger())
        case .uint64: .uint64(try readInteger())
        case .float: .float(Float(bitPattern: try readInteger()))
        case .double: .double(Double(bitPattern: try readInteger()))
        case .string: .string(try readString())
        case .bytes: .bytes(try readBytes())
        }
    }

    package mutating func readFunctionSignature() throws(WireError) -> FunctionSignature {
        let name = try readString()
        var arguments: [FunctionValueType] = []
        for code in try readBytes() { arguments.append(try FunctionValueType(wireCode: code)) }
        let returns = try FunctionValueType(wireCode: readUInt8())
        return FunctionSignature(name: name, arguments: arguments, returns: returns)
    }
}
