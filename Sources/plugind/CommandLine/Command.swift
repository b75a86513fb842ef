import ExtensionFoundation
import PlugindEngine

/// What `plugind help` shows for a command, and how its arguments parse.
struct CommandDescription {
    var name: String
    var abstract: String
    /// Everything after "plugind <name>" in the usage line.
    var usage: String
    var discussion: String? = nil
    var arguments: [(String, String)] = []
    /// Every option, declared once: help rows, parsing and access come from these.
    var options: [CommandOption] = []

    var valueOptions: Set<String> {
        Set(options.filter { $0.kind != .flag }.map(\.name))
    }

    var flagOptions: Set<String> {
        Set(options.filter { $0.kind == .flag }.map(\.name))
    }

    /// Short forms, e.g. ["-y": "yes"].
    var aliases: [String: String] {
        Dictionary(uniqueKeysWithValues: options.compactMap { option in option.short.map { ($0, option.name) } })
    }

    /// The help rows of the options.
    var optionRows: [(String, String)] {
        options.map { ($0.label, $0.help) }
    }
}

/// A command line parsed into what one command runs.
protocol PlugindCommandInstance: Sendable {
    func run(_ context: CommandContext) async throws -> ExitStatus
}

/// One `plugind` subcommand: one file each under Commands/.
protocol PlugindCommand: PlugindCommandInstance {
    static var description: CommandDescription { get }
    init(_ arguments: ArgumentScanner) throws(UsageError)
}

/// A name in `plugind`'s list of subcommands: its help and how its arguments become a command.
/// Several names may share one command (`disable`, `enable`, `revoke`).
struct CommandEntry: Sendable {
    let description: CommandDescription
    let make: @Sendable (ArgumentScanner) throws(UsageError) -> any PlugindCommandInstance

    init(description: CommandDescription, make: @escaping @Sendable (ArgumentScanner) throws(UsageError) -> any PlugindCommandInstance) {
        self.description = description
        self.make = make
    }

    static func of<Command: PlugindCommand>(_ command: Command.Type) -> CommandEntry {
        CommandEntry(description: command.description) { arguments throws(UsageError) in try Command(arguments) }
    }
}

/// What every command gets: the host configuration and the terminal.
struct CommandContext {
    var host: AppExtensionHost
    var console: Console
}
