/// The C signature of a function pointer a declared function takes (`qsort`'s comparator): the
/// library calls it during the call, the worker forwards each call to the host's handler, and
/// the handler's answer is what the library gets back.
///
/// The worker's callbacks are compiled stubs that read the registers arguments arrive in, so a
/// callback has at most 6 integer or pointer arguments and 8 floating ones (x86-64's argument
/// registers), none a struct by value, and is not variadic.
public struct FunctionCallbackSignature: Hashable, Sendable, CustomStringConvertible {
    /// How many elements a buffer the library passes holds.
    public enum Count: Hashable, Sendable {
        case constant(UInt64)
        /// The value of the callback's own integer argument at this index.
        case argument(Int)
        /// The value of the declared function's integer argument at this index, as the call
        /// passed it (`qsort`'s `size`).
        case outer(Int)
    }

    public enum Kind: Hashable, Sendable {
        /// A scalar, passed as it is.
        case value(FunctionValueType)
        /// A `const char *`: the handler gets the text (NULL as ""), at most `maximumStringBytes`.
        case string
        /// A pointer to elements the handler reads: the worker copies them for it.
        case buffer(element: FunctionValueType, count: Count)
        /// A pointer the handler does not see (the `void *` context a library passes back).
        case ignored
    }

    public struct Parameter: Hashable, Sendable {
        public var name: String?
        public var kind: Kind

        public init(_ kind: Kind, name: String? = nil) {
            self.kind = kind
            self.name = name
        }

        /// Whether the argument arrives in a floating-point register.
        var isFloating: Bool {
            if case .value(let type) = kind { return type == .float || type == .double }
            return false
        }
    }

    public var parameters: [Parameter]
    /// A scalar or `void`.
    public var returns: FunctionValueType

    /// x86-64 SysV's argument registers: what a compiled stub can read.
    public static let maximumIntegerArguments = 6
    public static let maximumFloatingArguments = 8
    /// The longest string a handler gets from a `string` argument.
    public static let maximumStringBytes = 1 << 16

    public init(parameters: [Parameter], returns: FunctionValueType) {
        self.parameters = parameters
        self.returns = returns
    }

    /// The types of the values a handler gets, in order: every argument but the ignored ones.
    public var handlerArguments: [FunctionValueType] {
        parameters.compactMap { parameter in
            switch parameter.kind {
            case .value(let type): type
            case .string: .string
            case .buffer: .bytes
            case .ignored: nil
            }
        }
    }

    /// `int32 (*)(in uint8 a[outer argument 3], …)`; `described(outer:)` names the function's
    /// arguments.
    public var description: String { described(outer: []) }

    /// `int32 (*)(in uint8 a[size], in uint8 b[size])`, a count that is one of the function's
    /// arguments named by `outer` (the function's parameters).
    public func described(outer: [FunctionParameter]) -> String {
        let list = parameters.map { parameter -> String in
            let name = parameter.name.map { " " + $0 } ?? ""
            switch parameter.kind {
            case .value(let type): return type.rawValue + name
            case .string: return "string" + name
            case .ignored: return "void *" + name
            case .buffer(let element, let count):
                let counted: String
                switch count {
                case .constant(let value): counted = String(value)
                case .argument(let index): counted = parameters.indices.contains(index) ? parameters[index].name ?? "" : ""
                case .outer(let index):
                    counted = (outer.indices.contains(index) ? outer[index].name : nil) ?? "outer argument \(index + 1)"
                }
                return "in \(element)\(name)[\(counted)]"
            }
        }
        return "\(returns) (*)(\(list.joined(separator: ", ")))"
    }

    /// Why the callback cannot be declared, or nil. `outer` are the declared function's
    /// parameters (a count may name one of its integer arguments).
    public func problem(outer: [FunctionParameter]) -> String? {
        guard returns == .void || returns.isScalar else {
            return "returns \(returns); a callback returns a scalar (bool, an integer, float or double) or void"
        }
        let floating = parameters.filter(\.isFloating).count
        let integer = parameters.count - floating
        guard integer <= Self.maximumIntegerArguments, floating <= Self.maximumFloatingArguments else {
            return
                "has \(integer) integer or pointer and \(floating) floating arguments; a callback has at most \(Self.maximumIntegerArguments) and \(Self.maximumFloatingArguments) (the registers x86-64 passes them in)"
        }
        var names: Set<String> = []
        for (index, parameter) in parameters.enumerated() {
            let label = parameter.name.map { "'\($0)'" } ?? "argument \(index + 1)"
            if let name = parameter.name {
                guard FunctionSignature.isCIdentifier(name), names.insert(name).inserted else {
                    return "names its \(label) twice or not as a C identifier"
                }
            }
            switch parameter.kind {
            case .value(let type):
                guard type.isScalar else { return "takes \(type) as \(label); a callback's value arguments are scalars" }
            case .string, .ignored:
                break
            case .buffer(let element, let count):
                guard element.isScalar else { return "has \(label) holding \(element); a buffer holds scalars" }
                switch count {
                case .constant(let value):
                    guard value > 0, value <= FunctionSignature.maximumBufferBytes / UInt64(element.byteWidth) else {
                        return "has \(label) with a constant count of \(value)"
                    }
                case .argument(let other):
                    guard parameters.indices.contains(other), case .value(let type) = parameters[other].kind, type.isInteger else {
                        return "has \(label) counted by something that is not one of its integer arguments"
                    }
                case .outer(let other):
                    guard outer.indices.contains(other), case .value(let type) = outer[other].kind, type.isInteger else {
                        return "has \(label) counted by something that is not an integer argument of the function"
                    }
                }
            }
        }
        return nil
    }
}
