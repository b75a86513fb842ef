import ExtensionFoundation
import Foundation
import PlugindEngine
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
            $XDG_STATE_HOME/plugind/logs: plugins.log for what plugins say, events.log for
            plugind's events and the owner's decisions, each rotated at 1 MiB. PLUGIND_LOG chooses
            (automatic, journal, file, off); PLUGIND_JOURNAL_NAMESPACE sends them to a journal
            namespace. A plugin's text is shown inert: control characters are escaped.

            What the journal proves: it stamps each entry with the uid and pid of the process
            that sent it (_UID, _PID), which no sender can choose, so the uid is trustworthy.
            What it does not: that a plugind host wrote the entry. Any process of that uid, a
            plugin's host included, can send entries that look like plugind's. So an ordinary
            user sees their own entries only (journalctl's _UID match), and root sees every
            user's, each with whose it is: the user's name in the text, uid and user in --json.
            The log file holds no such stamp: any process of its owner can write a line there.
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

    /// `user`: the name of the entry's uid, for an entry of the journal; `labelled`: whose each
    /// entry is starts its line (root reads every user's entries; "-" where no uid was stamped).
    private func show(_ entry: PluginLogEntry, user: String? = nil, labelled: Bool = false, _ console: Console) throws {
        if json {
            try console.jsonLine(ShownEntry(entry: entry, user: user))
            return
        }
        let seconds = Double(entry.time) / 1_000_000
        let stamp = Self.timeFormatter.string(from: Date(timeIntervalSince1970: seconds))
        let worker = entry.workerPID.map { "[\($0)]" } ?? ""
        let kind = entry.event == .log ? (entry.level ?? "info") : entry.event.rawValue
        let whose = labelled ? "\((user ?? "-").inert) " : ""
        console.out("\(stamp) \(whose)\(entry.plugin.inert)\(worker) \(kind): \(entry.message.inert)\n")
    }

    /// An entry of `--json`: its fields, and the name of its uid (`user`) where the journal
    /// stamped one.
    private struct ShownEntry: JSONDocument {
        static let formatVersion = 1
        var entry: PluginLogEntry
        var user: String?

        private enum Key: String, CodingKey { case user }

        func encode(to encoder: any Encoder) throws {
            try entry.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encodeIfPresent(user, forKey: .user)
        }
    }

    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        return formatter
    }()

    // MARK: The file

    private func readFile(_ file: PluginLogFile, _ context: CommandContext) async throws {
        var follower = PluginLogFile.Follower(file)
        var entries = file.entries().map(Self.unstamped).filter(matches)
        if let lines { entries = Array(entries.suffix(lines)) }
        for entry in entries { try show(entry, context.console) }
        guard follow else { return }
        while !Task.isCancelled {
            try await Task.sleep(for: .milliseconds(200))
            for entry in follower.newEntries().map(Self.unstamped) where matches(entry) { try show(entry, context.console) }
        }
    }

    /// An entry of the log file without a uid: any process of the file's owner can write a line
    /// there, so a uid in it would claim what only the journal can stamp.
    private static func unstamped(_ entry: PluginLogEntry) -> PluginLogEntry {
        var entry = entry
        entry.uid = nil
        return entry
    }

    // MARK: The journal

    private func readJournal(namespace: String?, _ context: CommandContext) throws {
        guard ExternalTool.path(of: "journalctl") != nil else {
            throw CommandFailure(
                message: "the plugin log is in the journal, and reading it needs journalctl ('apt install systemd')", status: .failure)
        }
        let reader = geteuid()
        var names: [UInt32: String] = [:]
        do {
            try ExternalTool.streamLines("journalctl", journalArguments(namespace: namespace, reader: reader), package: "systemd") { line in
                guard let object = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any],
                    let entry = PluginLogEntry(journalObject: object), matches(entry)
                else { return }
                // journalctl matched on the uid already; a user is never shown another's entry,
                // nor one without the journal's stamp (imported from elsewhere: nobody vouches).
                guard reader == 0 || entry.uid == reader else { return }
                var user: String?
                if let uid = entry.uid {
                    user = names[uid] ?? Self.userName(uid)
                    names[uid] = user
                }
                try show(entry, user: user, labelled: reader == 0, context.console)
            }
        } catch let failure as ExternalTool.Failure {
            throw CommandFailure(
                message: failure.description.inert
                    + (getuid() == 0 ? "" : " (reading the system journal may need the systemd-journal group)"),
                status: .failure)
        }
    }

    /// journalctl's arguments: plugind's entries, and for anyone but root (`reader` 0) only those
    /// the journal stamped with the reader's own uid. Matches of different fields must all hold.
    func journalArguments(namespace: String?, reader: uid_t) -> [String] {
        var arguments = ["--output=json", "--no-pager", "--quiet", "SYSLOG_IDENTIFIER=\(PluginLogEntry.syslogIdentifier)"]
        if reader != 0 { arguments.append("_UID=\(reader)") }
        if let namespace { arguments.append("--namespace=\(namespace)") }
        if let identifier { arguments.append("PLUGIND_PLUGIN=\(identifier)") }
        if let since { arguments.append("--since=@\(since / 1_000_000)") }
        if let lines { arguments.append("--lines=\(lines)") }
        if follow { arguments.append("--follow") }
        return arguments
    }

    /// The user's name, or the uid as a number when it has none.
    private static func userName(_ uid: UInt32) -> String {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return String(uid)
        }
        return String(cString: name)
    }
}
