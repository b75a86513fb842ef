import ExtensionFoundation
import Foundation
import PlugindSystem

/// `plugind logs`: what plugins logged, and what happened to them, from the journal or the
/// per-user log file.
struct LogsCommand: PlugindCommand {
    private enum Options {
        static let follow = CommandOption.flag("follow", short: "-f", "Keep printing entries as they are written.")
        static let since = CommandOption.value(
            "since", "TIME", "Only entries from TIME on: 2026-12-01, '2026-12-01 14:30', 14:30, today, yesterday, -10m, -2h, -1d.")
        static let lines = CommandOption.value("lines", "N", "Only the last N entries (with --follow: 10 unless given).")
        static let json = CommandOption.flag("json", "Print one JSON object per entry, one per line, for scripts.")
    }

    static let description = CommandDescription(
        name: "logs",
        abstract: "Show what plugins logged, and their crashes, limits, refusals and the owner's decisions.",
        usage: "[<id>] [--follow] [--since TIME] [--lines N] [--json]",
        discussion: """
            Hosts record each line a plugin logs (at most 50 a second per worker, with a count
            of those dropped), each crash, quarantine, limit hit and refusal of the sandbox, and
            each approve, disable, enable and revoke. They go to the system journal when it runs
            (SYSLOG_IDENTIFIER=plugind, with PLUGIND_PLUGIN, PLUGIND_PLUGIN_VERSION,
            PLUGIND_BUNDLE_DIGEST, PLUGIND_HOST, PLUGIND_HOST_EXECUTABLE, PLUGIND_HOST_PID,
            PLUGIND_WORKER_PID, PLUGIND_EVENT and PLUGIND_LEVEL; read with journalctl), else to
            $XDG_STATE_HOME/plugind/logs/plugins.log, rotated at 1 MiB. PLUGIND_LOG chooses
            (automatic, journal, file, off); PLUGIND_JOURNAL_NAMESPACE sends them to a journal
            namespace. A plugin's text is shown inert: control characters are escaped.
            """,
        arguments: [("<id>", "Only this plugin's entries.")],
        options: [Options.follow, Options.since, Options.lines, Options.json]
    )

    let identifier: String?
    let follow: Bool
    let since: UInt64?
    let lines: Int?
    let json: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals([], optional: ["id"]).first
        follow = arguments.flag(Options.follow)
        json = arguments.flag(Options.json)
        if let text = arguments.value(Options.since) {
            guard let time = SinceTime.parse(text) else {
                throw UsageError(
                    message: "--since: '\(text.inert)' is not a time (2026-12-01, '2026-12-01 14:30', 14:30, today, -10m, -2h)",
                    command: "logs")
            }
            since = time
        } else {
            since = nil
        }
        if let text = arguments.value(Options.lines) {
            guard let count = Int(text), count >= 0, count <= 1_000_000 else {
                throw UsageError(message: "--lines: '\(text.inert)' is not a count from 0 to 1000000", command: "logs")
            }
            lines = count
        } else {
            lines = follow ? 10 : nil
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        guard let sink = PluginLogWriter.sink(for: context.host) else {
            throw CommandFailure(message: "the plugin log is off for this host (PLUGIND_LOG=off): nothing is recorded", status: .failure)
        }
        switch sink {
        case .journal(_, let namespace): try readJournal(namespace: namespace, context)
        case .file(let directory): try await readFile(PluginLogFile(directory: directory), context)
        }
        return .success
    }

    private func matches(_ entry: PluginLogEntry) -> Bool {
        (identifier == nil || entry.plugin == identifier) && (since.map { entry.time >= $0 } ?? true)
    }

    private func show(_ entry: PluginLogEntry, _ console: Console) throws {
        if json {
            try console.jsonLine(entry)
            return
        }
        let seconds = Double(entry.time) / 1_000_000
        let stamp = Self.timeFormatter.string(from: Date(timeIntervalSince1970: seconds))
        let worker = entry.workerPID.map { "[\($0)]" } ?? ""
        let kind = entry.event == .log ? (entry.level ?? "info") : entry.event.rawValue
        console.out("\(stamp) \(entry.plugin.inert)\(worker) \(kind): \(entry.message.inert)\n")
    }

    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        return formatter
    }()

    // MARK: The file

    private func readFile(_ file: PluginLogFile, _ context: CommandContext) async throws {
        var entries = file.entries().filter(matches)
        if let lines { entries = Array(entries.suffix(lines)) }
        for entry in entries { try show(entry, context.console) }
        guard follow else { return }
        // From the end of what was read: the file's identity and size tell a rotation apart.
        var identity = Self.identity(of: file.path)
        var offset = identity?.size ?? 0
        while !Task.isCancelled {
            try await Task.sleep(for: .milliseconds(200))
            guard let now = Self.identity(of: file.path) else { continue }
            if now.inode != identity?.inode || now.size < offset {
                // Rotated: what is left of the old file is in plugins.log.1 now.
                if let old = identity, let rotated = Self.identity(of: file.rotatedPath), rotated.inode == old.inode {
                    try showLines(file.lines(of: file.rotatedPath, from: offset).lines, context.console)
                }
                identity = now
                offset = 0
            }
            let read = file.lines(of: file.path, from: offset)
            offset = read.end
            try showLines(read.lines, context.console)
        }
    }

    private func showLines(_ lines: [Data], _ console: Console) throws {
        for line in lines {
            guard let entry = try? JSONDecoder().decode(PluginLogEntry.self, from: line), matches(entry) else { continue }
            try show(entry, console)
        }
    }

    private static func identity(of path: String) -> (inode: UInt64, size: Int)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return (UInt64(status.st_ino), Int(status.st_size))
    }

    // MARK: The journal

    private func readJournal(namespace: String?, _ context: CommandContext) throws {
        guard ExternalTool.path(of: "journalctl") != nil else {
            throw CommandFailure(
                message: "the plugin log is in the journal, and reading it needs journalctl ('apt install systemd')", status: .failure)
        }
        var arguments = ["--output=json", "--no-pager", "--quiet", "SYSLOG_IDENTIFIER=\(PluginLogEntry.syslogIdentifier)"]
        if let namespace { arguments.append("--namespace=\(namespace)") }
        if let identifier { arguments.append("PLUGIND_PLUGIN=\(identifier)") }
        if let since { arguments.append("--since=@\(since / 1_000_000)") }
        if let lines { arguments.append("--lines=\(lines)") }
        if follow { arguments.append("--follow") }
        do {
            try ExternalTool.streamLines("journalctl", arguments, package: "systemd") { line in
                guard let object = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any],
                    let entry = PluginLogEntry(journalObject: object), matches(entry)
                else { return }
                try show(entry, context.console)
            }
        } catch let failure as ExternalTool.Failure {
            throw CommandFailure(
                message: failure.description.inert
                    + (getuid() == 0 ? "" : " (reading the system journal may need the systemd-journal group)"),
                status: .failure)
        }
    }
}
