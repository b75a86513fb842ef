import ExtensionFoundation
import Foundation
import PlugindEngine

/// The manual pages, `plugind(1)` and one `plugind-<subcommand>(1)` each, written from the same
/// descriptions as `--help` and Documentation/CLI.md, so that none can drift from the others.
enum ManualPage {
    /// `plugind(1)`: the complete page, every subcommand with its options.
    static func root(_ commands: [CommandDescription], version: String) -> String {
        var page = Roff.title("plugind", section: 1, version: version)
        page += ".SH NAME\nplugind \\- discover, approve and run confined plugins\n"
        page += ".SH SYNOPSIS\n.B plugind\n.I subcommand\n[\\fIoptions\\fR]\n"
        page += ".SH DESCRIPTION\n" + Roff.paragraph(HelpText.overview) + "\n"
        page += ".SH OPTIONS\n" + Roff.rows(HelpText.rootOptions)
        page += ".SH SUBCOMMANDS\n"
        for command in commands {
            page += ".SS \"plugind \(Roff.escape(command.name))\"\n" + synopsis(command) + body(command, headings: false)
        }
        page += ".SH \"EXIT STATUS\"\n" + Roff.rows(ExitStatus.allCases.map { (String($0.rawValue), $0.meaning) })
        page += files + environment
        page +=
            ".SH \"SEE ALSO\"\n"
            + (commands.map { "\\fBplugind\\-\(Roff.escape($0.name))\\fR(1)" } + referencePages).joined(separator: ",\n") + "\n"
            + documentation
        return page
    }

    /// The pages of section 5 (`ReferencePage`), for SEE ALSO.
    private static let referencePages = ReferencePage.all.values.map { "\\fB\(Roff.escape($0.name))\\fR(5)" }.sorted()

    /// Where the rest of the documentation is installed (Scripts/stage.sh).
    private static let documentation = """
        .PP
        The owner's and the plugin author's guides, the security, reliability and performance notes
        and the CLI reference (with its JSON formats) are installed in
        .I /usr/share/doc/plugind/
        (\\fIshare/doc/plugind\\fR under the prefix of a \\fBScripts/install.sh\\fR installation).

        """

    /// `plugind-<subcommand>(1)`.
    static func command(_ command: CommandDescription, version: String) -> String {
        var page = Roff.title("plugind-" + command.name, section: 1, version: version)
        page += ".SH NAME\nplugind\\-\(Roff.escape(command.name)) \\- \(Roff.escape(command.abstract))\n"
        page += ".SH SYNOPSIS\n" + synopsis(command) + body(command, headings: true)
        page += ".SH \"SEE ALSO\"\n" + (["\\fBplugind\\fR(1)"] + referencePages).joined(separator: ", ") + "\n" + documentation
        return page
    }

    private static func synopsis(_ command: CommandDescription) -> String {
        ".B plugind \(Roff.escape(command.name))\n\(Roff.escape(command.usage))\n"
    }

    private static func body(_ command: CommandDescription, headings: Bool) -> String {
        var text = ""
        if headings { text += ".SH DESCRIPTION\n" }
        text += ".PP\n" + Roff.paragraph(command.abstract) + "\n"
        for paragraph in (command.discussion ?? "").components(separatedBy: "\n\n") where !paragraph.isEmpty {
            text += ".PP\n" + Roff.paragraph(paragraph) + "\n"
        }
        if !command.arguments.isEmpty {
            text += (headings ? ".SH ARGUMENTS\n" : ".PP\nArguments:\n") + Roff.rows(command.arguments)
        }
        let options = command.optionRows + [("-h, --help", "Show help information.")]
        text += (headings ? ".SH OPTIONS\n" : ".PP\nOptions:\n") + Roff.rows(options)
        return text
    }

    private static let files = """
        .SH FILES
        .TP
        .I ~/.local/share/plugind/plugins/
        The user's plugins (\\fB$XDG_DATA_HOME/plugind/plugins\\fR).
        .TP
        .I /usr/local/lib/plugind/plugins/, /usr/lib/plugind/plugins/
        Plugins installed for every user; the second is where Debian packages of plugins put them.
        .TP
        .I ~/.config/plugind/
        The owner's approvals, trusted publishers and settings (\\fB$XDG_CONFIG_HOME/plugind\\fR).
        .TP
        .I /etc/plugind/
        The administrator's approvals, trusted publishers and \\fBrules.json\\fR; they win over the owner's
        (\\fBplugind\\-policy\\fR(5)).
        .TP
        .I ~/.local/state/plugind/
        The crash log and the discovery cache (\\fB$XDG_STATE_HOME/plugind\\fR).
        .TP
        .I /usr/libexec/plugind/plugind\\-worker
        The worker a host starts for each plugin process.

        """

    private static let environment = """
        .SH ENVIRONMENT
        .TP
        .B PLUGIND_PATH
        More plugin directories, separated by colons, searched first.
        .TP
        .B PLUGIND_WORKER
        The worker to start instead of the installed one.
        .TP
        .B PLUGIND_ADMIN_POLICY_DIR
        The administrator's directory instead of /etc/plugind.
        .TP
        .B PLUGIND_BUSY_POLLING
        With 0, a host and its workers never poll for an expected answer; they sleep until it
        comes (by default they poll for up to 50 microseconds where more than one processor is
        available and few answers are awaited, and on one processor a caller awaiting its answer
        alone yields the processor to the worker for as long).
        .TP
        .B PLUGIND_SHARED_RINGS
        With 0, a host offers its workers no shared rings: every frame takes the pipes (by
        default small frames travel through a ring in the memory host and worker share).
        .TP
        .B NO_COLOR
        When set, output has no colour.

        """
}
