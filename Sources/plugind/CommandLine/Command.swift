import ExtensionFoundation

/// What `plugind help` shows for a command, and how its arguments parse.
struct CommandDescription {
    var name: String
    var abstract: String
    /// Everything after "plugind <name>" in the usage line.
    var usage: String
    var discussion: String? = nil
    var arguments: [(String, String)] = []
    var options: [(String, String)] = []
    var valueOptions: Set<String> = []
    var flagOptions: Set<String> = []
    var aliases: [String: String] = [:]
}

/// One `plugind` subcommand: one file each under Commands/.
protocol PlugindCommand: Sendable {
    static var description: CommandDescription { get }
    init(_ arguments: ArgumentScanner) throws(UsageError)
    func run(_ context: CommandContext) async throws -> ExitStatus
}

/// What every command gets: the host configuration and the terminal.
struct CommandContext {
    var host: AppExtensionHost
    var console: Console
}
