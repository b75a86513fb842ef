import CTerminal
import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine

/// `plugind browse`: the owner's full-screen view of every plugin, updated live, where plugins
/// are reviewed, approved, disabled, enabled, revoked and released from quarantine.
struct BrowseCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let point = CommandOption.value("point", "<id>", "Only plugins of this extension point (repeatable).")
    }

    static let description = CommandDescription(
        name: "browse",
        abstract: "Review, approve and disable plugins in a full-screen view that updates live.",
        usage: "[--point <id>]...",
        discussion: """
            Lists every plugin with its name, identifier, version, publisher, extension point and
            state (available, unapproved, approval-outdated, disabled, quarantined, or rejected
            with the reason), and follows installs, removals and policy changes while open. Keys:
            arrows or j/k move, / filters, Enter shows details (permissions, limits, files and
            digests, functions, confinement on this machine, recent crashes), a approves after a
            review of exactly what is granted and what changed (y confirms), d disables, e
            enables, r revokes (after confirmation), c clears a quarantine, ? shows help, q or
            Ctrl-C quits. NO_COLOR turns colour off; states are always written as words. Without
            a terminal it prints the list like 'list --all' and exits.
            """,
        options: [Options.point]
    )

    let points: [String]

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        points = arguments.allValues(Options.point)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else { return printList(context) }
        let mailbox = try BrowserMailbox()
        let engine = MonitorEngine(host: context.host)
        engine.onInventory = { mailbox.post(.inventory($0)) }
        defer { engine.stop() }
        try await engine.refreshNow()
        let (host, points) = (context.host, points)
        let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
        let ending = await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: BrowserSession(host: host, points: points, mailbox: mailbox).run(noColor: noColor))
            }.start()
        }
        switch ending {
        case .quit:
            return .success
        case .unusableTerminal:
            let terminal = ProcessInfo.processInfo.environment["TERM"] ?? "unset"
            context.console.err("note: this terminal (TERM=\(terminal.inert)) cannot show the full-screen view; listing instead\n")
            return printList(context)
        case .signal(let signal):
            engine.stop()
            // The terminal is back to normal: end the way the signal would have.
            plugind_terminal_exit_by_signal(signal)
            return .failure
        }
    }

    /// Without a terminal: the list of `list --all`, for the chosen points.
    private func printList(_ context: CommandContext) -> ExitStatus {
        let inventory = Inventory.take(host: context.host)
        let items = inventory.items.filter { points.isEmpty || points.contains($0.entry.manifest.extensionPoint) }
        let problems = inventory.problems.filter { problem in
            points.isEmpty || problem.extensionPointIdentifier.map(points.contains) ?? true
        }
        let policy = PolicySnapshot.read(for: context.host)
        context.console.out(
            ListCommand.text(
                items: items, problems: problems, all: true, declared: context.host.declaredExtensionPoints,
                trust: { PublisherTrust.of($0, policy: policy) }))
        return .success
    }
}
