/// A bad command line: the message and the command whose usage line to show.
struct UsageError: Error {
    var message: String
    var command: String?
}

/// Splits a command's arguments into options and positionals: `--name value`, `--name=value`,
/// boolean flags, short aliases, and `--` to end options.
struct ArgumentScanner {
    private(set) var positionals: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []
    let command: String

    /// - Parameters:
    ///   - valueOptions: options that take a value (long names without dashes).
    ///   - flagOptions: options that take none.
    ///   - aliases: short forms, e.g. ["-y": "yes"].
    init(
        _ arguments: [String],
        command: String,
        valueOptions: Set<String> = [],
        flagOptions: Set<String> = [],
        aliases: [String: String] = [:]
    ) throws(UsageError) {
        self.command = command
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") || Self.isNegativeNumber(argument) {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            var name: String
            var inlineValue: String?
            if let alias = aliases[argument] {
                name = alias
            } else if argument.hasPrefix("--") {
                name = String(argument.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
            } else {
                throw UsageError(message: "unknown option '\(argument)'", command: command)
            }
            if flagOptions.contains(name) {
                guard inlineValue == nil else { throw UsageError(message: "option '--\(name)' takes no value", command: command) }
                flags.insert(name)
            } else if valueOptions.contains(name) {
                if let inlineValue {
                    values[name, default: []].append(inlineValue)
                } else {
                    guard index < arguments.count else { throw UsageError(message: "option '--\(name)' needs a value", command: command) }
                    values[name, default: []].append(arguments[index])
                    index += 1
                }
            } else {
                throw UsageError(message: "unknown option '--\(name)'", command: command)
            }
        }
    }

    /// "-5", "-0x10", "-2.5", "-inf", "-nan": values, not options.
    static func isNegativeNumber(_ argument: String) -> Bool {
        let rest = argument.dropFirst()
        guard let first = rest.first else { return false }
        return first.isNumber || first == "." || rest.lowercased() == "inf" || rest.lowercased() == "nan"
    }

    func flag(_ option: CommandOption) -> Bool {
        flag(option.name)
    }

    func value(_ option: CommandOption) -> String? {
        value(option.name)
    }

    func allValues(_ option: CommandOption) -> [String] {
        allValues(option.name)
    }

    func seconds(_ option: CommandOption) throws(UsageError) -> Duration? {
        try seconds(option.name)
    }

    private func flag(_ name: String) -> Bool {
        flags.contains(name)
    }

    private func value(_ name: String) -> String? {
        values[name]?.last
    }

    private func allValues(_ name: String) -> [String] {
        values[name] ?? []
    }

    /// Exactly `count` positionals, named for the message.
    func positionals(_ names: [String], optional: [String] = [], variadic: Bool = false) throws(UsageError) -> [String] {
        if positionals.count < names.count {
            throw UsageError(message: "missing \(names[positionals.count].uppercased())", command: command)
        }
        if !variadic && positionals.count > names.count + optional.count {
            throw UsageError(message: "unexpected argument '\(positionals[names.count + optional.count])'", command: command)
        }
        return positionals
    }

    /// The longest duration an option takes: a year is longer than any deadline a person means.
    static let maximumSeconds: Double = 365 * 24 * 3600

    /// A duration given in seconds ("2.5", "0.0001"), exact to the nanosecond.
    private func seconds(_ name: String) throws(UsageError) -> Duration? {
        guard let text = value(name) else { return nil }
        guard let seconds = Double(text), seconds.isFinite, seconds > 0 else {
            throw UsageError(message: "--\(name) needs a positive number of seconds, got '\(text)'", command: command)
        }
        guard seconds <= Self.maximumSeconds else {
            throw UsageError(message: "--\(name) is at most \(Int(Self.maximumSeconds)) seconds (a year), got '\(text)'", command: command)
        }
        let nanoseconds = (seconds * 1e9).rounded()
        guard nanoseconds >= 1 else {
            throw UsageError(message: "--\(name) must be at least a nanosecond, got '\(text)'", command: command)
        }
        return .nanoseconds(Int64(nanoseconds))
    }
}
