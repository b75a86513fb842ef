import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind quarantine`: plugins held back after repeated crashes.
struct QuarantineCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON (with list; the plugins under \"plugins\").")
    }

    static let description = CommandDescription(
        name: "quarantine",
        abstract: "List quarantined plugins, or clear one.",
        usage: "list [--json] | clear <id> | reset",
        discussion: """
            A plugin that crashes repeatedly (3 times within 5 minutes by default) is quarantined
            until its library changes or the owner clears it. The record keeps how each crash
            ended and the last output of the worker. A crash log that cannot be read, is corrupt
            or could have been written by another user is never overwritten; until it is fixed
            every plugin counts as quarantined. 'reset' moves such a log aside (nothing is
            deleted).
            """,
        arguments: [
            ("list", "Show quarantines and recent crashes."), ("clear <id>", "Forget a plugin's crashes and quarantine."),
            ("reset", "Move an unusable crash log aside."),
        ],
        options: [Options.json]
    )

    enum Action {
        case list(json: Bool)
        case clear(String)
        case reset
    }

    let action: Action

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let positionals = try arguments.positionals(["action"], optional: ["id"])
        switch positionals[0] {
        case "list":
            guard positionals.count == 1 else { throw UsageError(message: "'list' takes no identifier", command: "quarantine") }
            action = .list(json: arguments.flag(Options.json))
        case "clear":
            guard positionals.count == 2 else { throw UsageError(message: "missing ID", command: "quarantine") }
            action = .clear(positionals[1])
        case "reset":
            guard positionals.count == 1 else { throw UsageError(message: "'reset' takes no identifier", command: "quarantine") }
            action = .reset
        default:
            throw UsageError(message: "unknown action '\(positionals[0])' (use list, clear or reset)", command: "quarantine")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let log = CrashLog(host: context.host)
        switch action {
        case .clear(let identifier):
            let cleared: Bool
            do {
                cleared = try log.clear(identifier)
            } catch let problem as CrashLog.Problem {
                throw CommandFailure(message: problem.description, status: .failure)
            }
            guard cleared else {
                throw CommandFailure(message: "\(identifier) has no crash record", status: .failure)
            }
            context.console.err("Cleared the crashes and quarantine of \(identifier).\n")
        case .reset:
            if let moved = try log.moveAside() {
                context.console.err("Moved the crash log to \(moved); crash counts start again.\n")
            } else {
                context.console.err("The crash log is usable; nothing to reset.\n")
            }
        case .list(let json):
            let document: CrashLog.Document
            switch log.read() {
            case .success(let read): document = read
            case .failure(let problem): throw CommandFailure(message: problem.description, status: .failure)
            }
            let plugins = document.plugins.sorted { $0.key < $1.key }.filter { !$0.value.crashes.isEmpty || $0.value.quarantine != nil }
            if json {
                let entries = plugins.map { identifier, record in
                    QuarantineEntry(
                        identifier: identifier,
                        quarantined: record.quarantine != nil,
                        since: record.quarantine?.since,
                        reason: record.quarantine?.reason,
                        crashes: record.crashes.map {
                            .init(time: $0.time, reason: $0.reason, output: $0.output, librarySHA256: $0.librarySHA256)
                        }
                    )
                }
                try context.console.json(QuarantineDocument(plugins: entries))
                return .success
            }
            if plugins.isEmpty { context.console.out("No crash records.\n") }
            for (identifier, record) in plugins {
                if let quarantine = record.quarantine {
                    context.console.out(
                        "\(identifier)  quarantined since \(ISO8601DateFormatter().string(from: quarantine.since))\n    \(quarantine.reason)\n"
                    )
                } else {
                    context.console.out("\(identifier)  \(record.crashes.count) recent crash(es), not quarantined\n")
                }
                for crash in record.crashes {
                    context.console.out("    \(ISO8601DateFormatter().string(from: crash.time))  \(crash.reason)\n")
                }
            }
        }
        return .success
    }
}

/// `plugind quarantine list --json`: the plugins with crashes or a quarantine, by identifier.
struct QuarantineDocument: JSONDocument {
    static let formatVersion = 1
    var plugins: [QuarantineEntry]
}

/// One plugin's quarantine and recent crashes.
struct QuarantineEntry: Encodable {
    struct Crash: Encodable {
        var time: Date
        var reason: String
        var output: String
        var librarySHA256: String
    }

    var identifier: String
    var quarantined: Bool
    var since: Date?
    var reason: String?
    var crashes: [Crash]
}
