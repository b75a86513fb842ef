/// The C signature of a function pointer a declared function takes (`qsort`'s comparator): the
/// library calls it during the call, the worker forwards each call to the host's handler, and
/// the handler's answer is what the library gets back.
///
/// The worker's callbacks are compiled stubs that read the registers arguments arrive in, so a
/// callback has at most 6 integer or pointer arguments and 8 floating ones (x86-64's argument
/// registers; AArch64 has 8 and 8, and the smaller count keeps a manifest good on both), none a
/// struct by value, and is not variadic.
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
        /// A `char **` of `count` C strings (`sqlite3_exec`'s row): the handler gets them as
        /// `count` values in its place, each `.string`, or `.void` for a NULL. Counted by a
        /// constant or by an earlier integer argument of the callback.
        case strings(count: Count)
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

    /// The argument registers a compiled stub can read on every architecture that has stubs
    /// (x86-64's 6 and 8; AArch64 has 8 and 8).
    public static let maximumIntegerArguments = 6
    public static let maximumFloatingArguments = 8
    /// The longest string a handler gets from a `string` argument.
    public static let maximumStringBytes = 1 << 16
    /// The most strings a `strings` argument may hold.
    public static let maximumStrings = 4096

    public init(parameters: [Parameter], returns: FunctionValueType) {
        self.parameters = parameters
        self.returns = returns
    }

    /// Whether `values` are what a handler of this callback gets: every argument but the ignored
    /// ones, in order, a `strings` argument as as many strings (or voids) as its count says.
    public func matches(_ values: [FunctionValue]) -> Bool {
        var position = 0
        var counts: [Int: UInt64] = [:]
        for (index, parameter) in parameters.enumerated() {
            let single: FunctionValueType?
            switch parameter.kind {
            case .ignored: continue
            case .value(let type): single = type
            case .string: single = .string
            case .buffer: single = .bytes
            case .strings: single = nil
            }
            if let single {
                guard position < values.count, values[position].type == single else { return false }
                if let count = values[position].asCount { counts[index] = count }
                position += 1
                continue
            }
            guard case .strings(let count) = parameter.kind else { return false }
            let expected: UInt64?
            switch count {
            case .constant(let value): expected = value
            case .argument(let other): expected = counts[other]
            case .outer: expected = nil
            }
            guard let expected, expected <= UInt64(values.count - position) else { return false }
            let strings = values[position..<position + Int(expected)]
            guard strings.allSatisfy({ $0.type == .string || $0.type == .void }) else { return false }
            position += Int(expected)
        }
        return position == values.count
    }

    /// `int32 (*)(in uint8 a[outer argument 3], …)`; `described(outer:)` names the function's
    /// arguments.
    public var description: String { described(outer: []) }

    /// `int32 (*)(in uint8 a[size], in uint8 b[size])`, a count that is one of the function's
    /// arguments named by `outer` (the function's parameters).
    public func described(outer: [FunctionParameter]) -> String {
        func counted(_ count: Count) -> String {
            switch count {
            case .constant(let value): String(value)
            case .argument(let index): parameters.indices.contains(index) ? parameters[index].name ?? "" : ""
            case .outer(let index): (outer.indices.contains(index) ? outer[index].name : nil) ?? "outer argument \(index + 1)"
            }
        }
        let list = parameters.map { parameter -> String in
            let name = parameter.name.map { " " + $0 } ?? ""
            switch parameter.kind {
            case .value(let type): return type.rawValue + name
            case .string: return "string" + name
            case .ignored: return "void *" + name
            case .strings(let count):
                return "strings\(name)[\(counted(count))]"
            case .buffer(let element, let count):
                return "in \(element)\(name)[\(counted(count))]"
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
            case .strings(let count):
                switch count {
                case .constant(let value):
                    guard value > 0, value <= UInt64(Self.maximumStrings) else { return "has \(label) with a constant count of \(value)" }
                case .argument(let other):
                    guard other < index, case .value(let type) = parameters[other].kind, type.isInteger else {
                        return "has \(label) counted by something that is not an earlier integer argument of the callback"
                    }
                case .outer:
                    return "has \(label) counted by an argument of the function; strings are counted by the callback's own"
                }
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
