extension FunctionSignature {
    /// Checks that the declaration is consistent: types where they may stand, names on pointers
    /// and buffers, and every buffer's count referring to an argument that can count it.
    ///
    /// - Throws: `FunctionDeclarationError` naming the function and the argument.
    public func validate() throws(FunctionDeclarationError) {
        func refuse(_ index: Int?, _ problem: String) -> FunctionDeclarationError {
            FunctionDeclarationError(function: name, parameter: index, argument: index.map(label(ofParameter:)), problem: problem)
        }
        guard Self.isCIdentifier(name) else { throw refuse(nil, "is not a C identifier") }
        guard parameters.count <= Self.maximumParameters else {
            throw refuse(nil, "has \(parameters.count) arguments; at most \(Self.maximumParameters) are allowed")
        }
        guard returns.isValidReturn else { throw refuse(nil, "cannot return bytes (a C function cannot return a length)") }
        switch (returns, returnKind) {
        case (.handle, nil): throw refuse(nil, "returns a handle of no kind")
        case (.handle, let kind?):
            guard Self.isCIdentifier(kind) else { throw refuse(nil, "returns a handle whose kind is not a C identifier") }
        case (_, _?): throw refuse(nil, "returns \(returns), which has no kind")
        case (_, nil): break
        }
        if let returned = returnedStruct {
            guard returns == .void else { throw refuse(nil, "returns both \(returns) and struct \(returned.layout.name)") }
            do {
                try returned.layout.validate()
            } catch {
                throw refuse(nil, "returns struct \(returned.layout.name), which is refused: \(error)")
            }
            if let problem = returned.layout.byValueProblem {
                throw refuse(nil, "returns struct \(returned.layout.name), which \(problem)")
            }
            guard returned.sets.isEmpty else {
                throw refuse(nil, "sets fields of the struct it returns; a returned struct is the library's to fill (list them in get)")
            }
            if let problem = returned.validate() { throw refuse(nil, "returns struct \(returned.layout.name) and \(problem)") }
        }
        var names: Set<String> = []
        var lengthUsers: [Int: Int] = [:]
        for (index, parameter) in parameters.enumerated() {
            if let name = parameter.name {
                guard Self.isCIdentifier(name) else { throw refuse(index, "has a name that is not a C identifier") }
                guard names.insert(name).inserted else { throw refuse(index, "repeats the name of an earlier argument") }
            }
            if let fields = parameter.fields {
                switch parameter.kind {
                case .structure, .structureValue, .handle: break
                default: throw refuse(index, "has struct fields, but only a struct argument or a handle of a struct kind has them")
                }
                do {
                    try fields.layout.validate()
                } catch {
                    throw refuse(index, "is a struct \(fields.layout.name) that is refused: \(error)")
                }
                if let problem = fields.validate() { throw refuse(index, problem) }
            }
            switch parameter.kind {
            case .callback(let callback):
                guard parameter.name != nil else { throw refuse(index, "is a callback and needs a name: a caller gives its handler by it") }
                if let problem = callback.problem(outer: parameters) { throw refuse(index, "is a callback that \(problem)") }
            case .structure:
                guard parameter.name != nil else { throw refuse(index, "is a struct and needs a name") }
                guard parameter.fields != nil else { throw refuse(index, "is a struct of no declared layout") }
            case .structureValue:
                guard parameter.name != nil else { throw refuse(index, "is a struct and needs a name") }
                guard let fields = parameter.fields else { throw refuse(index, "is a struct of no declared layout") }
                if let problem = fields.layout.byValueProblem {
                    throw refuse(index, "is a struct \(fields.layout.name) passed by value that \(problem)")
                }
                guard fields.gets.isEmpty else {
                    throw refuse(
                        index, "is a struct passed by value and gets fields; the library gets a copy, so nothing it does to it comes back")
                }
            case .value(let type):
                guard type.isValidArgument else { throw refuse(index, "cannot be void") }
                guard type != .handle else { throw refuse(index, "is a handle of no kind") }
            case .handle(let kind, let direction):
                guard Self.isCIdentifier(kind) else { throw refuse(index, "is a handle whose kind is not a C identifier") }
                guard direction != .inout else {
                    throw refuse(index, "is an inout handle; a handle is passed in by value or written out through a pointer")
                }
                guard direction == .in || parameter.name != nil else { throw refuse(index, "is an out handle and needs a name") }
            case .pointer(let type, _):
                guard parameter.name != nil else { throw refuse(index, "is a pointer and needs a name") }
                guard type.isScalar else {
                    throw refuse(index, "points to \(type); a pointer points to a scalar (bool, an integer, float or double)")
                }
            case .buffer(let buffer):
                guard parameter.name != nil else { throw refuse(index, "is a buffer and needs a name") }
                guard buffer.element.isScalar else {
                    throw refuse(index, "holds \(buffer.element); a buffer holds scalars (bool, integers, float or double)")
                }
                switch buffer.count {
                case .constant(let count):
                    let width = UInt64(buffer.element.byteWidth)
                    guard count > 0, count <= Self.maximumBufferBytes / width else {
                        throw refuse(index, "has a constant count of \(count); it must be 1 to \(Self.maximumBufferBytes / width)")
                    }
                case .argument(let other):
                    guard parameters.indices.contains(other), other != index else {
                        throw refuse(index, "is counted by argument \(other + 1), which \(name) does not have")
                    }
                    guard case .value(let type) = parameters[other].kind, type.isInteger else {
                        throw refuse(
                            index,
                            "is counted by \(label(ofParameter: other)), which is not an integer argument passed by value"
                                + Self.lengthHint(parameters[other].kind, name: parameters[other].name))
                    }
                case .length(let other):
                    guard parameters.indices.contains(other), other != index else {
                        throw refuse(index, "is counted by argument \(other + 1), which \(name) does not have")
                    }
                    guard case .pointer(let type, .inout) = parameters[other].kind, type.isInteger else {
                        throw refuse(
                            index,
                            "is counted by *\(referenceName(other)), but \(label(ofParameter: other)) is not an inout pointer to an integer (capacity in, length used out)"
                        )
                    }
                    guard buffer.direction != .in else {
                        throw refuse(
                            index,
                            "is an in buffer counted by *\(referenceName(other)); the length a function reports back counts an out or inout buffer (count an in buffer by a value argument or a constant)"
                        )
                    }
                    if let earlier = lengthUsers[other] {
                        throw refuse(
                            index,
                            "is counted by *\(referenceName(other)), which already counts \(label(ofParameter: earlier)); a length argument counts one buffer"
                        )
                    }
                    lengthUsers[other] = index
                }
            case .null:
                break
            }
        }
        if let kind = releases {
            let inputs = self.inputs
            guard inputs.count == 1, inputs[0].type == .handle, inputs[0].kind == kind else {
                throw refuse(
                    inputs.count == 1 ? inputs[0].parameter : nil,
                    "is the release function of handle kind \(kind) but does not take exactly one value from the caller, a \(kind) handle passed by value"
                )
            }
        }
    }

    /// Checks the handles of a whole library: every kind a function takes or returns has one
    /// release function among `functions` (`releases`), and no function releases two kinds.
    ///
    /// - Throws: `FunctionDeclarationError` naming the function and the argument.
    public static func validateHandles(of functions: [FunctionSignature]) throws(FunctionDeclarationError) {
        var releasers: [String: String] = [:]
        for function in functions {
            guard let kind = function.releases else { continue }
            if let earlier = releasers[kind] {
                throw FunctionDeclarationError(
                    function: function.name, parameter: nil, argument: nil,
                    problem: "releases handle kind \(kind), which \(earlier) already releases")
            }
            releasers[kind] = function.name
        }
        var layouts: [String: FunctionStruct] = [:]
        var plain: Set<String> = []
        for function in functions {
            for (index, parameter) in function.parameters.enumerated() {
                guard case .handle(let kind, _) = parameter.kind else { continue }
                let refused = FunctionDeclarationError(
                    function: function.name, parameter: index, argument: function.label(ofParameter: index),
                    problem: "is a handle of kind \(kind), which other arguments declare with another struct layout or none")
                if let layout = parameter.fields?.layout {
                    guard !plain.contains(kind), layouts[kind].map({ $0 == layout }) ?? true else { throw refused }
                    layouts[kind] = layout
                } else {
                    guard layouts[kind] == nil else { throw refused }
                    plain.insert(kind)
                }
            }
        }
        for function in functions {
            if let kind = function.returnKind, layouts[kind] != nil {
                throw FunctionDeclarationError(
                    function: function.name, parameter: nil, argument: nil,
                    problem: "returns a handle of kind \(kind), a struct the worker makes; a function gets one as an out argument")
            }
            if let kind = function.returnKind, releasers[kind] == nil {
                throw FunctionDeclarationError(
                    function: function.name, parameter: nil, argument: nil,
                    problem: "returns handle kind \(kind), which \"handles\" does not declare")
            }
            for (index, parameter) in function.parameters.enumerated() {
                guard case .handle(let kind, _) = parameter.kind, releasers[kind] == nil else { continue }
                throw FunctionDeclarationError(
                    function: function.name, parameter: index, argument: function.label(ofParameter: index),
                    problem: "is a handle of kind \(kind), which \"handles\" does not declare")
            }
        }
    }

    /// The handle kinds `functions` declare, each with its release function.
    public static func handleKinds(of functions: [FunctionSignature]) -> [String: FunctionSignature] {
        var kinds: [String: FunctionSignature] = [:]
        for function in functions {
            if let kind = function.releases { kinds[kind] = function }
        }
        return kinds
    }

    private static func lengthHint(_ kind: FunctionParameter.Kind, name: String?) -> String {
        guard case .pointer(let type, .inout) = kind, type.isInteger, let name else { return "" }
        return " (to count by the value it points to, write '*\(name)')"
    }

    /// A C identifier: letters, digits and `_`, not starting with a digit.
    public static func isCIdentifier(_ text: String) -> Bool {
        guard let first = text.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
        return text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        }
    }
}
