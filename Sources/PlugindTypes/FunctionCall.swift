/// A value a call's result returns through a pointer or buffer argument.
public struct FunctionOutput: Hashable, Sendable, CustomStringConvertible {
    /// The argument's name in the declaration.
    public var name: String
    /// The scalar an `out`/`inout` pointer points to after the call, or the bytes of an
    /// `out`/`inout` buffer (as many as the function used, for a buffer counted by a length).
    public var value: FunctionValue

    public init(name: String, value: FunctionValue) {
        self.name = name
        self.value = value
    }

    public var description: String { "\(name): \(value)" }
}

/// What a call of a declared function returned: the function's own value, the values of its
/// `out` and `inout` arguments, and `errno` where the declaration asks for it. Every length in it
/// was checked against the capacity the caller gave.
public struct FunctionResult: Hashable, Sendable {
    public var value: FunctionValue
    /// In the order of the arguments.
    public var outputs: [FunctionOutput]
    /// `errno` as the function left it (it is 0 before the call); nil unless declared.
    public var errorNumber: Int32?

    public init(value: FunctionValue, outputs: [FunctionOutput] = [], errorNumber: Int32? = nil) {
        self.value = value
        self.outputs = outputs
        self.errorNumber = errorNumber
    }

    /// The output of the argument called `name`.
    public subscript(output name: String) -> FunctionValue? {
        outputs.first { $0.name == name }?.value
    }
}

/// A call's arguments laid out per C parameter, checked against the declaration: what the host
/// sends becomes this on both sides, so the host refuses what the worker would, and the worker
/// refuses it again.
package struct FunctionArguments: Sendable, Equatable {
    package enum Slot: Sendable, Equatable {
        /// A value passed as it is (a scalar, a string, or `bytes`).
        case value(FunctionValue)
        /// The scalar a pointer points to on entry (zero for `out`).
        case pointer(FunctionValue)
        /// A buffer of `capacity` bytes whose first bytes are `content` (the rest zero).
        case buffer(content: [UInt8], capacity: Int)
        case null
        /// A handle passed by value: the worker passes the pointer its table holds for it.
        case handle(FunctionHandle)
        /// A pointer to a handle the function writes (NULL on entry); for a struct kind, the
        /// struct the worker makes.
        case handleOut
        /// A pointer to a struct the worker makes for the call.
        case structure
        /// A struct the worker makes for the call and passes by value.
        case structureValue
        /// A function pointer the worker hands out for the call: one of its callback stubs.
        case callback
    }

    /// A value a call gives a struct field before the function runs.
    package struct FieldSetting: Sendable, Equatable {
        package enum Value: Sendable, Equatable {
            /// A scalar field's value.
            case value(FunctionValue)
            /// A buffer field bound to `capacity` bytes of the worker's, starting with `content`.
            case buffer(content: [UInt8], capacity: Int)
        }

        package var field: String
        package var value: Value

        package init(field: String, value: Value) {
            self.field = field
            self.value = value
        }
    }

    package var slots: [Slot]
    /// The struct fields the call sets, by parameter index, in the order the declaration's
    /// `set` lists them.
    package var fieldSettings: [Int: [FieldSetting]] = [:]

    /// The bytes of every `out` and `inout` buffer: what the result will carry at most.
    package var outputCapacity: Int

    /// The capacity in bytes of the buffer at `index`; 0 for other parameters.
    package func capacity(of index: Int) -> Int {
        guard slots.indices.contains(index), case .buffer(_, let capacity) = slots[index] else { return 0 }
        return capacity
    }

    /// The capacity in bytes a call binds to buffer field `field` of the parameter at `index`;
    /// 0 when it binds none.
    package func capacity(of field: String, at index: Int) -> Int {
        for setting in fieldSettings[index] ?? [] where setting.field == field {
            if case .buffer(_, let capacity) = setting.value { return capacity }
        }
        return 0
    }
}

extension FunctionSignature {
    /// Lays out a call of this function with `values`, one for each of `inputs`: counts of
    /// `in`/`inout` buffers from their lengths, capacities from constants, count arguments and
    /// lengths, each checked.
    ///
    /// - Throws: `FunctionCallError` naming the function and the argument.
    package func bind(_ values: [FunctionValue]) throws(FunctionCallError) -> FunctionArguments {
        let inputs = self.inputs
        guard values.count == inputs.count else {
            throw FunctionCallError("\(self) takes \(inputs.count) argument(s), got \(values.count)")
        }
        // By parameter index: an array, not a dictionary, for this runs on every call. Appended
        // to, not made with `init(repeating:count:)`, which for an element type from outside the
        // standard library runs its unspecialized allocation and looks the array's metadata up in
        // the runtime's cache on every call.
        var given: [FunctionValue?] = []
        given.reserveCapacity(parameters.count)
        for _ in parameters.indices { given.append(nil) }
        var givenFields: [Int: [String: FunctionValue]] = [:]
        for (position, (value, input)) in zip(values, inputs).enumerated() {
            // Messages are written only for a refusal: a call that goes through describes nothing.
            func refuse(_ problem: String) -> FunctionCallError {
                let parameterName = parameters[input.parameter].name
                let named = (input.field.map { "\(parameterName ?? "").\($0)" } ?? parameterName).map { " ('\($0)')" } ?? ""
                return FunctionCallError("argument \(position + 1)\(named) of \(self) \(problem)")
            }
            guard value.type == input.type else { throw refuse("must be \(input.type), got \(value.type)") }
            if case .string(let text) = value, text.utf8.contains(0) { throw refuse("contains a NUL byte") }
            if case .handle(let handle) = value, let kind = input.kind {
                guard handle.kind == kind else { throw refuse("is handle \(handle), not a \(kind) handle") }
                guard !handle.isNull else { throw refuse("is handle \(handle): a NULL handle is not passed") }
                guard !handle.isReleased else { throw refuse("is handle \(handle), which was released") }
            }
            if let field = input.field {
                givenFields[input.parameter, default: [:]][field] = value
            } else {
                given[input.parameter] = value
            }
        }
        let counts = try derivedCountValues(given)
        var slots: [FunctionArguments.Slot] = []
        slots.reserveCapacity(parameters.count)
        var outputCapacity = 0
        for (index, parameter) in parameters.enumerated() {
            switch parameter.kind {
            case .value:
                guard let value = counts[index] ?? given[index] else { throw missing(index) }
                slots.append(.value(value))
            case .pointer(let type, let direction):
                guard let value = direction.isInput ? given[index] : FunctionValue.zero(of: type) else { throw missing(index) }
                slots.append(.pointer(value))
            case .buffer(let buffer):
                let slot = try bufferSlot(index, buffer, given: given, counts: counts)
                if buffer.direction.isOutput { outputCapacity += slot.capacity }
                guard outputCapacity <= Int(Self.maximumBufferBytes) else {
                    throw FunctionCallError(
                        "the out buffers of \(name) would hold more than \(Self.maximumBufferBytes) bytes together")
                }
                slots.append(.buffer(content: slot.content, capacity: slot.capacity))
            case .null:
                slots.append(.null)
            case .structure:
                slots.append(.structure)
            case .structureValue:
                slots.append(.structureValue)
            case .callback:
                slots.append(.callback)
            case .handle(_, let direction):
                if direction.isOutput {
                    slots.append(.handleOut)
                } else {
                    guard case .handle(let handle)? = given[index] else { throw missing(index) }
                    slots.append(.handle(handle))
                }
            }
        }
        var arguments = FunctionArguments(slots: slots, outputCapacity: outputCapacity)
        for (index, parameter) in parameters.enumerated() {
            guard let access = parameter.fields else { continue }
            let settings = try fieldSettings(index, access, given: givenFields[index] ?? [:])
            for setting in settings {
                guard case .buffer(_, let capacity) = setting.value,
                    case .buffer(.out, _, _, _)? = access.layout.field(named: setting.field)?.kind
                else { continue }
                arguments.outputCapacity += capacity
            }
            guard arguments.outputCapacity <= Int(Self.maximumBufferBytes) else {
                throw FunctionCallError("the out buffers of \(name) would hold more than \(Self.maximumBufferBytes) bytes together")
            }
            arguments.fieldSettings[index] = settings
        }
        return arguments
    }

    /// What a call sets in the struct of the parameter at `index`: the caller's values, the
    /// counts of the `in` buffers from their lengths, and room for each `out` buffer as its count
    /// says.
    private func fieldSettings(
        _ index: Int, _ access: FunctionStructAccess, given: [String: FunctionValue]
    ) throws(FunctionCallError) -> [FunctionArguments.FieldSetting] {
        let argument = label(ofParameter: index)
        var counts: [String: FunctionValue] = [:]
        var settings: [FunctionArguments.FieldSetting] = []
        for name in access.sets {
            guard let field = access.layout.field(named: name), case .buffer(.in, let element, let counter, _) = field.kind else {
                continue
            }
            guard case .bytes(let content)? = given[name] else {
                throw FunctionCallError("field '\(name)' of \(argument) of \(self.name) has no value")
            }
            let width = element.byteWidth
            guard content.count % width == 0 else {
                throw FunctionCallError(
                    "field '\(name)' of \(argument) of \(self.name) holds \(content.count) bytes, not a whole number of \(element) elements"
                )
            }
            guard case .scalar(let type)? = access.layout.field(named: counter)?.kind,
                let count = FunctionValue.integer(UInt64(content.count / width), as: type)
            else {
                throw FunctionCallError(
                    "field '\(name)' of \(argument) of \(self.name) holds \(content.count / width) elements, more than '\(counter)' can count"
                )
            }
            counts[counter] = count
        }
        for name in access.sets {
            guard let field = access.layout.field(named: name) else { continue }
            switch field.kind {
            case .scalar:
                guard let value = given[name] else {
                    throw FunctionCallError("field '\(name)' of \(argument) of \(self.name) has no value")
                }
                settings.append(.init(field: name, value: .value(value)))
            case .buffer(.in, _, let counter, _):
                guard case .bytes(let content)? = given[name], let count = counts[counter] else { continue }
                settings.append(.init(field: name, value: .buffer(content: content, capacity: content.count)))
                settings.append(.init(field: counter, value: .value(count)))
            case .buffer(_, let element, let counter, _):
                guard let value = given[counter], let count = value.asCount else {
                    throw FunctionCallError(
                        "field '\(counter)' of \(argument) of \(self.name) is \(given[counter]?.description ?? "missing"), which cannot count '\(name)'"
                    )
                }
                let width = UInt64(element.byteWidth)
                guard count <= Self.maximumBufferBytes / width else {
                    throw FunctionCallError(
                        "field '\(name)' of \(argument) of \(self.name) would hold \(count) elements, more than \(Self.maximumBufferBytes) bytes"
                    )
                }
                settings.append(.init(field: name, value: .buffer(content: [], capacity: Int(count * width))))
            case .string:
                continue
            }
        }
        return settings
    }

    private func missing(_ index: Int) -> FunctionCallError {
        FunctionCallError("\(label(ofParameter: index)) of \(name) has no value")
    }

    /// The values of the count arguments the caller does not pass: the lengths of the `in` and
    /// `inout` buffers they count, which must agree when several share one.
    private func derivedCountValues(_ given: [FunctionValue?]) throws(FunctionCallError) -> [Int: FunctionValue] {
        var elements: [Int: (count: Int, buffer: Int)] = [:]
        for (index, parameter) in parameters.enumerated() {
            guard case .buffer(let buffer) = parameter.kind, buffer.direction.isInput, case .argument(let counter) = buffer.count,
                case .bytes(let content)? = given[index]
            else { continue }
            let count = try elementCount(content.count, of: buffer, at: index)
            if let earlier = elements[counter], earlier.count != count {
                throw FunctionCallError(
                    "\(label(ofParameter: earlier.buffer)) and \(label(ofParameter: index)) of \(name) share the count \(label(ofParameter: counter)) but hold \(earlier.count) and \(count) elements"
                )
            }
            elements[counter] = (count, index)
        }
        var values: [Int: FunctionValue] = [:]
        for (counter, element) in elements {
            guard case .value(let type) = parameters[counter].kind, let value = FunctionValue.integer(UInt64(element.count), as: type)
            else {
                throw FunctionCallError(
                    "\(label(ofParameter: element.buffer)) of \(name) holds \(element.count) elements, more than \(label(ofParameter: counter)) can count"
                )
            }
            values[counter] = value
        }
        return values
    }

    private func elementCount(_ bytes: Int, of buffer: FunctionBuffer, at index: Int) throws(FunctionCallError) -> Int {
        let width = buffer.element.byteWidth
        guard bytes % width == 0 else {
            throw FunctionCallError(
                "\(label(ofParameter: index)) of \(name) holds \(bytes) bytes, not a whole number of \(buffer.element) elements (\(width) bytes each)"
            )
        }
        return bytes / width
    }

    private func bufferSlot(
        _ index: Int, _ buffer: FunctionBuffer, given: [FunctionValue?], counts: [Int: FunctionValue]
    ) throws(FunctionCallError) -> (content: [UInt8], capacity: Int) {
        let label = self.label(ofParameter: index)
        let elements: UInt64
        switch buffer.count {
        case .constant(let count):
            elements = count
        case .argument(let counter), .length(let counter):
            guard let value = counts[counter] ?? given[counter] else { throw missing(counter) }
            guard let count = value.asCount else {
                throw FunctionCallError("\(self.label(ofParameter: counter)) of \(name) is \(value), which cannot count \(label)")
            }
            elements = count
        }
        let width = UInt64(buffer.element.byteWidth)
        guard elements <= Self.maximumBufferBytes / width else {
            throw FunctionCallError(
                "\(label) of \(name) would hold \(elements) \(buffer.element) elements, more than \(Self.maximumBufferBytes) bytes")
        }
        let capacity = Int(elements * width)
        guard buffer.direction.isInput else { return ([], capacity) }
        guard case .bytes(let content)? = given[index] else { throw missing(index) }
        _ = try elementCount(content.count, of: buffer, at: index)
        if case .length(let counter) = buffer.count {
            guard content.count <= capacity else {
                throw FunctionCallError(
                    "\(label) of \(name) holds \(content.count) bytes, more than the capacity of \(capacity) bytes \(self.label(ofParameter: counter)) gives"
                )
            }
        } else if content.count != capacity {
            throw FunctionCallError("\(label) of \(name) must hold exactly \(capacity) bytes, got \(content.count)")
        }
        return (content, capacity)
    }
}

// MARK: - Checking a result

extension FunctionSignature {
    /// Checks what a worker returned for a call laid out as `arguments` and names its outputs:
    /// the types the declaration gives, every buffer no longer than its capacity, and a buffer
    /// counted by a length exactly as long as that length says. Nothing in `value`, `outputs`
    /// or `errorNumber` is trusted.
    ///
    /// - Throws: `FunctionResultError` naming the function and the argument.
    package func result(
        value: FunctionValue, outputs values: [FunctionValue], errorNumber: Int32?, arguments: FunctionArguments
    ) throws(FunctionResultError) -> FunctionResult {
        func refuse(_ argument: String?, _ message: String) -> FunctionResultError {
            FunctionResultError(function: name, argument: argument, message: message)
        }
        guard value.type == returns else { throw refuse(nil, "\(name) returned \(value.type), not the declared \(returns)") }
        if case .handle(let handle) = value, handle.kind != returnKind {
            throw refuse(nil, "\(name) returned handle \(handle), not one of the declared kind \(returnKind ?? "")")
        }
        guard (errorNumber != nil) == reportsErrno else {
            throw refuse(
                nil,
                "the result of \(name) \(reportsErrno ? "lacks" : "has") errno, which the declaration \(reportsErrno ? "asks for" : "does not")"
            )
        }
        let expected = outputs
        guard values.count == expected.count, arguments.slots.count == parameters.count else {
            throw refuse(nil, "the result of \(name) has \(values.count) outputs, not the \(expected.count) declared")
        }
        var byParameter: [Int: FunctionValue] = [:]
        var byField: [Int: [String: FunctionValue]] = [:]
        for (output, value) in zip(expected, values) {
            guard value.type == output.type else {
                throw refuse(output.name, "\(name) returned \(value.type) for '\(output.name)', not \(output.type)")
            }
            if case .handle(let handle) = value, handle.kind != output.kind {
                throw refuse(output.name, "\(name) returned handle \(handle) for '\(output.name)', not one of kind \(output.kind ?? "")")
            }
            if let field = output.field {
                byField[output.parameter, default: [:]][field] = value
            } else {
                byParameter[output.parameter] = value
            }
        }
        for output in expected {
            if let field = output.field {
                try checkField(field, of: output, in: byField[output.parameter] ?? [:], arguments: arguments)
                continue
            }
            guard case .buffer(let buffer) = parameters[output.parameter].kind, case .bytes(let bytes)? = byParameter[output.parameter]
            else { continue }
            let capacity = arguments.capacity(of: output.parameter)
            guard case .length(let counter) = buffer.count else {
                guard bytes.count == capacity else {
                    throw refuse(output.name, "\(name) returned \(bytes.count) bytes for '\(output.name)', which holds \(capacity)")
                }
                continue
            }
            let lengthName = parameters[counter].name ?? "argument \(counter + 1)"
            guard let length = byParameter[counter] else {
                throw refuse(lengthName, "the result of \(name) lacks '\(lengthName)'")
            }
            let width = UInt64(buffer.element.byteWidth)
            guard let count = length.asCount, count <= UInt64(capacity) / width else {
                throw refuse(
                    lengthName,
                    "\(name) set '\(lengthName)' to \(length), beyond the capacity of \(UInt64(capacity) / width) \(buffer.element) elements given for '\(output.name)'"
                )
            }
            guard UInt64(bytes.count) == count * width else {
                throw refuse(
                    output.name,
                    "\(name) returned \(bytes.count) bytes for '\(output.name)', where '\(lengthName)' says \(count * width)")
            }
        }
        let named = zip(expected, values).map { FunctionOutput(name: $0.name, value: $1) }
        return FunctionResult(value: value, outputs: named, errorNumber: errorNumber)
    }

    /// An out buffer field's bytes: within the room the call bound, and as many as its count
    /// field says — what the library used, or for a field that `advances`, the room less what
    /// it left.
    private func checkField(
        _ field: String, of output: Output, in values: [String: FunctionValue], arguments: FunctionArguments
    ) throws(FunctionResultError) {
        guard let layout = structAccess(at: output.parameter)?.layout,
            case .buffer(_, let element, let counter, let advances)? = layout.field(named: field)?.kind,
            case .bytes(let bytes)? = values[field]
        else { return }
        let capacity = arguments.capacity(of: field, at: output.parameter)
        let counterName = output.name.dropLast(field.count) + counter
        func refuse(_ message: String) -> FunctionResultError {
            FunctionResultError(function: name, argument: String(counterName), message: message)
        }
        let width = UInt64(element.byteWidth)
        guard let count = values[counter]?.asCount, count <= UInt64(capacity) / width else {
            throw refuse(
                "\(name) set '\(counterName)' to \(values[counter]?.description ?? "nothing"), beyond the \(UInt64(capacity) / width) \(element) elements bound to '\(output.name)'"
            )
        }
        let expected = advances ? UInt64(capacity) - count * width : count * width
        guard UInt64(bytes.count) == expected else {
            throw refuse("\(name) returned \(bytes.count) bytes for '\(output.name)', where '\(counterName)' says \(expected)")
        }
    }
}

// MARK: - Handles a call consumes

extension FunctionSignature {
    /// The handle a call with `values` (one per input) releases: its one input, when this is
    /// a kind's release function.
    package func releasedHandle(in values: [FunctionValue]) -> FunctionHandle? {
        guard releases != nil, values.count == 1, case .handle(let handle) = values[0] else { return nil }
        return handle
    }
}
