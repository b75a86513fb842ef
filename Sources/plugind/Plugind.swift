import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindWire

/// plugind: the command-line tool for the machine's owner and for plugin authors.
@main
enum Plugind {
    static let version = PlugindRelease.version

    static let commands: [CommandEntry] = [
        .of(ListCommand.self), .of(BrowseCommand.self), .of(InfoCommand.self), .of(RunCommand.self), .of(CallCommand.self),
        .of(ApproveCommand.self), PolicyChangeCommand.entry(.disable), PolicyChangeCommand.entry(.enable),
        PolicyChangeCommand.entry(.revoke), .of(WatchCommand.self), .of(VerifyCommand.self), .of(NewCommand.self),
        .of(BindCommand.self), .of(DeclareCommand.self), .of(KeygenCommand.self), .of(SignCommand.self), .of(PackCommand.self),
        .of(TrustCommand.self),
        .of(DevCommand.self), .of(DebugCommand.self), .of(InstallCommand.self), .of(UninstallCommand.self), .of(CrashesCommand.self),
        .of(LogsCommand.self), .of(TopCommand.self),
        .of(QuarantineCommand.self),
        .of(PolicyCommand.self),
        .of(PointsCommand.self),
        .of(ScanCommand.self), .of(AudioCommand.self), .of(VideoCommand.self),
        .of(CompletionsCommand.self),
    ]

    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        let arguments = Array(CommandLine.arguments.dropFirst())
        let console = Console()
        let status = await run(arguments, console: console)
        // Crash records are written in the background; keep them before leaving.
        await CrashRecorder.waitForPendingRecords()
        // So are the entries of the plugin log (the decisions and plugin lines of this run).
        PluginLogWriter.waitForAllPendingEntries()
        await PluginActivityStore.waitForPendingUpdates()
        exit(status.rawValue)
    }

    static func run(_ arguments: [String], console: Console) async -> ExitStatus {
        guard let first = arguments.first, first != "-h", first != "--help" else {
            console.out(HelpText.root(commands.map { $0.description }, version: version))
            return .success
        }
        if first == "--version" {
            console.out("plugind \(version)\n")
            return .success
        }
        if first == "help" {
            if arguments.dropFirst().first == "--markdown" {
                console.out(HelpText.markdown(commands.map { $0.description }, version: version))
                return .success
            }
            if arguments.dropFirst().first == "--man" {
                return manualPage(Array(arguments.dropFirst(2)), console: console)
            }
            guard let name = arguments.dropFirst().first else {
                console.out(HelpText.root(commands.map { $0.description }, version: version))
                return .success
            }
            guard let command = command(named: name) else {
                return usageFailure(UsageError(message: "unknown subcommand '\(name)'"), console: console)
            }
            console.out(HelpText.command(command.description))
            return .success
        }
        guard let command = command(named: first) else {
            return usageFailure(UsageError(message: "unknown subcommand '\(first)'"), console: console)
        }
        let rest = Array(arguments.dropFirst())
        // Help only when asked before "--": after it, "--help" is an argument like any other.
        let options = rest.prefix { $0 != "--" }
        if options.contains("-h") || options.contains("--help") {
            console.out(HelpText.command(command.description))
            return .success
        }
        let description = command.description
        do {
            let scanner = try ArgumentScanner(
                rest,
                command: description.name,
                valueOptions: description.valueOptions,
                flagOptions: description.flagOptions,
                aliases: description.aliases
            )
            let instance = try command.make(scanner)
            return try await instance.run(CommandContext(host: .current, console: console))
        } catch let error as UsageError {
            return usageFailure(error, console: console)
        } catch let error as AppExtensionError {
            report(error, console: console)
            return ExitStatus(for: error)
        } catch let error as CommandFailure {
            console.error(error.message)
            return error.status
        } catch {
            console.error("\(error)".inert)
            return .failure
        }
    }

    /// `plugind help --man [<subcommand> | manifest <file> | policy <file>]`: a manual page in
    /// roff, for the packages (Scripts/stage.sh). The pages of section 5 are written from their
    /// Markdown references.
    static func manualPage(_ arguments: [String], console: Console) -> ExitStatus {
        // A reference page is named with its Markdown source ('policy' is also a subcommand).
        if let name = arguments.first, let page = ReferencePage.all[name], arguments.count == 2 || command(named: name) == nil {
            guard arguments.count == 2, let markdown = try? String(contentsOfFile: arguments[1], encoding: .utf8) else {
                console.error("help --man \(name) needs the path of \(page.source)")
                return .usage
            }
            console.out(MarkdownManualPage.page(markdown, name: page.name, section: 5, summary: page.summary, version: version))
            return .success
        }
        switch arguments.first {
        case nil:
            console.out(ManualPage.root(commands.map(\.description), version: version))
        case let name?:
            guard let command = command(named: name) else {
                return usageFailure(UsageError(message: "unknown subcommand '\(name)'"), console: console)
            }
            console.out(ManualPage.command(command.description, version: version))
        }
        return .success
    }

    static func command(named name: String) -> CommandEntry? {
        commands.first { $0.description.name == name }
    }

    static func usageFailure(_ error: UsageError, console: Console) -> ExitStatus {
        console.error(error.message)
        if let name = error.command, let command = command(named: name) {
            console.err("Usage: plugind \(name) \(command.description.usage)\n  See 'plugind help \(name)'.\n")
        } else {
            console.err("Usage: plugind <subcommand> [<options>]\n  See 'plugind --help'.\n")
        }
        return .usage
    }

    /// The error, its cause, where the plugin was (a crash's or a hung request's frames) and
    /// the tail of the worker's output when there is one.
    static func report(_ error: AppExtensionError, console: Console) {
        console.error(error.description)
        if !error.backtrace.isEmpty {
            let heading = error.code == .timedOut ? "where the request was when its deadline passed" : "where the plugin crashed"
            console.err("note: \(heading):\n" + error.backtrace.map { "  \($0)" }.joined(separator: "\n") + "\n")
        }
        let tail = error.standardErrorTail.trimmingCharacters(in: .whitespacesAndNewlines)
        if !tail.isEmpty {
            let lines = tail.split(separator: "\n", omittingEmptySubsequences: false).suffix(20)
            console.err(
                "note: last output of the plugin's worker:\n" + lines.map { "  | \(String($0).inert)" }.joined(separator: "\n") + "\n")
        }
    }
}

/// A failure a command reports itself: message and exit status.
struct CommandFailure: Error {
    var message: String
    var status: ExitStatus
}
