import CPlugindCallbacks
import Glibc
import PlugindWire
import Synchronization

/// One typed call's callbacks while the library runs: decodes each call of a stub by the
/// callback's declaration, forwards it to the host, and turns the answer into what the stub
/// returns.
///
/// A call of the library that cannot be forwarded (its buffer too large, a NULL buffer, the
/// host's handler failed or answered the wrong type) fails the typed call: the library gets
/// zero from then on, without the host being asked again, and the call's result is that
/// failure, naming the function and the callback. The library may call from threads of its own;
/// the failure is under a `Mutex`.
final class CallbackCall: Sendable {
    /// Forwards one call of the callback at `parameter` to the host: the handler's answer, or
    /// why there is none.
    typealias Forward = @Sendable (_ parameter: UInt32, _ arguments: [FunctionValue]) -> Result<FunctionValue, CallbackFailure>

    struct CallbackFailure: Error {
        let message: String
    }

    let signature: FunctionSignature
    /// The integer arguments the call passed, by parameter index: what a buffer counted by one
    /// of the function's arguments holds.
    private let outerCounts: [Int: UInt64]
    private let forward: Forward
    private let maximumBytes: Int
    private let failure = Mutex<String?>(nil)

    init(signature: FunctionSignature, arguments: FunctionArguments, maximumBytes: Int, forward: @escaping Forward) {
        self.signature = signature
        var counts: [Int: UInt64] = [:]
        for (index, slot) in arguments.slots.enumerated() {
            if case .value(let value) = slot, let count = value.asCount { counts[index] = count }
        }
        outerCounts = counts
        self.forward = forward
        self.maximumBytes = maximumBytes
    }

    /// Why the call failed in a callback, if it did.
    var failureMessage: String? { failure.withLock { $0 } }

    private func fail(_ parameter: Int, _ message: String) -> plugind_callback_return {
        let name = signature.parameters[parameter].name ?? "argument \(parameter + 1)"
        failure.withLock { failure in
            if failure == nil { failure = "callback '\(name)' of \(signature.name) \(message)" }
        }
        return plugind_callback_return(integer: 0, floating: 0)
    }

    /// A stub's call: `integers` and `floats` are the registers the arguments arrived in.
    func invoke(
        parameter: Int, integers: UnsafePointer<UInt64>, floats: UnsafePointer<UInt64>
    ) -> plugind_callback_return {
        guard failureMessage == nil, case .callback(let callback) = signature.parameters[parameter].kind else {
            return plugind_callback_return(integer: 0, floating: 0)
        }
        let arguments: [FunctionValue]
        switch decode(callback, integers: integers, floats: floats) {
        case .success(let decoded): arguments = decoded
        case .failure(let refusal): return fail(parameter, refusal.message)
        }
        switch forward(UInt32(parameter), arguments) {
        case .failure(let refusal):
            return fail(parameter, refusal.message)
        case .success(let answer):
            guard answer.type == callback.returns else {
                return fail(parameter, "was answered with \(answer.type), not the declared \(callback.returns)")
            }
            return Self.encode(answer)
        }
    }

    /// The handler's arguments from the registers: scalars at their width, strings and buffers
    /// copied from the library's memory, ignored pointers left out.
    private func decode(
        _ callback: FunctionCallbackSignature, integers: UnsafePointer<UInt64>, floats: UnsafePointer<UInt64>
    ) -> Result<[FunctionValue], CallbackFailure> {
        var integerIndex = 0
        var floatIndex = 0
        var registers: [UInt64] = []
        for parameter in callback.parameters {
            if case .value(let type) = parameter.kind, type == .float || type == .double {
                registers.append(floats[floatIndex])
                floatIndex += 1
            } else {
                registers.append(integers[integerIndex])
                integerIndex += 1
            }
        }
        var values: [FunctionValue] = []
        var total = 0
        for (index, parameter) in callback.parameters.enumerated() {
            let register = registers[index]
            let label = parameter.name.map { "'\($0)'" } ?? "argument \(index + 1)"
            switch parameter.kind {
            case .ignored:
                continue
            case .value(let type):
                values.append(Self.scalar(type, register))
            case .strings(let count):
                let elements = elementCount(count, of: callback, registers: registers)
                guard let elements,
                    elements <= UInt64(FunctionCallbackSignature.maximumStrings)
                else {
                    return .failure(
                        CallbackFailure(
                            message:
                                "was passed \(label) of \(elements.map(String.init) ?? "a negative number of") strings, more than \(FunctionCallbackSignature.maximumStrings)"
                        ))
                }
                guard let array = UnsafePointer<UnsafePointer<CChar>?>(bitPattern: UInt(register)) else {
                    guard elements == 0 else {
                        return .failure(CallbackFailure(message: "was passed NULL as \(label), which holds \(elements) strings"))
                    }
                    continue
                }
                for index in 0..<Int(elements) {
                    guard let text = array[index] else {
                        values.append(.void)
                        continue
                    }
                    values.append(Self.string(text, total: &total))
                }
            case .string:
                guard let text = UnsafePointer<CChar>(bitPattern: UInt(register)) else {
                    values.append(.string(""))
                    continue
                }
                values.append(Self.string(text, total: &total))
            case .buffer(let element, let count):
                let elements = elementCount(count, of: callback, registers: registers)
                guard let elements,
                    elements <= UInt64(maximumBytes) / UInt64(element.byteWidth)
                else {
                    return .failure(
                        CallbackFailure(
                            message:
                                "was passed \(label) of \(elements.map(String.init) ?? "a negative number of") elements, more than the message limit of \(maximumBytes) bytes"
                        ))
                }
                let bytes = Int(elements) * element.byteWidth
                guard let pointer = UnsafeRawPointer(bitPattern: UInt(register)) else {
                    guard bytes == 0 else {
                        return .failure(CallbackFailure(message: "was passed NULL as \(label), which holds \(elements) elements"))
                    }
                    values.append(.bytes([]))
                    continue
                }
                total += bytes
                values.append(.bytes(Array(UnsafeRawBufferPointer(start: pointer, count: bytes))))
            }
            guard total <= maximumBytes else {
                return .failure(CallbackFailure(message: "was passed more than the message limit of \(maximumBytes) bytes"))
            }
        }
        return .success(values)
    }

    /// How many elements `count` says: a constant, one of the callback's integers (as its
    /// register holds it) or one of the call's; nil for a negative number.
    private func elementCount(
        _ count: FunctionCallbackSignature.Count, of callback: FunctionCallbackSignature, registers: [UInt64]
    ) -> UInt64? {
        switch count {
        case .constant(let value):
            return value
        case .argument(let other):
            // The declaration was checked: `other` is one of the callback's integer arguments.
            guard callback.parameters.indices.contains(other), case .value(let type) = callback.parameters[other].kind else { return nil }
            return Self.scalar(type, registers[other]).asCount
        case .outer(let other):
            return outerCounts[other]
        }
    }

    /// A C string the library passed, read up to `maximumStringBytes`; adds its length to `total`.
    private static func string(_ text: UnsafePointer<CChar>, total: inout Int) -> FunctionValue {
        let length = strnlen(text, FunctionCallbackSignature.maximumStringBytes)
        total += length
        return .string(String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self))
    }

    /// A scalar argument from its register: integers at their width (the ABI leaves the bits
    /// above unspecified), a float the low 32 bits of its register.
    private static func scalar(_ type: FunctionValueType, _ register: UInt64) -> FunctionValue {
        switch type {
        case .bool: .bool(UInt8(truncatingIfNeeded: register) != 0)
        case .int8: .int8(Int8(truncatingIfNeeded: register))
        case .uint8: .uint8(UInt8(truncatingIfNeeded: register))
        case .int16: .int16(Int16(truncatingIfNeeded: register))
        case .uint16: .uint16(UInt16(truncatingIfNeeded: register))
        case .int32: .int32(Int32(truncatingIfNeeded: register))
        case .uint32: .uint32(UInt32(truncatingIfNeeded: register))
        case .int64: .int64(Int64(bitPattern: register))
        case .float: .float(Float(bitPattern: UInt32(truncatingIfNeeded: register)))
        case .double: .double(Double(bitPattern: register))
        default: .uint64(register)
        }
    }

    /// What the stub returns for `value`: integers sign- or zero-extended in rax, a double in
    /// xmm0, a float in its low 32 bits.
    private static func encode(_ value: FunctionValue) -> plugind_callback_return {
        func integer(_ bits: UInt64) -> plugind_callback_return { plugind_callback_return(integer: bits, floating: 0) }
        switch value {
        case .bool(let flag): return integer(flag ? 1 : 0)
        case .int8(let number): return integer(UInt64(bitPattern: Int64(number)))
        case .uint8(let number): return integer(UInt64(number))
        case .int16(let number): return integer(UInt64(bitPattern: Int64(number)))
        case .uint16(let number): return integer(UInt64(number))
        case .int32(let number): return integer(UInt64(bitPattern: Int64(number)))
        case .uint32(let number): return integer(UInt64(number))
        case .int64(let number): return integer(UInt64(bitPattern: number))
        case .uint64(let number): return integer(number)
        case .float(let number): return plugind_callback_return(integer: 0, floating: Double(bitPattern: UInt64(number.bitPattern)))
        case .double(let number): return plugind_callback_return(integer: 0, floating: number)
        case .void, .string, .bytes, .handle: return integer(0)
        }
    }
}
