import PlugindSystem
import PlugindTypes

// Callback arguments: a function pointer the library calls during the call, declared with its
// own signature (Documentation/ManifestReference.md, "Callbacks").

/// A callback as written, before the names its buffers' counts refer to are resolved.
struct CallbackDraft {
    enum Kind {
        case resolved(FunctionCallbackSignature.Kind)
        /// A buffer counted by a constant, or by a name: one of the callback's own integer
        /// arguments, else one of the declared function's; `nil` element: an array of strings.
        case buffer(FunctionValueType?, count: String?, constant: UInt64?)
    }

    var parameters: [(name: String?, kind: Kind)]
    var returns: FunctionValueType

    /// A count's name that is neither one of the callback's arguments nor the function's.
    struct UnresolvedCount: Error {
        let name: String
    }

    /// The signature, with each count resolved by `outerIndex` (the declared function's
    /// arguments by name).
    func resolved(outerIndex: [String: Int]) -> Result<FunctionCallbackSignature, UnresolvedCount> {
        var own: [String: Int] = [:]
        for (index, parameter) in parameters.enumerated() { if let name = parameter.name { own[name] = index } }
        var resolved: [FunctionCallbackSignature.Parameter] = []
        for parameter in parameters {
            switch parameter.kind {
            case .resolved(let kind):
                resolved.append(.init(kind, name: parameter.name))
            case .buffer(let element, let count, let constant):
                let counted: FunctionCallbackSignature.Count
                if let constant {
                    counted = .constant(constant)
                } else if let count, let index = own[count] {
                    counted = .argument(index)
                } else if let count, let index = outerIndex[count] {
                    counted = .outer(index)
                } else {
                    return .failure(UnresolvedCount(name: count ?? ""))
                }
                if let element {
                    resolved.append(.init(.buffer(element: element, count: counted), name: parameter.name))
                } else {
                    resolved.append(.init(.strings(count: counted), name: parameter.name))
                }
            }
        }
        return .success(FunctionCallbackSignature(parameters: resolved, returns: returns))
    }
}

extension ObjectReader {
    /// `{"name": "compar", "type": "callback", "arguments": [{"name": "a", "type": "buffer",
    /// "count": "size"}, …], "returns": "int32"}`: each argument a type name (a scalar,
    /// `string`, or `null` for a pointer the handler does not see) or a buffer object.
    func readCallback(of function: String) throws(ManifestError) -> CallbackDraft {
        guard case .array(let elements)? = members["arguments"] else {
            throw error("arguments", "must be the callback's arguments, an array of type names or buffer objects")
        }
        guard elements.count <= FunctionSignature.maximumParameters else {
            throw error("arguments", "has \(elements.count) entries; at most \(FunctionSignature.maximumParameters) are allowed")
        }
        var parameters: [(name: String?, kind: CallbackDraft.Kind)] = []
        for (index, element) in elements.enumerated() {
            let key = "arguments[\(index)]"
            switch element {
            case .string(let typeName):
                parameters.append((nil, try callbackKind(typeName, key: key)))
            case .object:
                var argument = ObjectReader(file: file, path: keyPath(key), value: element)
                argument.warnUnknownKeys(ManifestParser.callbackArgumentKeys)
                let name = try argument.optionalString("name")
                if let name, !ManifestParser.isCIdentifier(name) {
                    throw argument.error("name", "must be a C identifier, found '\(InertText.escape(name))'")
                }
                let typeName = try argument.requiredString("type")
                guard typeName == "buffer" || typeName == "strings" else {
                    for key in ["element", "count"] where argument.members[key] != nil {
                        throw argument.error(key, "does not apply: only a buffer has elements and a count")
                    }
                    parameters.append((name, try argument.callbackKind(typeName, key: "type")))
                    continue
                }
                if typeName == "strings", argument.members["element"] != nil {
                    throw argument.error("element", "does not apply: strings are C strings")
                }
                var element: FunctionValueType? = typeName == "strings" ? nil : .uint8
                if argument.members["element"] != nil {
                    let text = try argument.requiredString("element")
                    guard let type = FunctionValueType(rawValue: text), type.isScalar else {
                        throw argument.error("element", "must be a scalar type, found '\(InertText.escape(text))'")
                    }
                    element = type
                }
                switch argument.members["count"] {
                case .integer(let number)? where number > 0:
                    parameters.append((name, .buffer(element, count: nil, constant: UInt64(number))))
                case .unsignedInteger(let number)? where number > 0:
                    parameters.append((name, .buffer(element, count: nil, constant: number)))
                case .string(let counter)? where ManifestParser.isCIdentifier(counter):
                    parameters.append((name, .buffer(element, count: counter, constant: nil)))
                default:
                    throw argument.error(
                        "count",
                        "must be a positive integer or the name of an integer argument of the callback or of \(function) (the library passes a pointer: the declaration says how much it points to)"
                    )
                }
            default:
                throw error(key, "must be a type name or a buffer object, found \(element.typeName)")
            }
        }
        let returnName = try requiredString("returns")
        guard let returns = FunctionValueType(rawValue: returnName), returns == .void || returns.isScalar else {
            throw error(
                "returns", "must be void or a scalar type (bool, int8 … uint64, float or double), found '\(InertText.escape(returnName))'")
        }
        return CallbackDraft(parameters: parameters, returns: returns)
    }

    private func callbackKind(_ typeName: String, key: String) throws(ManifestError) -> CallbackDraft.Kind {
        switch typeName {
        case "string": return .resolved(.string)
        case "null": return .resolved(.ignored)
        default:
            guard let type = FunctionValueType(rawValue: typeName), type.isScalar else {
                throw error(
                    key,
                    "must be a scalar type, string, null (a pointer the handler does not see) or a buffer object, found '\(InertText.escape(typeName))'"
                )
            }
            return .resolved(.value(type))
        }
    }
}
