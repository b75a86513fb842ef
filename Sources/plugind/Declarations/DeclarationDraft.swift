import Foundation
import PlugindTypes

/// What `plugind declare` derives from a header: a manifest declaration for each function C lets
/// it express, and the layout of each struct those functions point to, with what C cannot say
/// (which way a pointer goes, what counts a buffer, which function releases a handle, whether a
/// struct lives for one call or between calls) left as `TODO:` values for the author — values
/// `plugind verify` refuses, naming the function and argument, until they are completed. A
/// function or struct field the vocabulary cannot express is listed with the reason, never dropped.
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

    /// A struct a drafted function points to (`z_stream *`), laid out as the header's compiler
    /// lays it out: the fields a manifest can declare, what C does not say about its pointer
    /// fields left to the author, and the fields a manifest cannot declare left out, with why.
    struct DraftedStruct: Sendable, Equatable {
        var name: String
        var declaration: DraftJSON
        var toComplete: [ToComplete]
        /// Named `struct.field` (`z_stream.zalloc`).
        var leftOut: [NotDeclarable]
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
    /// The functions that cannot be declared, then the struct fields left out (`z_stream.zalloc`).
    var notDeclarable: [NotDeclarable] = []
    var handles: [HandleKind] = []
    var structs: [DraftedStruct] = []

    /// Drafts `selected` (every function the header declares when nil), in the header's order.
    init(_ header: [HeaderFunction], selected: [String]? = nil) throws(UnknownFunctions) {
        if let selected {
            let declared = Set(header.map(\.name))
            let unknown = selected.filter { !declared.contains($0) }
            guard unknown.isEmpty else { throw UnknownFunctions(names: unknown) }
        }
        let wanted = selected.map(Set.init)
        var kinds: [String] = []
        var records: [HeaderRecord] = []
        for function in header where wanted?.contains(function.name) ?? true {
            switch Self.draft(function, in: header) {
            case .success(let (drafted, usedKinds, usedRecords)):
                functions.append(drafted)
                for kind in usedKinds where !kinds.contains(kind) { kinds.append(kind) }
                for record in usedRecords where !records.contains(where: { $0.name == record.name }) { records.append(record) }
            case .failure(let refusal):
                notDeclarable.append(refusal)
            }
        }
        handles = kinds.map { kind in
            HandleKind(kind: kind, releaseCandidates: Self.releaseCandidates(in: header) { Self.recordName($0) == kind })
        }
        structs = records.map(Self.draftStruct)
        notDeclarable += structs.flatMap(\.leftOut)
    }

    /// `{"functions": [...], "handles": {...}, "structs": {...}}`: what goes into the manifest
    /// beside its other keys.
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
        if !structs.isEmpty {
            members.append(("structs", .object(structs.map { ($0.name, $0.declaration) })))
        }
        return .object(members)
    }

    /// Every value left to the author, the structs' pointer fields and the handles' release
    /// functions included.
    var allToComplete: [ToComplete] {
        functions.flatMap(\.toComplete) + structs.flatMap(\.toComplete)
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

    /// A function's declaration, with the handle kinds and the structs it uses.
    private static func draft(
        _ function: HeaderFunction, in header: [HeaderFunction]
    ) -> Result<(Drafted, [String], [HeaderRecord]), NotDeclarable> {
        func refuse(_ reason: String) -> Result<(Drafted, [String], [HeaderRecord]), NotDeclarable> {
            .failure(NotDeclarable(name: function.name, reason: reason))
        }
        if function.isStatic { return refuse("is static or inline in the header: no library exports it") }
        if function.isVariadic { return refuse("is variadic (…): a declaration lists every argument's type") }
        if function.parameters.count > 64 { return refuse("has \(function.parameters.count) arguments; at most 64 are allowed") }
        var arguments: [DraftJSON] = []
        var toComplete: [ToComplete] = []
        var kinds: [String] = []
        var records: [HeaderRecord] = []
        var names = function.parameters.enumerated().map { Self.argumentName($1.name, index: $0) }
        if Set(names).count != names.count {
            names = function.parameters.enumerated().map { $1.name.isEmpty ? "arg\($0 + 1)" : $1.name }
        }
        for (index, parameter) in function.parameters.enumerated() {
            let name = names[index]
            let next = function.parameters.indices.contains(index + 1) ? function.parameters[index + 1] : nil
            let nextName = names.indices.contains(index + 1) ? names[index + 1] : ""
            switch argument(parameter.type, name: name, next: next, nextName: nextName, header: header) {
            case .failure(let reason):
                return refuse("\(name) \(reason.text)")
            case .success(let drafted):
                arguments.append(drafted.json)
                toComplete += drafted.todo.map { ToComplete(function: function.name, argument: name, field: $0.field, note: $0.note) }
                if let kind = drafted.kind, !kinds.contains(kind) { kinds.append(kind) }
                if let record = drafted.record { records.append(record) }
            }
        }
        let returns: DraftJSON
        switch result(function.result) {
        case .failure(let reason): return refuse("returns \(reason.text)")
        case .success(let drafted):
            returns = drafted.json
            if let kind = drafted.kind, !kinds.contains(kind) { kinds.append(kind) }
            if let record = drafted.record { records.append(record) }
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
        return .success((Drafted(name: function.name, declaration: declaration, toComplete: toComplete), kinds, records))
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
        /// The struct it points to, whose layout the draft's `structs` gives.
        var record: HeaderRecord?
    }

    /// The header's name for an argument, without the `__` system headers reserve (`__exponent`).
    private static func argumentName(_ name: String, index: Int) -> String {
        if name.isEmpty { return "arg\(index + 1)" }
        let stripped = String(name.drop { $0 == "_" })
        return FunctionSignature.isCIdentifier(stripped) ? stripped : name
    }

    private static func argument(
        _ type: HeaderType, name: String, next: HeaderFunction.Parameter?, nextName: String, header: [HeaderFunction]
    ) -> Result<DraftedArgument, Reason> {
        let named: (String) -> DraftJSON = { typeName in .object([("name", .string(name)), ("type", .string(typeName))]) }
        switch type.pointerDepth {
        case 0:
            if let scalar = scalarName(kind: type.kind, size: type.size), scalar != "void" {
                return .success(DraftedArgument(json: named(scalar)))
            }
            if type.kind == HeaderType.Kind.record, let record = type.record, !record.isUnion, FunctionSignature.isCIdentifier(record.name)
            {
                return valueFields(record).map { fields in
                    let set = fields.filter { !$0.isString }.map { DraftJSON.string($0.name) }
                    let json = DraftJSON.object([
                        ("name", .string(name)), ("type", .string("struct")), ("struct", .string(record.name)), ("by", .string("value")),
                        ("set", .array(set)),
                    ])
                    return DraftedArgument(json: json, record: record)
                }
            }
            if type.kind == HeaderType.Kind.record {
                return .failure(Reason("is a union or unnamed struct passed by value (\(type.spelling)): not declarable"))
            }
            return .failure(Reason("is of type \(type.spelling), which a declaration cannot pass"))
        case 1:
            if let record = type.record, !record.isUnion, FunctionSignature.isCIdentifier(record.name) {
                let releases = releaseCandidates(in: header) { $0.pointerDepth == 1 && $0.record?.name == record.name }
                return .success(structArgument(record, name: name, releaseCandidates: releases))
            }
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
            return callbackArgument(type, name: name)
        }
        if let kind = opaqueKind(type) {
            let json = DraftJSON.object([("name", .string(name)), ("type", .string("handle")), ("kind", .string(kind))])
            return .success(DraftedArgument(json: json, kind: kind))
        }
        if inner == HeaderType.Kind.record, let kind = recordName(type) {
            // A union the header completes (or a struct it names with no identifier): a handle
            // only if callers never read its members, for a union has no layout a manifest declares.
            let what = type.innermostIsUnion ? "union" : "struct"
            let json = DraftJSON.object([
                ("name", .string(name)), ("type", .string("handle")),
                (
                    "kind",
                    .string(
                        todo
                            + "\(kind) (the header completes this \(what) of \(type.innermostSize) bytes: a handle if callers only pass it back)"
                    )
                ),
            ])
            var drafted = DraftedArgument(json: json, kind: kind)
            drafted.todo.append(
                ("kind", "\(kind) if the library owns the \(what) and callers only pass it back; unions are not declarable by layout"))
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

    /// A function the library calls during the call (`qsort`'s `compar`): a callback with its own
    /// signature. C does not say what counts a buffer the library passes it, nor whether the
    /// handler needs to see a pointer at all (a context pointer it does not: `null`).
    private static func callbackArgument(_ type: HeaderType, name: String) -> Result<DraftedArgument, Reason> {
        guard let types = type.callback, let result = types.first else {
            return .failure(
                Reason("is a pointer to a function without a prototype (\(type.spelling)): a callback's arguments must be known"))
        }
        if type.callbackIsVariadic { return .failure(Reason("is a variadic callback (\(type.spelling)): not declarable")) }
        guard type.callbackParameterCount == types.count - 1 else {
            return .failure(Reason("is a callback of \(type.callbackParameterCount) arguments (\(type.spelling)): not declarable"))
        }
        var arguments: [DraftJSON] = []
        var todos: [(field: String, note: String)] = []
        var integers = 0
        var floats = 0
        let counts = "a constant, one of the callback's integer arguments, or one of the function's (qsort's size)"
        let parameters = Array(types.dropFirst())
        func isInteger(_ type: HeaderType) -> Bool {
            type.pointerDepth == 0
                && scalarName(kind: type.kind, size: type.size).map { !["void", "float", "double", "bool"].contains($0) } == true
        }
        for (index, parameter) in parameters.enumerated() {
            let argument = "arg\(index + 1)"
            let inner = parameter.innermostKind
            let isCharacter = inner == HeaderType.Kind.charSigned || inner == HeaderType.Kind.signedChar
            if parameter.pointerDepth == 0 {
                guard let scalar = scalarName(kind: parameter.kind, size: parameter.size), scalar != "void" else {
                    return .failure(
                        Reason("is a callback whose argument \(index + 1) is a \(parameter.spelling), which a callback cannot take"))
                }
                if scalar == "float" || scalar == "double" { floats += 1 } else { integers += 1 }
                arguments.append(.object([("name", .string(argument)), ("type", .string(scalar))]))
                continue
            }
            integers += 1
            let element = inner == HeaderType.Kind.void || isCharacter ? "uint8" : scalarName(kind: inner, size: parameter.innermostSize)
            if parameter.pointerDepth == 1, isCharacter, parameter.innermostIsConst {
                arguments.append(.object([("name", .string(argument)), ("type", .string("string"))]))
            } else if parameter.pointerDepth == 2, isCharacter {
                // An array of strings is counted by an earlier integer (sqlite3_exec's row callback).
                let guess = parameters[..<index].lastIndex(where: isInteger).map { " (arg\($0 + 1)?)" } ?? ""
                arguments.append(
                    .object([
                        ("name", .string(argument)), ("type", .string("strings")), ("count", .string(todo + "what counts them" + guess)),
                    ]))
                todos.append(
                    ("\(argument).count", "the number of strings: a constant or an earlier integer argument of the callback" + guess))
            } else if parameter.pointerDepth == 1, let element, element != "void" {
                arguments.append(
                    .object([
                        ("name", .string(argument)), ("type", .string("buffer")), ("element", .string(element)),
                        ("count", .string(todo + "what counts it")),
                    ]))
                todos.append(
                    (
                        "\(argument).count",
                        "the number of \(element) elements the handler reads: \(counts); or \"null\" for the argument if it need not see it"
                    ))
            } else {
                arguments.append(.string(todo + "null (the handler cannot see a \(parameter.spelling))"))
                todos.append((argument, "\"null\": a \(parameter.spelling) is passed on to no handler"))
            }
        }
        guard integers <= FunctionCallbackSignature.maximumIntegerArguments, floats <= FunctionCallbackSignature.maximumFloatingArguments
        else {
            return .failure(
                Reason(
                    "is a callback of \(integers) integer or pointer and \(floats) floating arguments (\(type.spelling)): at most \(FunctionCallbackSignature.maximumIntegerArguments) and \(FunctionCallbackSignature.maximumFloatingArguments) are declarable"
                ))
        }
        guard result.pointerDepth == 0, let returns = scalarName(kind: result.kind, size: result.size) else {
            return .failure(Reason("is a callback returning a \(result.spelling) (\(type.spelling)): a callback returns a scalar or void"))
        }
        var drafted = DraftedArgument(
            json: .object([
                ("name", .string(name)), ("type", .string("callback")), ("arguments", .array(arguments)), ("returns", .string(returns)),
            ]))
        drafted.todo = todos
        return .success(drafted)
    }

    /// A pointer to a struct the header completes (`z_stream *strm`): a struct the worker makes for
    /// the call, or a handle of a kind that is that struct, kept between calls. C cannot say which
    /// (zlib keeps a pointer to the stream in its state), nor which fields a call sets and reads.
    private static func structArgument(_ record: HeaderRecord, name: String, releaseCandidates: [String]) -> DraftedArgument {
        let guess = releaseCandidates.isEmpty ? "" : ", " + releaseCandidates.joined(separator: " or ") + "?"
        let type =
            todo + "struct (made for this call) or handle (kept between calls: a kind in \"handles\" with \"struct\": "
            + "\"\(record.name)\" and a release function\(guess))"
        let json = DraftJSON.object([
            ("name", .string(name)), ("type", .string(type)), ("struct", .string(record.name)), ("set", .array([])), ("get", .array([])),
        ])
        var drafted = DraftedArgument(json: json, record: record)
        drafted.todo.append(
            (
                "type",
                "struct if the library uses the \(record.name) during the call only (the worker makes it, zeroed, for each call); "
                    + "handle if it keeps it between calls: \"kind\" in place of \"struct\", naming a kind of \"handles\" with "
                    + "\"struct\": \"\(record.name)\" and its release function (and \"direction\": \"out\" where a function "
                    + "initialises it); then list in set and get the fields the call gives and reads"
            ))
        return drafted
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

    /// The fields of a struct passed or returned by value, each a scalar or a string: its layout
    /// must declare every field, so one the vocabulary cannot hold refuses the function.
    private static func valueFields(_ record: HeaderRecord) -> Result<[(name: String, isString: Bool)], Reason> {
        var fields: [(name: String, isString: Bool)] = []
        for field in record.fields {
            let prefix = "is a struct passed by value (\(record.name)) whose field \(field.name.isEmpty ? "(anonymous)" : field.name) is "
            switch fieldShape(field) {
            case .success(.scalar): fields.append((field.name, false))
            case .success(.string): fields.append((field.name, true))
            case .success(.buffer):
                return .failure(Reason(prefix + "a pointer: a struct passed by value holds scalars and strings"))
            case .failure(let reason):
                return .failure(Reason(prefix + reason.text + "; a struct passed by value declares every field"))
            }
        }
        return .success(fields)
    }

    private static func result(_ type: HeaderType) -> Result<(json: DraftJSON, kind: String?, record: HeaderRecord?), Reason> {
        switch type.pointerDepth {
        case 0:
            if let scalar = scalarName(kind: type.kind, size: type.size) { return .success((.string(scalar), nil, nil)) }
            if type.kind == HeaderType.Kind.record, let record = type.record, !record.isUnion, FunctionSignature.isCIdentifier(record.name)
            {
                return valueFields(record).map { fields in
                    let json = DraftJSON.object([
                        ("type", .string("struct")), ("struct", .string(record.name)), ("get", .array(fields.map { .string($0.name) })),
                    ])
                    return (json, nil, record)
                }
            }
            return .failure(Reason("\(type.spelling), which a declaration cannot return"))
        case 1:
            let inner = type.innermostKind
            if inner == HeaderType.Kind.charSigned || inner == HeaderType.Kind.signedChar { return .success((.string("string"), nil, nil)) }
            if let kind = opaqueKind(type) {
                return .success((.object([("type", .string("handle")), ("kind", .string(kind))]), kind, nil))
            }
            if inner == HeaderType.Kind.record, let kind = recordName(type) {
                let note = todo + "\(kind) (the header completes this struct: a handle if callers only pass it back)"
                return .success((.object([("type", .string("handle")), ("kind", .string(note))]), kind, nil))
            }
            if inner == HeaderType.Kind.unsignedChar || inner == HeaderType.Kind.charUnsigned, type.innermostIsConst {
                return .success((.string(todo + "string, if it is NUL-terminated text (\(type.spelling))"), nil, nil))
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

    /// Functions of the header that take one pointer `matching` a kind and nothing else, whose
    /// names say they end something.
    private static func releaseCandidates(in header: [HeaderFunction], matching: (HeaderType) -> Bool) -> [String] {
        let endings = ["close", "free", "finalize", "destroy", "release", "delete", "end", "dispose", "unref"]
        return header.filter { function in
            guard !function.isStatic, function.parameters.count == 1, matching(function.parameters[0].type),
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

    // MARK: Structs

    /// What a field of a struct is in a manifest.
    private enum FieldShape {
        case scalar(String)
        case string
        case buffer(element: String, isConst: Bool)

        var isInteger: Bool {
            guard case .scalar(let type) = self else { return false }
            return type.hasPrefix("int") || type.hasPrefix("uint")
        }
    }

    /// A field as a manifest declares it, or why it is left out. A pointer the host must never
    /// write (an opaque pointer, a function pointer, a pointer to a struct) is left out: the bytes
    /// no field declares stay the library's.
    private static func fieldShape(_ field: HeaderRecord.Field) -> Result<FieldShape, Reason> {
        let type = field.type
        let record = type.innermostIsUnion ? "union" : "struct"
        let fieldKinds = "a field is a scalar, a string or a buffer"
        if field.name.isEmpty { return .failure(Reason("an anonymous \(record) member: \(fieldKinds)")) }
        if field.isBitField { return .failure(Reason("a bit-field (\(type.spelling)): a field is whole bytes at an offset")) }
        if field.offsetBits < 0 || field.offsetBits % 8 != 0 { return .failure(Reason("at no byte offset libclang can give")) }
        switch type.pointerDepth {
        case 0:
            if type.kind == HeaderType.Kind.record { return .failure(Reason("a nested \(record) (\(type.spelling)): \(fieldKinds)")) }
            if HeaderType.Kind.arrays.contains(type.kind) { return .failure(Reason("an array (\(type.spelling)): \(fieldKinds)")) }
            if let scalar = scalarName(kind: type.kind, size: type.size), scalar != "void" { return .success(.scalar(scalar)) }
            return .failure(Reason("of type \(type.spelling), which no field type holds"))
        case 1:
            let inner = type.innermostKind
            if inner == HeaderType.Kind.charSigned || inner == HeaderType.Kind.charUnsigned { return .success(.string) }
            if inner == HeaderType.Kind.functionPrototype || inner == HeaderType.Kind.functionWithoutPrototype {
                return .failure(Reason("a function pointer (\(type.spelling)): a callback is an argument, not a field"))
            }
            if inner == HeaderType.Kind.record {
                if type.innermostSize < 0 {
                    return .failure(Reason("an opaque pointer (\(type.spelling)): the library's, never the host's to write"))
                }
                return .failure(Reason("a pointer to a \(record) (\(type.spelling)): a buffer field points to scalars"))
            }
            if inner == HeaderType.Kind.void { return .success(.buffer(element: "uint8", isConst: type.innermostIsConst)) }
            if let scalar = scalarName(kind: inner, size: type.innermostSize), scalar != "void" {
                return .success(.buffer(element: scalar, isConst: type.innermostIsConst))
            }
            return .failure(Reason("a pointer (\(type.spelling)) to what no buffer field holds"))
        default:
            return .failure(Reason("a pointer to a pointer (\(type.spelling)): a buffer field points to scalars"))
        }
    }

    /// `{"size": 112, "alignment": 8, "fields": [...]}`: every field the vocabulary can declare,
    /// each at its offset. A pointer to scalars is a buffer whose direction (unless the pointee is
    /// const), count and advancing C does not say: the count suggested is the next integer field
    /// not already suggested for an earlier buffer (`next_in`, `avail_in`).
    private static func draftStruct(_ record: HeaderRecord) -> DraftedStruct {
        let shapes = record.fields.map { field in (field, fieldShape(field)) }
        var fields: [DraftJSON] = []
        var toComplete: [ToComplete] = []
        var leftOut: [NotDeclarable] = []
        var suggested: Set<String> = []
        for (index, (field, shape)) in shapes.enumerated() {
            let offset = field.offsetBits / 8
            let placed: [(String, DraftJSON)] = [("name", .string(field.name)), ("offset", .integer(offset))]
            switch shape {
            case .failure(let reason):
                let name = field.name.isEmpty ? "(anonymous at byte \(max(offset, 0)))" : field.name
                leftOut.append(NotDeclarable(name: "\(record.name).\(name)", reason: "left out: " + reason.text))
            case .success(.scalar(let type)):
                fields.append(.object(placed + [("type", .string(type))]))
            case .success(.string):
                fields.append(.object(placed + [("type", .string("string"))]))
            case .success(.buffer(let element, let isConst)):
                func todoField(_ key: String, _ note: String) {
                    toComplete.append(ToComplete(function: "structs", argument: record.name, field: "\(field.name).\(key)", note: note))
                }
                let counter = shapes[(index + 1)...].first { candidate in
                    (try? candidate.1.get())?.isInteger == true && !suggested.contains(candidate.0.name)
                }?.0.name
                if let counter { suggested.insert(counter) }
                let guess = counter.map { " (\($0)?)" } ?? ""
                let direction: DraftJSON
                if isConst {
                    // The library cannot write through a pointer to const: the caller's elements.
                    direction = .string("in")
                } else {
                    direction = .string(todo + "in (the caller's bytes) or out (room the library fills)")
                    todoField("direction", "in (the caller's elements) or out (room the library fills)")
                }
                todoField("count", "the integer field of \(record.name) that counts its \(element) elements" + guess)
                todoField(
                    "advances",
                    "true if the library moves the pointer along and decreases the count as it goes (zlib's next_in), else false")
                fields.append(
                    .object(
                        placed + [
                            ("type", .string("buffer")), ("direction", direction), ("element", .string(element)),
                            ("count", .string(todo + "the integer field that counts it" + guess)),
                            (
                                "advances",
                                .string(todo + "true if the library moves the pointer along and decreases the count as it goes, else false")
                            ),
                        ]))
            }
        }
        let declaration = DraftJSON.object([
            ("size", .integer(record.size)), ("alignment", .integer(record.alignment)), ("fields", .array(fields)),
        ])
        return DraftedStruct(name: record.name, declaration: declaration, toComplete: toComplete, leftOut: leftOut)
    }
}
