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
        case .handle: 14
        }
    }

    private static let byWireCode: [FunctionValueType] = [
        .void, .bool, .int8, .uint8, .int16, .uint16, .int32, .uint32, .int64, .uint64, .float, .double, .string, .bytes, .handle,
    ]

    package init(wireCode: UInt8) throws(WireError) {
        guard Int(wireCode) < Self.byWireCode.count else { throw .malformedPayload("unknown value type \(wireCode)") }
        self = Self.byWireCode[Int(wireCode)]
    }
}

extension FunctionDirection {
    package var wireCode: UInt8 {
        switch self {
        case .in: 0
        case .out: 1
        case .inout: 2
        }
    }

    package init(wireCode: UInt8) throws(WireError) {
        switch wireCode {
        case 0: self = .in
        case 1: self = .out
        case 2: self = .inout
        default: throw .malformedPayload("unknown pointer direction \(wireCode)")
        }
    }
}

/// What the worker returns for a typed call, before the host has checked any of it: the
/// function's value, one value per declared output (`FunctionSignature.outputs`, in order) and
/// `errno` when declared. `FunctionSignature.result(value:outputs:errorNumber:arguments:)` turns
/// it into a `FunctionResult`, or refuses it.
package struct FunctionCallReply: Hashable, Sendable {
    package var value: FunctionValue
    package var outputs: [FunctionValue]
    package var errorNumber: Int32?

    package init(_ value: FunctionValue, outputs: [FunctionValue] = [], errorNumber: Int32? = nil) {
        self.value = value
        self.outputs = outputs
        self.errorNumber = errorNumber
    }
}

// Parameter kinds and buffer counts on the wire.
private enum ParameterCode {
    static let value: UInt8 = 0
    static let pointer: UInt8 = 1
    static let buffer: UInt8 = 2
    static let null: UInt8 = 3
    static let handle: UInt8 = 4
    static let structure: UInt8 = 5
    static let callback: UInt8 = 6
    static let structureValue: UInt8 = 7
}

// Callback argument kinds and counts on the wire.
private enum CallbackCode {
    static let value: UInt8 = 0
    static let string: UInt8 = 1
    static let buffer: UInt8 = 2
    static let ignored: UInt8 = 3
    static let strings: UInt8 = 4
    static let constant: UInt8 = 0
    static let argument: UInt8 = 1
    static let outer: UInt8 = 2
}

// Struct field kinds on the wire.
private enum FieldCode {
    static let scalar: UInt8 = 0
    static let string: UInt8 = 1
    static let buffer: UInt8 = 2
}

private enum CountCode {
    static let constant: UInt8 = 0
    static let argument: UInt8 = 1
    static let length: UInt8 = 2
}

private enum SignatureFlags {
    static let reportsErrno: UInt8 = 1
    /// Followed by the kind the function releases.
    static let releases: UInt8 = 2
    /// Followed by the struct the function returns by value.
    static let returnsStruct: UInt8 = 4
    static let all: UInt8 = reportsErrno | releases | returnsStruct
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
        case .handle(let handle):
            write(handle.kind)
            writeInteger(handle.id)
        }
    }

    /// name, parameters (name, kind and its fields), return type, flags.
    package mutating func write(_ signature: FunctionSignature) {
        write(signature.name)
        write(signature.parameters) { writer, parameter in
            writer.write(parameter.name ?? "")
            switch parameter.kind {
            case .value(let type):
                writer.write(ParameterCode.value)
                writer.write(type.wireCode)
            case .pointer(let type, let direction):
                writer.write(ParameterCode.pointer)
                writer.write(type.wireCode)
                writer.write(direction.wireCode)
            case .buffer(let buffer):
                writer.write(ParameterCode.buffer)
                writer.write(buffer.direction.wireCode)
                writer.write(buffer.element.wireCode)
                switch buffer.count {
                case .constant(let count):
                    writer.write(CountCode.constant)
                    writer.write(count)
                case .argument(let index):
                    writer.write(CountCode.argument)
                    writer.write(UInt32(truncatingIfNeeded: index))
                case .length(let index):
                    writer.write(CountCode.length)
                    writer.write(UInt32(truncatingIfNeeded: index))
                }
            case .null:
                writer.write(ParameterCode.null)
            case .handle(let kind, let direction):
                writer.write(ParameterCode.handle)
                writer.write(kind)
                writer.write(direction.wireCode)
            case .structure:
                writer.write(ParameterCode.structure)
            case .structureValue:
                writer.write(ParameterCode.structureValue)
            case .callback(let callback):
                writer.write(ParameterCode.callback)
                writer.write(callback)
            }
            writer.write(parameter.fields != nil)
            if let fields = parameter.fields { writer.write(fields) }
        }
        write(signature.returns.wireCode)
        if signature.returns == .handle { write(signature.returnKind ?? "") }
        write(
            (signature.reportsErrno ? SignatureFlags.reportsErrno : 0) | (signature.releases != nil ? SignatureFlags.releases : 0)
                | (signature.returnedStruct != nil ? SignatureFlags.returnsStruct : 0))
        if let kind = signature.releases { write(kind) }
        if let returned = signature.returnedStruct { write(returned) }
    }

    /// Each argument (name, kind and its count), then the return type.
    mutating func write(_ callback: FunctionCallbackSignature) {
        write(callback.parameters) { writer, parameter in
            writer.write(parameter.name ?? "")
            switch parameter.kind {
            case .value(let type):
                writer.write(CallbackCode.value)
                writer.write(type.wireCode)
            case .string:
                writer.write(CallbackCode.string)
            case .ignored:
                writer.write(CallbackCode.ignored)
            case .buffer(let element, let count):
                writer.write(CallbackCode.buffer)
                writer.write(element.wireCode)
                writer.write(count)
            case .strings(let count):
                writer.write(CallbackCode.strings)
                writer.write(count)
            }
        }
        write(callback.returns.wireCode)
    }

    private mutating func write(_ count: FunctionCallbackSignature.Count) {
        switch count {
        case .constant(let value):
            write(CallbackCode.constant)
            write(value)
        case .argument(let index):
            write(CallbackCode.argument)
            write(UInt32(truncatingIfNeeded: index))
        case .outer(let index):
            write(CallbackCode.outer)
            write(UInt32(truncatingIfNeeded: index))
        }
    }

    /// The layout (name, size, alignment, fields), then the fields set and read.
    mutating func write(_ access: FunctionStructAccess) {
        let layout = access.layout
        write(layout.name)
        write(UInt32(truncatingIfNeeded: layout.size))
        write(UInt32(truncatingIfNeeded: layout.alignment))
        write(layout.fields) { writer, field in
            writer.write(field.name)
            writer.write(UInt32(truncatingIfNeeded: field.offset))
            switch field.kind {
            case .scalar(let type):
                writer.write(FieldCode.scalar)
                writer.write(type.wireCode)
            case .string:
                writer.write(FieldCode.string)
            case .buffer(let direction, let element, let count, let advances):
                writer.write(FieldCode.buffer)
                writer.write(direction.wireCode)
                writer.write(element.wireCode)
                writer.write(count)
                writer.write(advances)
            }
        }
        write(access.sets)
        write(access.gets)
    }

    package mutating func write(_ reply: FunctionCallReply) {
        write(reply.value)
        write(reply.outputs) { $0.write($1) }
        write(reply.errorNumber != nil)
        write(reply.errorNumber ?? 0)
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
        case .handle:
            .handle(FunctionHandle(kind: try readString(), id: try readInteger()))
        }
    }

    /// A signature, checked as a manifest's is (`FunctionSignature.validate`): a worker never
    /// holds a declaration the manifest parser would have refused.
    package mutating func readFunctionSignature() throws(WireError) -> FunctionSignature {
        let name = try readString()
        let count = try readCount()
        guard count <= FunctionSignature.maximumParameters else {
            throw .malformedPayload("function \(name) has \(count) parameters; at most \(FunctionSignature.maximumParameters) are allowed")
        }
        var parameters: [FunctionParameter] = []
        for _ in 0..<count { parameters.append(try readFunctionParameter()) }
        let returns = try FunctionValueType(wireCode: readUInt8())
        let returnKind = returns == .handle ? try readString() : nil
        let flags = try readUInt8()
        guard flags & ~SignatureFlags.all == 0 else { throw .malformedPayload("function \(name) has unknown flags \(flags)") }
        let releases = flags & SignatureFlags.releases != 0 ? try readString() : nil
        let returnedStruct = flags & SignatureFlags.returnsStruct != 0 ? try readStructAccess() : nil
        let signature = FunctionSignature(
            name: name, parameters: parameters, returns: returns, reportsErrno: flags & SignatureFlags.reportsErrno != 0,
            returnKind: returnKind, releases: releases, returnedStruct: returnedStruct)
        do {
            try signature.validate()
        } catch {
            throw .malformedPayload("declaration refused: \(error)")
        }
        return signature
    }

    private mutating func readFunctionParameter() throws(WireError) -> FunctionParameter {
        let name = try readString()
        let kind: FunctionParameter.Kind
        switch try readUInt8() {
        case ParameterCode.value:
            kind = .value(try FunctionValueType(wireCode: readUInt8()))
        case ParameterCode.pointer:
            kind = .pointer(try FunctionValueType(wireCode: readUInt8()), try FunctionDirection(wireCode: readUInt8()))
        case ParameterCode.buffer:
            let direction = try FunctionDirection(wireCode: readUInt8())
            let element = try FunctionValueType(wireCode: readUInt8())
            let count: FunctionBuffer.Count
            switch try readUInt8() {
            case CountCode.constant: count = .constant(try readUInt64())
            case CountCode.argument: count = .argument(Int(try readUInt32()))
            case CountCode.length: count = .length(Int(try readUInt32()))
            case let code: throw .malformedPayload("unknown buffer count kind \(code)")
            }
            kind = .buffer(FunctionBuffer(direction: direction, element: element, count: count))
        case ParameterCode.null:
            kind = .null
        case ParameterCode.handle:
            kind = .handle(try readString(), try FunctionDirection(wireCode: readUInt8()))
        case ParameterCode.structure:
            kind = .structure
        case ParameterCode.structureValue:
            kind = .structureValue
        case ParameterCode.callback:
            kind = .callback(try readCallbackSignature())
        case let code:
            throw .malformedPayload("unknown parameter kind \(code)")
        }
        let fields = try readBool() ? try readStructAccess() : nil
        return FunctionParameter(kind, name: name.isEmpty ? nil : name, fields: fields)
    }

    /// Checked by `FunctionSignature.validate`, which `readFunctionSignature` calls.
    private mutating func readCallbackSignature() throws(WireError) -> FunctionCallbackSignature {
        let count = try readCount()
        guard count <= FunctionSignature.maximumParameters else {
            throw .malformedPayload("a callback with \(count) arguments")
        }
        var parameters: [FunctionCallbackSignature.Parameter] = []
        for _ in 0..<count {
            let name = try readString()
            let kind: FunctionCallbackSignature.Kind
            switch try readUInt8() {
            case CallbackCode.value: kind = .value(try FunctionValueType(wireCode: readUInt8()))
            case CallbackCode.string: kind = .string
            case CallbackCode.ignored: kind = .ignored
            case CallbackCode.buffer:
                let element = try FunctionValueType(wireCode: readUInt8())
                kind = .buffer(element: element, count: try readCallbackCount())
            case CallbackCode.strings:
                kind = .strings(count: try readCallbackCount())
            case let code: throw .malformedPayload("unknown callback argument kind \(code)")
            }
            parameters.append(FunctionCallbackSignature.Parameter(kind, name: name.isEmpty ? nil : name))
        }
        return FunctionCallbackSignature(parameters: parameters, returns: try FunctionValueType(wireCode: readUInt8()))
    }

    private mutating func readCallbackCount() throws(WireError) -> FunctionCallbackSignature.Count {
        switch try readUInt8() {
        case CallbackCode.constant: .constant(try readUInt64())
        case CallbackCode.argument: .argument(Int(try readUInt32()))
        case CallbackCode.outer: .outer(Int(try readUInt32()))
        case let code: throw .malformedPayload("unknown callback count kind \(code)")
        }
    }

    /// Checked by `FunctionSignature.validate`, which `readFunctionSignature` calls.
    private mutating func readStructAccess() throws(WireError) -> FunctionStructAccess {
        let name = try readString()
        let size = Int(try readUInt32())
        let alignment = Int(try readUInt32())
        let count = try readCount()
        guard count <= FunctionStruct.maximumFields else {
            throw .malformedPayload("struct \(name) has \(count) fields; at most \(FunctionStruct.maximumFields) are allowed")
        }
        var fields: [FunctionStruct.Field] = []
        for _ in 0..<count {
            let fieldName = try readString()
            let offset = Int(try readUInt32())
            let kind: FunctionStruct.Field.Kind
            switch try readUInt8() {
            case FieldCode.scalar: kind = .scalar(try FunctionValueType(wireCode: readUInt8()))
            case FieldCode.string: kind = .string
            case FieldCode.buffer:
                kind = .buffer(
                    direction: try FunctionDirection(wireCode: readUInt8()), element: try FunctionValueType(wireCode: readUInt8()),
                    count: try readString(), advances: try readBool())
            case let code: throw .malformedPayload("unknown field kind \(code) in struct \(name)")
            }
            fields.append(FunctionStruct.Field(name: fieldName, offset: offset, kind: kind))
        }
        let layout = FunctionStruct(name: name, size: size, alignment: alignment, fields: fields)
        return FunctionStructAccess(layout: layout, sets: try readStrings(), gets: try readStrings())
    }

    package mutating func readFunctionCallReply() throws(WireError) -> FunctionCallReply {
        let value = try readFunctionValue()
        let count = try readCount()
        // Every parameter and the returned struct may report each of its fields.
        let most = (FunctionSignature.maximumParameters + 1) * FunctionStruct.maximumFields
        guard count <= most else {
            throw .malformedPayload("a call result with \(count) outputs; a function has at most \(most)")
        }
        var outputs: [FunctionValue] = []
        for _ in 0..<count { outputs.append(try readFunctionValue()) }
        let hasErrorNumber = try readBool()
        let errorNumber = try readInt32()
        return FunctionCallReply(value, outputs: outputs, errorNumber: hasErrorNumber ? errorNumber : nil)
    }
}
