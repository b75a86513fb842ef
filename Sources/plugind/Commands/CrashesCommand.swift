import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind crashes`: how plugins crashed, with the crashed thread's frames.
struct CrashesCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON for scripts (each plugin's crashes under \"plugins\").")
    }

    static let description = CommandDescription(
        name: "crashes",
        abstract: "Show how plugins crashed, with the frames of the crashed thread.",
        usage: "[<id>] [--json]",
        discussion: """
            For each plugin (or only <id>), its last crashes (up to \(CrashLog.keptCrashes), of the
            library bytes installed now): when, how the worker ended, the crashed thread's frames
            — function, offset and source line where the library has debug information, named by
            the host from its own copies of the libraries — and the last output of the worker.
            Whether the plugin is quarantined, and 'plugind quarantine clear <id>' to clear it.
            """,
        arguments: [("<id>", "Only this plugin.")],
        options: [Options.json]
    )

    let identifier: String?
    let json: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals([], optional: ["id"]).first
        json = arguments.flag(Options.json)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let document: CrashLog.Document
        switch CrashLog(host: context.host).read() {
        case .success(let read): document = read
        case .failure(let problem): throw CommandFailure(message: problem.description, status: .failure)
        }
        let plugins = document.plugins.sorted { $0.key < $1.key }.filter {
            !$0.value.crashes.isEmpty && (identifier == nil || $0.key == identifier)
        }
        if json {
            try context.console.json(CrashesDocument(plugins: plugins.map { CrashesEntry(identifier: $0.key, record: $0.value) }))
            return .success
        }
        guard !plugins.isEmpty else {
            context.console.out(identifier.map { "No crashes recorded for \($0.inert).\n" } ?? "No crashes recorded.\n")
            return .success
        }
        let time = ISO8601DateFormatter()
        for (identifier, record) in plugins {
            var heading = "\(identifier.inert)  \(record.crashes.count) crash(es)"
            if let quarantine = record.quarantine {
                heading += ", quarantined since \(time.string(from: quarantine.since)) (plugind quarantine clear \(identifier.inert))"
            }
            context.console.out(heading + "\n")
            for crash in record.crashes.reversed() {
                context.console.out("  \(time.string(from: crash.time))  \(crash.reason.inert)\n")
                for frame in crash.backtrace ?? [] { context.console.out("    \(frame)\n") }
                if crash.backtrace == nil { context.console.out("    (no frames: the worker could not report them)\n") }
                let output = crash.output.split(separator: "\n", omittingEmptySubsequences: true).suffix(5)
                for line in output { context.console.out("    | \(String(line).inert)\n") }
            }
        }
        return .success
    }
}

/// `plugind crashes --json`: each plugin's crashes, by identifier.
struct CrashesDocument: JSONDocument {
    static let formatVersion = 1
    var plugins: [CrashesEntry]
}

/// One plugin's crashes, as `plugind crashes --json` prints them.
struct CrashesEntry: Encodable {
    struct Crash: Encodable {
        var time: Date
        var reason: String
        var output: String
        var librarySHA256: String
        var backtrace: [AppExtensionError.StackFrame]
    }

    var identifier: String
    var quarantined: Bool
    var crashes: [Crash]

    init(identifier: String, record: CrashLog.PluginCrashes) {
        self.identifier = identifier
        quarantined = record.quarantine != nil
        crashes = record.crashes.map {
            Crash(time: $0.time, reason: $0.reason, output: $0.output, librarySHA256: $0.librarySHA256, backtrace: $0.backtrace ?? [])
        }
    }
}
