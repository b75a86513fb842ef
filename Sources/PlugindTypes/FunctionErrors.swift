/// Why a function declaration is refused: the function, the argument (when one is at fault) and
/// the problem.
public struct FunctionDeclarationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var function: String
    /// The 0-based index of the argument at fault, if one is.
    public var parameter: Int?
    /// The argument as messages name it: `'dest'`, or `argument 2` when it has no name.
    public var argument: String?
    public var problem: String

    public init(function: String, parameter: Int?, argument: String?, problem: String) {
        self.function = function
        self.parameter = parameter
        self.argument = argument
        self.problem = problem
    }

    public var description: String {
        if let argument { return "\(argument) of \(function) \(problem)" }
        return "\(function) \(problem)"
    }
}

/// Why a call's arguments do not fit the declaration; the message names the function and the
/// argument. Found before anything reaches the library.
public struct FunctionCallError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Why a call's result cannot be trusted: the library (or its worker) returned what the
/// declaration rules out, such as an out length beyond the capacity given.
public struct FunctionResultError: Error, Hashable, Sendable, CustomStringConvertible {
    public var function: String
    /// The argument at fault (its name), if one is.
    public var argument: String?
    public var message: String

    public init(function: String, argument: String?, message: String) {
        self.function = function
        self.argument = argument
        self.message = message
    }

    public var description: String { message }
}
