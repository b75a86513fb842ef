/// Help in the format of swift-argument-parser: OVERVIEW, USAGE, ARGUMENTS, OPTIONS,
/// SUBCOMMANDS, with descriptions aligned at a fixed column.
enum HelpText {
    static let column = 26

    static func command(_ description: CommandDescription) -> String {
        var text = "OVERVIEW: \(description.abstract)\n"
        if let discussion = description.discussion {
            text += "\n\(discussion)\n"
        }
        text += "\nUSAGE: plugind \(description.name) \(description.usage)\n"
        if !description.arguments.isEmpty {
            text += "\nARGUMENTS:\n" + rows(description.arguments)
        }
        text += "\nOPTIONS:\n" + rows(description.optionRows + [("-h, --help", "Show help information.")])
        return text
    }

    /// What plugind is, for the root help and the manual.
    static let overview = """
        Plugins are bundles (a manifest.json beside a shared library) installed in the search
        paths. A plugin runs in its own confined worker process and only after the machine's
        owner approved it.
        """

    static let rootOptions = [("--version", "Show the version."), ("-h, --help", "Show help information.")]

    static func root(_ commands: [CommandDescription], version: String) -> String {
        var text = "OVERVIEW: plugind \(version): discover, approve and run plugins.\n\n\(overview)\n\n"
        text += "USAGE: plugind <subcommand> [<options>]\n\nOPTIONS:\n"
        text += rows(rootOptions)
        text += "\nSUBCOMMANDS:\n" + rows(commands.map { ($0.name, $0.abstract) })
        text += "\nEXIT STATUS:\n" + rows(ExitStatus.allCases.map { (String($0.rawValue), $0.meaning) })
        text += "\nSee 'plugind help <subcommand>' for detailed help.\n"
        return text
    }

    static func rows(_ rows: [(String, String)]) -> String {
        rows.map { name, meaning in
            let label = "  " + name
            let padding =
                label.count < column ? String(repeating: " ", count: column - label.count) : "\n" + String(repeating: " ", count: column)
            return label + padding + meaning + "\n"
        }.joined()
    }

    /// The CLI reference in Markdown: the overview and every command's help, verbatim, for
    /// Documentation/CLI.md (`plugind help --markdown`).
    static func markdown(_ commands: [CommandDescription], version: String) -> String {
        var text = "## plugind\n\n```\n" + root(commands, version: version) + "```\n"
        for command in commands {
            text += "\n## plugind \(command.name)\n\n```\n" + self.command(command) + "```\n"
        }
        return text
    }
}
