/// One option of a command, declared once: its help row, how it parses (a flag, or an option
/// that takes a value) and how the command reads it (`ArgumentScanner.flag(_:)`,
/// `value(_:)`), as swift-argument-parser's `@Flag` and `@Option` do.
struct CommandOption: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        case flag
        /// Takes a value; `placeholder` names it in the help ("<file>", "c|swift").
        case value(placeholder: String)
    }

    /// The long name, without dashes.
    let name: String
    let kind: Kind
    let help: String
    /// A short form, such as "-y".
    let short: String?
    /// The values it takes, where its placeholder does not list them ("KEY").
    var namedChoices: [String] = []

    static func flag(_ name: String, short: String? = nil, _ help: String) -> CommandOption {
        CommandOption(name: name, kind: .flag, help: help, short: short)
    }

    static func value(_ name: String, _ placeholder: String, _ help: String, choices: [String] = []) -> CommandOption {
        CommandOption(name: name, kind: .value(placeholder: placeholder), help: help, short: nil, namedChoices: choices)
    }

    /// The help row's label: "--name <value>", "-y, --yes".
    var label: String {
        let long = "--" + name
        switch kind {
        case .flag: return short.map { "\($0), \(long)" } ?? long
        case .value(let placeholder): return "\(long) \(placeholder)"
        }
    }

    /// The values it takes, named or listed by its placeholder ("c|cpp|rust"): what completion
    /// offers after it, instead of file names. Empty for flags and free values ("<file>").
    var choices: [String] {
        guard namedChoices.isEmpty else { return namedChoices }
        guard case .value(let placeholder) = kind, placeholder.contains("|"), !placeholder.contains("<") else { return [] }
        return placeholder.split(separator: "|").map(String.init)
    }

    /// How the usage line shows it: "[--name <value>]", "[--yes]".
    var usage: String {
        switch kind {
        case .flag: return "[--\(name)]"
        case .value(let placeholder): return "[--\(name) \(placeholder)]"
        }
    }
}
