import PlugindWire

/// Scalars in C memory: how a call's arguments, the pointees of its pointers and a struct's
/// fields are written and read.
enum ForeignValue {
    static func store(_ value: FunctionValue, at slot: UnsafeMutableRawPointer) {
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

    static func load(_ type: FunctionValueType, at slot: UnsafeRawPointer) -> FunctionValue {
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
}
