import Foundation
import PlugindTypes

/// What `plugind declare` derives from a header: a manifest declaration for each function C lets
/// it express, with what C cannot say (which way a pointer goes, what counts a buffer, which
/// function releases a handle) left as `TODO:` values for the author — values `plugind verify`
/// refuses, naming the function and argument, until they are completed. A function the vocabulary
/// cannot express is listed with the reason, never dropped.
struct DeclarationDraft: Sendable, Equatable {
    /// A value the author has to write.
    struct ToComplete: Sendable, Equatable {
        var function: String
        /// The argument's name, or nil for the function's own fields.
        var argument: String?
        var field: String
        var note: String
    }

    struct Drafted: Sendable, Equatable {
        var name: String
        var declaration: DraftJSON
        var toComplete: [ToComplete]
    }

    struct NotDeclarable: Error, Sendable, Equatable {
        var name: String
        var reason: String
    }

    /// A handle kind the drafted functions use, and the header's functions that may release it.
    struct HandleKind: Sendable, Equatable {
        var kind: String
        var releaseCandidates: [String]
    }

    /// A function asked for by name that the header does not declare.
    struct UnknownFunctions: Error, Equatable {
        var names: [String]
    }

    static let todo = "TODO: "

    var functions: [Drafted] = []
    var notDeclarable: [NotDeclarable] = []
    var handles: [HandleKind] = []

    /// Drafts `selected` (every function the header declares when nil), in the header's order.
    init(_ header: [HeaderFunction], selected: [String]? = nil) throws(UnknownFunctions) {
        if let selected {
            let declared = Set(header.map(\.name))
            let unknown = selected.filter { !declared.contains($0) }
            guard unknown.isEmpty else { throw UnknownFunctions(names: unknown) }
        }
        let wanted = selected.map(Set.init)
        var kinds: [String] = []
        for function in header where wanted?.contains(function.name) ?? true {
            switch Self.draft(function) {
            case .success(let (drafted, usedKinds)):
                functions.append(drafted)
                for kind in usedKinds where !kinds.contains(kind) { kinds.append(kind) }
            case .failure(let refusal):
                notDeclarable.append(refusal)
            }
        }
        handles = kinds.map { kind in HandleKind(kind: kind, releaseCandidates: Self.releaseCandidates(of: kind, in: header)) }
    }

    /// `{"functions": [...], "handles": {...}}`: what goes into the manifest beside its other keys.
    var fragment: DraftJSON {
        var members: [(String, DraftJSON)] = [("functions", .array(functions.map(\.declaration)))]
        if !handles.isEmpty {
            members.append(
                (
                    "handles",
                    .object(
                        handles.map { handle in
                            (handle.kind, .object([("release", .string(Self.releaseTodo(handle)))]))
                        })
                ))
        }
        return .object(members)
    }

    /// Every value left to the author, the handles' release functions included.
    var allToComplete: [ToComplete] {
        functions.flatMap(\.toComplete)
            + handles.map { handle in
                ToComplete(
                    function: "handles", argument: handle.kind, field: "release",
                    note: "the declared function that releases a \(handle.kind) (it takes the handle and nothing else)")
            }
    }

    private static func releaseTodo(_ handle: HandleKind) -> String {
        let guess = handle.releaseCandidates.isEmpty ? "" : " (\(handle.releaseCandidates.joined(separator: " or "))?)"
        return todo + "the function that releases a \(handle.kind)" + guess
    }

    // MARK: Classifying

    private static func draft(_ function: HeaderFunction) -> Result<(Drafted, [String]), NotDeclarable> {
        func refuse(_ reason: String) -> Result<(Drafted, [String]), NotDeclarable> {
            .failure(NotDeclarable(name: function.name, reason: reason))
        }
        if function.isStatic { return refuse("is static or inline in the header: no library exports it") }
        if function.isVariadic { return refuse("is variadic (…): a declaration lists every argument's type") }
        if function.parameters.count > 64 { return refuse("has \(function.parameters.count) arguments; at most 64 are allowed") }
        var arguments: [DraftJSON] = []
        var toComplete: [ToComplete] = []
        var kinds: [String] = []
        var names = function.parameters.enumerated().map { Self.argumentName($1.name, index: $0) }
        if Set(names).count != names.count {
            names = function.parameters.enumerated().map { $1.name.isEmpty ? "arg\($0 + 1)" : $1.name }
        }
        for (index, parameter) in function.parameters.enumerated() {
            let name = names[index]
            let next = function.parameters.indices.contains(index + 1) ? function.parameters[index + 1] : nil
            switch argument(parameter.type, name: name, next: next, nextName: names.indices.contains(index + 1) ? names[index + 1] : "") {
            case .failure(let reason):
                return refuse("\(name) \(reason.text)")
            case .success(let drafted):
                arguments.append(drafted.json)
                toComplete += drafted.todo.map { ToComplete(function: function.name, argument: name, field: $0.field, note: $0.note) }
                if let kind = drafted.kind, !kinds.contains(kind) { kinds.append(kind) }
            }
        }
        let returns: DraftJSON
        switch result(function.result) {
        case .failure(let reason): return refuse("returns \(reason.text)")
        case .success(let drafted):
            returns = drafted.json
            if let kind = drafted.kind, !kinds.contains(kind) { kinds.append(kind) }
            if returns.containsTodo {
                toComplete.append(
                    ToComplete(
                        function: function.name, argument: nil, field: "returns",
                        note:
                            "confirm what \(function.result.spelling) is (a string if it is NUL-terminated text; a handle if callers only pass it back)"
                    ))
            }
        }
        let declaration = DraftJSON.object([("name", .string(function.name)), ("arguments", .array(arguments)), ("returns", returns)])
        return .success((Drafted(name: function.name, declaration: declaration, toComplete: toComplete), kinds))
    }

    /// Why an argument or result cannot be declared, completing "<argument> …" or "returns …".
    private struct Reason: Error {
        var text: String
        init(_ text: String) { self.text = text }
    }

    private struct DraftedArgument {
        var json: DraftJSON
        var todo: [(field: String, note: String)] = []
        var kind: String?
    }

    /// The header's name for an argument, without the `__` system headers reserve (`__exponent`).
    private static func argumentName(_ name: String, index: Int) -> String {
        if name.isEmpty { return "arg\(index + 1)" }
        let stripped = String(name.drop { $0 == "_" })
        return FunctionSignature.isCIdentifier(stripped) ? stripped : name
    }

    private static func argument(
        _ type: HeaderType, name: String, next: HeaderFunction.Parameter?, nextName: String
    ) -> Result<DraftedArgument, Reason> {
        let named: (String) -> DraftJSON = { typeName in .object([("name", .string(name)), ("type", .string(typeName))]) }
        switch type.pointerDepth {
        case 0:
            if let scalar = scalarName(kind: type.kind, size: type.size), scalar != "void" {
                return .success(DraftedArgument(json: named(scalar)))
            }
            if type.kind == HeaderType.Kind.record {
                return .failure(Reason("is a struct passed by value (\(type.spelling)): not declarable"))
            }
            return .failure(Reason("is of type \(type.spelling), which a declaration cannot pass"))
        case 1:
            return pointerArgument(type, name: name, next: next, nextName: nextName)
        case 2:
            if let kind = opaqueKind(type) {
                let json = DraftJSON.object([
                    ("name", .string(name)), ("type", .string("handle")), ("kind", .string(kind)), ("direction", .string("out")),
                ])
                return .success(DraftedArgument(json: json, kind: kind))
            }
            var drafted = DraftedArgument(
                json: .object([
                    ("name", .string(name)),
                    (
                        "type",
                        .string(
                            todo
                                + "null, if the function accepts NULL here (\(type.spelling) is declarable only as an out-handle, struct name **)"
                        )
                    ),
                ]))
            drafted.todo.append(("type", "null when the function accepts NULL for it; a \(type.spelling) is not declarable otherwise"))
            return .success(drafted)
        default:
            return .failure(Reason("has \(type.pointerDepth) levels of pointers (\(type.spelling)): not declarable"))
        }
    }

    private static func pointerArgument(
        _ type: HeaderType, name: String, next: HeaderFunction.Parameter?, nextName: String
    ) -> Result<DraftedArgument, Reason> {
        let inner = type.innermostKind
        let isCharacter = inner == HeaderType.Kind.charSigned || inner == HeaderType.Kind.signedChar
        if isCharacter && type.innermostIsConst {
            return .success(DraftedArgument(json: .object([("name", .string(name)), ("type", .string("string"))])))
        }
        if inner == HeaderType.Kind.functionPrototype || inner == HeaderType.Kind.functionWithoutPrototype {
            return .failure(Reason("is a callback (\(type.spelling)): callbacks are not declarable yet"))
        }
        if let kind = opaqueKind(type) {
            let json = DraftJSON.object([("name", .string(name)), ("type", .string("handle")), ("kind", .string(kind))])
            return .success(DraftedArgument(json: json, kind: kind))
        }
        if inner == HeaderType.Kind.record, let kind = recordName(type) {
            // The header shows the struct's fields: a handle only if callers never read them.
            let json = DraftJSON.object([
                ("name", .string(name)), ("type", .string("handle")),
                (
                    "kind",
                    .string(
                        todo
                            + "\(kind) (the header completes this struct of \(type.innermostSize) bytes: a handle if callers only pass it back)"
                    )
                ),
            ])
            var drafted = DraftedArgument(json: json, kind: kind)
            drafted.todo.append(
                ("kind", "\(kind) if the library owns the struct and callers only pass it back; structs by layout are not declarable yet"))
            return .success(drafted)
        }
        let element: String
        if inner == HeaderType.Kind.void || isCharacter {
            element = "uint8"
        } else if let scalar = scalarName(kind: inner, size: type.innermostSize), scalar != "void" {
            element = scalar
        } else {
            return .failure(Reason("points to \(type.spelling), which a declaration cannot describe"))
        }
        let countGuess = countSuggestion(next, nextName: nextName)
        // Bytes (void, char) are buffers; another scalar the function writes is most often one value.
        let isBytes = element == "uint8" || element == "int8"
        if type.innermostIsConst {
            let json = DraftJSON.object([
                ("name", .string(name)), ("type", .string("buffer")), ("direction", .string("in")), ("element", .string(element)),
                ("count", .string(todo + "what counts it" + countGuess)),
            ])
            var drafted = DraftedArgument(json: json)
            drafted.todo.append(("count", "the number of \(element) elements: a constant, an integer argument's name" + countGuess))
            if !isBytes {
                drafted.todo.append(("type", "or one value: \"type\": \"pointer\", \"to\": \"\(element)\", \"direction\": \"in\""))
            }
            return .success(drafted)
        }
        if isBytes {
            let json = DraftJSON.object([
                ("name", .string(name)), ("type", .string("buffer")), ("direction", .string(todo + "out or inout")),
                ("element", .string(element)), ("count", .string(todo + "what counts it" + countGuess)),
            ])
            var drafted = DraftedArgument(json: json)
            drafted.todo.append(("direction", "out (the function only writes it) or inout (it reads what the caller gives, too)"))
            drafted.todo.append(("count", "a constant, an integer argument's name, or *name of an inout length" + countGuess))
            return .success(drafted)
        }
        let json = DraftJSON.object([
            ("name", .string(name)), ("type", .string("pointer")), ("to", .string(element)), ("direction", .string(todo + "out or inout")),
        ])
        var drafted = DraftedArgument(json: json)
        drafted.todo.append(("direction", "out or inout; or a buffer of \(element) elements (\"type\": \"buffer\" with a count)"))
        return .success(drafted)
    }

    /// What the next argument suggests as a count: its name when it is an integer passed by
    /// value, `*name` when it points to one the function may write back.
    private static func countSuggestion(_ next: HeaderFunction.Parameter?, nextName: String) -> String {
        guard let next else { return "" }
        let integer = scalarName(
            kind: next.type.pointerDepth == 0 ? next.type.kind : next.type.innermostKind,
            size: next.type.pointerDepth == 0 ? next.type.size : next.type.innermostSize)
        guard let integer, integer.hasPrefix("int") || integer.hasPrefix("uint") else { return "" }
        if next.type.pointerDepth == 0 { return " (\(nextName)?)" }
        if next.type.pointerDepth == 1 && !next.type.innermostIsConst { return " (*\(nextName)?)" }
        return ""
    }

    private static func result(_ type: HeaderType) -> Result<(json: DraftJSON, kind: String?), Reason> {
        switch type.pointerDepth {
        case 0:
            if let scalar = scalarName(kind: type.kind, size: type.size) { return .success((.string(scalar), nil)) }
            return .failure(Reason("\(type.spelling), which a declaration cannot return"))
        case 1:
            let inner = type.innermostKind
            if inner == HeaderType.Kind.charSigned || inner == HeaderType.Kind.signedChar { return .success((.string("string"), nil)) }
            if let kind = opaqueKind(type) {
                return .success((.object([("type", .string("handle")), ("kind", .string(kind))]), kind))
            }
            if inner == HeaderType.Kind.record, let kind = recordName(type) {
                let note = todo + "\(kind) (the header completes this struct: a handle if callers only pass it back)"
                return .success((.object([("type", .string("handle")), ("kind", .string(note))]), kind))
            }
            if inner == HeaderType.Kind.unsignedChar || inner == HeaderType.Kind.charUnsigned, type.innermostIsConst {
                return .success((.string(todo + "string, if it is NUL-terminated text (\(type.spelling))"), nil))
            }
            return .failure(Reason("a pointer (\(type.spelling)): only strings and handles can be returned"))
        default:
            return .failure(Reason("\(type.spelling): only strings and handles can be returned"))
        }
    }

    /// The kind of an opaque handle: a struct the header never completes (`sqlite3`), under one
    /// or two pointers.
    private static func opaqueKind(_ type: HeaderType) -> String? {
        guard type.innermostSize < 0 else { return nil }
        return recordName(type)
    }

    /// The name of the struct under the pointers, when it has one that is a C identifier.
    private static func recordName(_ type: HeaderType) -> String? {
        guard type.innermostKind == HeaderType.Kind.record else { return nil }
        var name = type.innermostName
        if name.isEmpty {
            name = type.canonical.replacingOccurrences(of: "struct ", with: "").replacingOccurrences(of: "const ", with: "")
                .filter { $0 != "*" && $0 != " " }
        }
        return FunctionSignature.isCIdentifier(name) ? name : nil
    }

    /// A manifest's name for a C scalar of libclang `kind` and `size` bytes; nil for the rest.
    static func scalarName(kind: Int32, size: Int64) -> String? {
        switch kind {
        case HeaderType.Kind.void: "void"
        case HeaderType.Kind.bool: "bool"
        case HeaderType.Kind.charUnsigned, HeaderType.Kind.unsignedChar: "uint8"
        case HeaderType.Kind.charSigned, HeaderType.Kind.signedChar: "int8"
        case HeaderType.Kind.unsignedShort: "uint16"
        case HeaderType.Kind.short: "int16"
        case HeaderType.Kind.unsignedInt: "uint32"
        case HeaderType.Kind.int: "int32"
        case HeaderType.Kind.unsignedLong, HeaderType.Kind.unsignedLongLong: size == 4 ? "uint32" : "uint64"
        case HeaderType.Kind.long, HeaderType.Kind.longLong: size == 4 ? "int32" : "int64"
        case HeaderType.Kind.float: "float"
        case HeaderType.Kind.double: "double"
        case HeaderType.Kind.enumeration: size == 8 ? "int64" : size == 4 ? "int32" : nil
        default: nil
        }
    }

    /// Functions of the header that take one `kind` handle and nothing else, whose names say they
    /// end something.
    private static func releaseCandidates(of kind: String, in header: [HeaderFunction]) -> [String] {
        let endings = ["close", "free", "finalize", "destroy", "release", "delete", "end", "dispose", "unref"]
        return header.filter { function in
            guard !function.isStatic, function.parameters.count == 1, recordName(function.parameters[0].type) == kind,
                function.parameters[0].type.pointerDepth == 1
            else { return false }
            // The last word of the name, a version suffix aside: sqlite3_close_v2, deflateEnd.
            let words = function.name.lowercased().split(separator: "_").filter { word in
                !(word.first == "v" && word.dropFirst().allSatisfy(\.isNumber) && word.count > 1)
            }
            guard let last = words.last else { return false }
            return endings.contains { String(last).hasSuffix($0) }
        }.map(\.name)
    }
}
