import ExtensionFoundation
import PlugindBundle
import PlugindEngine

/// `plugind completions`: the shell completion scripts, from the command table.
struct CompletionsCommand: PlugindCommand {
    private enum Options {
        static let identifiers = CommandOption.flag(
            "identifiers", "Print the identifiers of the installed plugins, one per line (what the scripts complete <id> with).")
    }

    static let description = CommandDescription(
        name: "completions",
        abstract: "Print the shell completion script for bash, zsh or fish.",
        usage: "bash | zsh | fish | --identifiers",
        discussion: """
            The scripts complete subcommands, their options and verbs, and the identifiers of the
            installed plugins wherever a command takes one. The Debian package installs all three;
            otherwise, for example: plugind completions bash > ~/.local/share/bash-completion/completions/plugind
            """,
        arguments: [("bash", "The script for bash."), ("zsh", "The script for zsh."), ("fish", "The script for fish.")],
        options: [Options.identifiers]
    )

    let shell: CompletionScript.Shell?

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        if arguments.flag(Options.identifiers) {
            _ = try arguments.positionals([])
            shell = nil
            return
        }
        let name = try arguments.positionals(["shell"])[0]
        guard let shell = CompletionScript.Shell(rawValue: name) else {
            throw UsageError(message: "completions knows bash, zsh and fish, not '\(name)'", command: "completions")
        }
        self.shell = shell
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        guard let shell else {
            // Every discovered plugin, usable or not: a completion is for typing, not for deciding.
            let identifiers = Set(Inventory.take(host: context.host).items.map(\.entry.manifest.identifier))
            context.console.out(identifiers.sorted().map { $0.inert + "\n" }.joined())
            return .success
        }
        context.console.out(CompletionScript.script(for: shell, commands: Plugind.commands.map(\.description)))
        return .success
    }
}
