import PlugindSystem
import PlugindTypes

// The `functions` key: declarations of C functions, each argument a type name (`"int32"`,
// `"string"`, `"null"`) or an object for what a name cannot say: pointers to scalars, buffers and
// how they are counted (Documentation/ManifestReference.md, "functions").

/// An argument as written, before the names its count refers to are resolved.
private struct ArgumentDraft {
    enum Count {
        case constant(UInt64)
        /// `"n"`: the value of argument `n`.
        case argument(String)
        /// `"*n"`: the value argument `n` points to.
        case length(String)
    }

    enum Kind {
        case resolved(FunctionParameter.Kind)
        case buffer(FunctionDirection, FunctionValueType, Count)
    }

    var name: String?
    var kind: Kind
}

extension ObjectReader {
    mutating func readFunctions() throws(ManifestError) -> [FunctionSignature] {
        guard let value = members["functions"] else { return [] }
        guard case .array(let elements) = value else {
            throw error("functions", "must be an array of function declarations, found \(value.typeName)")
        }
        guard elements.count <= ManifestParser.maximumListCount else {
            throw error("functions", "declares \(elements.count) functions; at most \(ManifestParser.maximumListCount) are allowed")
        }
        var functions: [FunctionSignature] = []
        var seen: Set<String> = []
        for (index, element) in elements.enumerated() {
            var entry = ObjectReader(file: file, path: keyPath("functions[\(index)]"), value: element)
            try entry.requireObject()
            entry.warnUnknownKeys(ManifestParser.functionKeys)
            let name = try entry.requiredString("name")
            guard ManifestParser.isCIdentifier(name) else {
                throw entry.error("name", "must be a C identifier, found '\(name)'")
            }
            guard seen.insert(name).inserted else { throw entry.error("name", "declares '\(name)' a second time") }
            let parameters = try entry.readArguments(of: name)
            let returnName = try entry.requiredString("returns")
            guard let returns = FunctionValueType(rawValue: returnName) else {
                throw entry.error("returns", "names unknown type '\(returnName)' (\(Self.typeList))")
            }
            guard returns.isValidReturn else {
                throw entry.error("returns", "cannot be bytes (a C function cannot return a length)")
            }
            var reportsErrno = false
            if let errnoValue = entry.members["errno"] {
                guard case .bool(let flag) = errnoValue else {
                    throw entry.error("errno", "must be true or false, found \(errnoValue.typeName)")
                }
                reportsErrno = flag
            }
            warnings += entry.warnings
            let signature = FunctionSignature(name: name, parameters: parameters, returns: returns, reportsErrno: reportsErrno)
            do {
                try signature.validate()
            } catch {
                throw entry.error(error.parameter.map { "arguments[\($0)]" } ?? "name", "is refused: \(error)")
            }
            functions.append(signature)
        }
        return functions
    }

    static var typeList: String {
        "one of " + FunctionValueType.allCases.map(\.rawValue).joined(separator: ", ")
    }

    /// The `arguments` array: each a type name or an argument object; counts resolved by name.
    private mutating func readArguments(of function: String) throws(ManifestError) -> [FunctionParameter] {
        guard let value = members["arguments"] else {
            throw error("arguments", "is missing (an array of type names or argument objects, possibly empty)")
        }
        guard case .array(let elements) = value else {
            throw error("arguments", "must be an array of type names or argument objects, found \(value.typeName)")
        }
        guard elements.count <= FunctionSignature.maximumParameters else {
            throw error("arguments", "has \(elements.count) entries; at most \(FunctionSignature.maximumParameters) are allowed")
        }
        var drafts: [ArgumentDraft] = []
        for (position, element) in elements.enumerated() {
            drafts.append(try readArgument(element, key: "arguments[\(position)]"))
        }
        var indexByName: [String: Int] = [:]
        for (position, draft) in drafts.enumerated() {
            guard let name = draft.name else { continue }
            guard indexByName[name] == nil else {
                throw error("arguments[\(position)].name", "repeats '\(name)', the name of an earlier argument of \(function)")
            }
            indexByName[name] = position
        }
        var parameters: [FunctionParameter] = []
        for (position, draft) in drafts.enumerated() {
            switch draft.kind {
            case .resolved(let kind):
                parameters.append(FunctionParameter(kind, name: draft.name))
            case .buffer(let direction, let element, let count):
                let resolved: FunctionBuffer.Count
                switch count {
                case .constant(let value):
                    resolved = .constant(value)
                case .argument(let name), .length(let name):
                    guard let index = indexByName[name] else {
                        throw error(
                            "arguments[\(position)].count",
                            "is refused: '\(draft.name ?? "")' of \(function) is counted by '\(name)', but \(function) has no argument named '\(name)'"
                        )
                    }
                    if case .argument = count { resolved = .argument(index) } else { resolved = .length(index) }
                }
                let buffer = FunctionBuffer(direction: direction, element: element, count: resolved)
                parameters.append(FunctionParameter(.buffer(buffer), name: draft.name))
            }
        }
        return parameters
    }

    private mutating func readArgument(_ value: JSONValue, key: String) throws(ManifestError) -> ArgumentDraft {
        switch value {
        case .string(let typeName):
            if typeName == "null" { return ArgumentDraft(name: nil, kind: .resolved(.null)) }
            guard let type = FunctionValueType(rawValue: typeName) else {
                throw error(key, "names unknown type '\(typeName)' (\(Self.typeList), or null)")
            }
            guard type.isValidArgument else { throw error(key, "cannot be void") }
            return ArgumentDraft(name: nil, kind: .resolved(.value(type)))
        case .object:
            var argument = ObjectReader(file: file, path: keyPath(key), value: value)
            argument.warnUnknownKeys(ManifestParser.argumentKeys)
            defer { warnings += argument.warnings }
            return try argument.readArgumentObject()
        default:
            throw error(key, "must be a type name or an argument object, found \(value.typeName)")
        }
    }

    /// `{"name": "exponent", "type": "pointer", "to": "int32", "direction": "out"}`,
    /// `{"name": "dest", "type": "buffer", "direction": "out", "count": "*destLen"}`, `{"type": "null"}`,
    /// `{"name": "level", "type": "int32"}`.
    private func readArgumentObject() throws(ManifestError) -> ArgumentDraft {
        let name = try optionalString("name")
        if let name, !ManifestParser.isCIdentifier(name) {
            throw error("name", "must be a C identifier, found '\(InertText.escape(name))'")
        }
        let type = try requiredString("type")
        func refuseKeys(_ keys: [String], _ reason: String) throws(ManifestError) {
            for key in keys where members[key] != nil { throw error(key, "does not apply: \(reason)") }
        }
        switch type {
        case "pointer":
            try refuseKeys(["element", "count"], "a pointer points to one value; a buffer has elements and a count")
            guard name != nil else { throw error("name", "is missing (a pointer needs a name: the result reports its value by it)") }
            let pointee = try scalarType("to")
            return ArgumentDraft(name: name, kind: .resolved(.pointer(pointee, try direction())))
        case "buffer":
            try refuseKeys(["to"], "a buffer's elements are its 'element' (uint8 unless given)")
            guard name != nil else { throw error("name", "is missing (a buffer needs a name)") }
            let element = members["element"] == nil ? FunctionValueType.uint8 : try scalarType("element")
            return ArgumentDraft(name: name, kind: .buffer(try direction(), element, try count()))
        case "null":
            try refuseKeys(["to", "direction", "element", "count"], "NULL is passed as it is")
            return ArgumentDraft(name: name, kind: .resolved(.null))
        default:
            guard let value = FunctionValueType(rawValue: type) else {
                throw error("type", "names unknown type '\(InertText.escape(type))' (\(Self.typeList), pointer, buffer or null)")
            }
            guard value.isValidArgument else { throw error("type", "cannot be void") }
            try refuseKeys(
                ["to", "direction", "element", "count"],
                "\(type) is passed by value (for a pointer to one, write \"type\": \"pointer\", \"to\": \"\(type)\")")
            return ArgumentDraft(name: name, kind: .resolved(.value(value)))
        }
    }

    private func scalarType(_ key: String) throws(ManifestError) -> FunctionValueType {
        let text = try requiredString(key)
        guard let type = FunctionValueType(rawValue: text), type.isScalar else {
            throw error(key, "must be a scalar type (bool, int8 … uint64, float or double), found '\(InertText.escape(text))'")
        }
        return type
    }

    private func direction() throws(ManifestError) -> FunctionDirection {
        guard members["direction"] != nil else {
            throw error("direction", "is missing (in, out or inout: C does not say, the declaration must)")
        }
        let text = try requiredString("direction")
        guard let direction = FunctionDirection(rawValue: text) else {
            throw error("direction", "must be in, out or inout, found '\(InertText.escape(text))'")
        }
        return direction
    }

    /// `16`, `"n"` (the value of argument n) or `"*n"` (the value argument n points to).
    private func count() throws(ManifestError) -> ArgumentDraft.Count {
        let problem = "an element count: a positive integer, the name of an integer argument, or *name of an inout pointer to one"
        switch members["count"] {
        case nil:
            throw error("count", "is missing (\(problem))")
        case .integer(let number)?:
            guard number > 0 else { throw error("count", "must be \(problem), found \(number)") }
            return .constant(UInt64(number))
        case .unsignedInteger(let number)?:
            guard number > 0 else { throw error("count", "must be \(problem), found \(number)") }
            return .constant(number)
        case .string(let text)?:
            let isLength = text.hasPrefix("*")
            let name = isLength ? String(text.dropFirst()) : text
            guard ManifestParser.isCIdentifier(name) else {
                throw error("count", "must be \(problem), found '\(InertText.escape(text))'")
            }
            return isLength ? .length(name) : .argument(name)
        case let other?:
            throw error("count", "must be \(problem), found \(other.typeName)")
        }
    }
}
