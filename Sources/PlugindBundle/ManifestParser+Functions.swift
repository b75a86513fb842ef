import PlugindSystem
import PlugindTypes

// The `functions` key: declarations of C functions, each argument a type name (`"int32"`,
// `"string"`, `"null"`) or an object for what a name cannot say: pointers to scalars, buffers and
// how they are counted, and handles of the kinds the `handles` key declares
// (Documentation/ManifestReference.md, "functions" and "handles").

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
        case callback(CallbackDraft)
    }

    var name: String?
    var kind: Kind
    /// The layout and fields of a struct argument or a struct handle.
    var fields: FunctionStructAccess? = nil
}

/// The `handles` key: each kind of opaque pointer, and the declared function that releases one.
private struct HandleKinds {
    /// Kind → the name of its release function.
    var release: [String: String] = [:]
    /// Function name → the kind it releases.
    var releasedBy: [String: String] = [:]
    /// Kind → the struct it is, for the kinds the worker makes (`"struct"`).
    var layout: [String: FunctionStruct] = [:]
    /// Every struct `structs` declares, by name.
    var structs: [String: FunctionStruct] = [:]

    var list: String {
        release.isEmpty ? "it declares none" : "it declares " + release.keys.sorted().joined(separator: ", ")
    }
}

extension ObjectReader {
    /// `"handles": {"sqlite3": {"release": "sqlite3_close_v2"}}`.
    private mutating func readHandleKinds() throws(ManifestError) -> HandleKinds {
        let structs = try readStructs()
        guard let value = members["handles"] else { return HandleKinds(structs: structs) }
        let handles = ObjectReader(file: file, path: keyPath("handles"), value: value)
        try handles.requireObject()
        guard handles.members.count <= ManifestParser.maximumListCount else {
            throw error("handles", "declares \(handles.members.count) kinds; at most \(ManifestParser.maximumListCount) are allowed")
        }
        var kinds = HandleKinds(structs: structs)
        for (kind, declaration) in handles.members.sorted(by: { $0.key < $1.key }) {
            guard ManifestParser.isCIdentifier(kind) else {
                throw handles.error(kind, "is not a C identifier (a handle kind is one, such as sqlite3_stmt)")
            }
            var entry = ObjectReader(file: file, path: handles.keyPath(kind), value: declaration)
            try entry.requireObject()
            entry.warnUnknownKeys(ManifestParser.handleKeys)
            warnings += entry.warnings
            guard entry.members["release"] != nil else {
                throw entry.error("release", "is missing (the declared function that releases a \(kind) handle)")
            }
            let release = try entry.requiredString("release")
            guard ManifestParser.isCIdentifier(release) else {
                throw entry.error("release", "must name a declared function, found '\(InertText.escape(release))'")
            }
            if let other = kinds.releasedBy[release] {
                throw entry.error("release", "names \(release), which already releases handle kind \(other); a function releases one kind")
            }
            kinds.release[kind] = release
            kinds.releasedBy[release] = kind
            if let name = try entry.optionalString("struct") {
                guard let layout = structs[name] else {
                    throw entry.error("struct", "names struct '\(InertText.escape(name))', which \"structs\" does not declare")
                }
                kinds.layout[kind] = layout
            }
        }
        return kinds
    }

    mutating func readFunctions() throws(ManifestError) -> [FunctionSignature] {
        let kinds = try readHandleKinds()
        guard let value = members["functions"] else {
            if let kind = kinds.release.keys.sorted().first {
                throw error("handles.\(kind).release", "names \(kinds.release[kind] ?? ""), but the manifest declares no functions")
            }
            return []
        }
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
            let parameters = try entry.readArguments(of: name, kinds: kinds)
            let (returns, returnKind, returnedStruct) = try entry.readReturns(of: name, kinds: kinds)
            var reportsErrno = false
            if let errnoValue = entry.members["errno"] {
                guard case .bool(let flag) = errnoValue else {
                    throw entry.error("errno", "must be true or false, found \(errnoValue.typeName)")
                }
                reportsErrno = flag
            }
            warnings += entry.warnings
            let releases = kinds.releasedBy[name]
            let signature = FunctionSignature(
                name: name, parameters: parameters, returns: returns, reportsErrno: reportsErrno, returnKind: returnKind,
                releases: releases, returnedStruct: returnedStruct)
            if let kind = releases, let problem = Self.releaseShapeProblem(signature, kind: kind) {
                throw error("handles.\(kind).release", "names \(name), which \(problem)")
            }
            do {
                try signature.validate()
            } catch {
                throw entry.error(error.parameter.map { "arguments[\($0)]" } ?? "name", "is refused: \(error)")
            }
            functions.append(signature)
        }
        for (kind, release) in kinds.release.sorted(by: { $0.key < $1.key }) where !seen.contains(release) {
            throw error("handles.\(kind).release", "names \(release), which \"functions\" does not declare")
        }
        do {
            try FunctionSignature.validateHandles(of: functions)
        } catch {
            throw self.error("functions", "is refused: \(error)")
        }
        return functions
    }

    /// Why `signature` cannot release a `kind` handle: it must take exactly one value from the
    /// caller, a handle of that kind passed by value. Nil when it can.
    private static func releaseShapeProblem(_ signature: FunctionSignature, kind: String) -> String? {
        let inputs = signature.inputs
        let shape = "a release function takes exactly one value from the caller, a \(kind) handle passed by value"
        guard inputs.count == 1 else {
            return "takes \(inputs.count) values from the caller (\(signature)); \(shape)"
        }
        let input = inputs[0]
        let argument = "argument \(input.parameter + 1)" + (signature.parameters[input.parameter].name.map { " ('\($0)')" } ?? "")
        guard input.type == .handle, input.kind == kind else {
            let given = input.type == .handle ? "a \(input.kind ?? "") handle" : input.type.rawValue
            return "takes \(given) as \(argument); \(shape)"
        }
        return nil
    }

    /// `"int32"`, `{"type": "handle", "kind": "sqlite3_stmt"}`, or a struct returned by value:
    /// `{"type": "struct", "struct": "div_t", "get": ["quot", "rem"]}`.
    private mutating func readReturns(
        of function: String, kinds: HandleKinds
    ) throws(ManifestError) -> (FunctionValueType, String?, FunctionStructAccess?) {
        guard case .object? = members["returns"], let value = members["returns"] else {
            let typeName = try requiredString("returns")
            if typeName == "handle" {
                throw error("returns", "is a handle of no kind (write {\"type\": \"handle\", \"kind\": …})")
            }
            if typeName == "struct" {
                throw error("returns", "is a struct of no layout (write {\"type\": \"struct\", \"struct\": …, \"get\": […]})")
            }
            return (try Self.returnType(typeName) { problem throws(ManifestError) in throw error("returns", problem) }, nil, nil)
        }
        var returns = ObjectReader(file: file, path: keyPath("returns"), value: value)
        returns.warnUnknownKeys(ManifestParser.returnKeys)
        warnings += returns.warnings
        let typeName = try returns.requiredString("type")
        if typeName != "handle", returns.members["kind"] != nil {
            throw returns.error("kind", "does not apply: \(typeName) is not a handle")
        }
        if typeName != "struct" {
            for key in ["struct", "get"] where returns.members[key] != nil {
                throw returns.error(key, "does not apply: \(typeName) is not a struct")
            }
        }
        switch typeName {
        case "handle":
            return (.handle, try returns.handleKind(of: function, kinds: kinds), nil)
        case "struct":
            let structName = try returns.requiredString("struct")
            guard let layout = kinds.structs[structName] else {
                throw returns.error("struct", "names struct '\(InertText.escape(structName))', which \"structs\" does not declare")
            }
            return (.void, nil, try returns.readStructAccess(layout, of: function))
        default:
            return (try Self.returnType(typeName) { problem throws(ManifestError) in throw returns.error("type", problem) }, nil, nil)
        }
    }

    private static func returnType(
        _ name: String, refuse: (String) throws(ManifestError) -> Never
    ) throws(ManifestError) -> FunctionValueType {
        guard let type = FunctionValueType(rawValue: name) else {
            try refuse("names unknown type '\(InertText.escape(name))' (\(typeList))")
        }
        guard type.isValidReturn else { try refuse("cannot be bytes (a C function cannot return a length)") }
        return type
    }

    /// The `kind` of a handle: a kind `handles` declares.
    private func handleKind(of function: String, kinds: HandleKinds) throws(ManifestError) -> String {
        guard members["kind"] != nil else {
            throw error("kind", "is missing (a handle of \(function) needs a kind the manifest's \"handles\" declares; \(kinds.list))")
        }
        let kind = try requiredString("kind")
        guard kinds.release[kind] != nil else {
            throw error(
                "kind", "names handle kind '\(InertText.escape(kind))' of \(function), which \"handles\" does not declare (\(kinds.list))")
        }
        return kind
    }

    /// The argument objects' types besides the value types.
    static let argumentKinds: Set<String> = ["handle", "pointer", "buffer", "null", "struct", "callback"]

    static var typeList: String {
        "one of " + FunctionValueType.allCases.map(\.rawValue).joined(separator: ", ")
    }

    /// The `arguments` array: each a type name or an argument object; counts resolved by name.
    private mutating func readArguments(of function: String, kinds: HandleKinds) throws(ManifestError) -> [FunctionParameter] {
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
            drafts.append(try readArgument(element, key: "arguments[\(position)]", function: function, kinds: kinds))
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
                parameters.append(FunctionParameter(kind, name: draft.name, fields: draft.fields))
            case .callback(let callback):
                switch callback.resolved(outerIndex: indexByName) {
                case .success(let signature):
                    parameters.append(FunctionParameter(.callback(signature), name: draft.name))
                case .failure(let unresolved):
                    throw error(
                        "arguments[\(position)].arguments",
                        "is refused: a buffer of callback '\(draft.name ?? "")' of \(function) is counted by '\(unresolved.name)', which is neither an argument of the callback nor of \(function)"
                    )
                }
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

    private mutating func readArgument(
        _ value: JSONValue, key: String, function: String, kinds: HandleKinds
    ) throws(ManifestError) -> ArgumentDraft {
        switch value {
        case .string(let typeName):
            if typeName == "null" { return ArgumentDraft(name: nil, kind: .resolved(.null)) }
            if typeName == "handle" {
                throw error(key, "is a handle of no kind (write {\"type\": \"handle\", \"kind\": …})")
            }
            guard let type = FunctionValueType(rawValue: typeName) else {
                throw error(key, "names unknown type '\(typeName)' (\(Self.typeList), or null)")
            }
            guard type.isValidArgument else { throw error(key, "cannot be void") }
            return ArgumentDraft(name: nil, kind: .resolved(.value(type)))
        case .object:
            var argument = ObjectReader(file: file, path: keyPath(key), value: value)
            argument.warnUnknownKeys(ManifestParser.argumentKeys)
            defer { warnings += argument.warnings }
            return try argument.readArgumentObject(function: function, kinds: kinds)
        default:
            throw error(key, "must be a type name or an argument object, found \(value.typeName)")
        }
    }

    /// `{"name": "exponent", "type": "pointer", "to": "int32", "direction": "out"}`,
    /// `{"name": "dest", "type": "buffer", "direction": "out", "count": "*destLen"}`, `{"type": "null"}`,
    /// `{"name": "level", "type": "int32"}`, `{"name": "ppDb", "type": "handle", "kind": "sqlite3", "direction": "out"}`.
    private func readArgumentObject(function: String, kinds: HandleKinds) throws(ManifestError) -> ArgumentDraft {
        let name = try optionalString("name")
        if let name, !ManifestParser.isCIdentifier(name) {
            throw error("name", "must be a C identifier, found '\(InertText.escape(name))'")
        }
        let type = try requiredString("type")
        func refuseKeys(_ keys: [String], _ reason: String) throws(ManifestError) {
            for key in keys where members[key] != nil { throw error(key, "does not apply: \(reason)") }
        }
        // An unknown type first: a draft's "TODO: …" type is quoted, not a key it brings refused.
        guard Self.argumentKinds.contains(type) || FunctionValueType(rawValue: type) != nil else {
            throw error(
                "type",
                "names unknown type '\(InertText.escape(type))' (\(Self.typeList), pointer, buffer, null, handle, struct or callback)")
        }
        if type != "handle" { try refuseKeys(["kind"], "only a handle has a kind") }
        if type != "struct" { try refuseKeys(["struct", "by"], "only a struct argument names a struct") }
        if type != "struct" && type != "handle" { try refuseKeys(["set", "get"], "only a struct argument or a struct handle has fields") }
        if type != "callback" { try refuseKeys(["arguments", "returns"], "only a callback has arguments and a return type") }
        switch type {
        case "callback":
            try refuseKeys(["to", "element", "count", "direction"], "a callback is declared by its arguments and return type")
            guard name != nil else { throw error("name", "is missing (a callback needs a name: a caller gives its handler by it)") }
            return ArgumentDraft(name: name, kind: .callback(try readCallback(of: function)))
        case "struct":
            try refuseKeys(["to", "element", "count", "direction"], "a struct argument says what it exchanges with set and get")
            guard name != nil else { throw error("name", "is missing (a struct argument needs a name: its fields are named by it)") }
            let structName = try requiredString("struct")
            guard let layout = kinds.structs[structName] else {
                throw error("struct", "names struct '\(InertText.escape(structName))', which \"structs\" does not declare")
            }
            let passing = try optionalString("by") ?? "pointer"
            guard passing == "pointer" || passing == "value" else {
                throw error(
                    "by", "must be pointer (struct \(structName) *) or value (struct \(structName)), found '\(InertText.escape(passing))'")
            }
            return ArgumentDraft(
                name: name, kind: .resolved(passing == "value" ? .structureValue : .structure),
                fields: try readStructAccess(layout, of: function))
        case "handle":
            try refuseKeys(["to", "element", "count"], "a handle is one opaque pointer of its kind")
            let kind = try handleKind(of: function, kinds: kinds)
            var fields: FunctionStructAccess?
            if let layout = kinds.layout[kind] {
                fields = try readStructAccess(layout, of: function)
            } else {
                try refuseKeys(["set", "get"], "handle kind \(kind) is not a struct (\"handles\" gives it no \"struct\")")
            }
            var direction = FunctionDirection.in
            if members["direction"] != nil {
                direction = try self.direction()
                guard direction != .inout else {
                    throw error("direction", "must be in or out for a handle (passed by value, or written through a pointer)")
                }
            }
            if direction == .out, name == nil {
                throw error("name", "is missing (an out handle needs a name: the result reports the handle by it)")
            }
            return ArgumentDraft(name: name, kind: .resolved(.handle(kind, direction)), fields: fields)
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
