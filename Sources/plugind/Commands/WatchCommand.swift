import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind watch`: one line per change of any plugin's availability, as it happens.
struct WatchCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let point = CommandOption.value("point", "<id>", "Only plugins for this extension point.")
        static let json = CommandOption.flag("json", "Print one JSON object per line.")
    }

    static let description = CommandDescription(
        name: "watch",
        abstract: "Print a line whenever a plugin appears, disappears or changes state.",
        usage: "[--point <id>] [--json]",
        discussion: """
            Starts with the current plugins, then follows installs, removals, approvals, disables,
            changed bytes and quarantines until interrupted. With --json, one JSON object per line:
            {"formatVersion", "event": "present"|"added"|"changed"|"removed", "identifier",
            "extensionPoint", "state", "previousState", "reason"}.
            """,
        options: [Options.point, Options.json]
    )

    let point: String?
    let json: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        point = arguments.value(Options.point)
        json = arguments.flag(Options.json)
    }

    /// A line of `watch --json`.
    struct Change: JSONDocument {
        static let formatVersion = 1

        var event: String
        var identifier: String
        var extensionPoint: String
        var state: String?
        var previousState: String?
        var reason: String?
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let engine = MonitorEngine(host: context.host)
        let (changes, continuation) = AsyncStream<Inventory>.makeStream()
        engine.onInventory = { continuation.yield($0) }
        try await engine.refreshNow()
        var known: [String: Inventory.Item] = [:]
        var first = true
        for await inventory in changes {
            let items = inventory.items.filter { point == nil || $0.entry.manifest.extensionPoint == point }
            var current: [String: Inventory.Item] = [:]
            for item in items { current[item.entry.identifier] = item }
            for item in items {
                let id = item.entry.identifier
                if let previous = known[id] {
                    if previous.stateCode != item.stateCode || previous.diagnostic?.message != item.diagnostic?.message {
                        try emit(
                            Change(
                                event: "changed", identifier: id, extensionPoint: item.entry.manifest.extensionPoint, state: item.stateCode,
                                previousState: previous.stateCode, reason: item.diagnostic?.message), context)
                    }
                } else {
                    try emit(
                        Change(
                            event: first ? "present" : "added", identifier: id, extensionPoint: item.entry.manifest.extensionPoint,
                            state: item.stateCode, reason: item.diagnostic?.message), context)
                }
            }
            for (id, previous) in known where current[id] == nil {
                try emit(
                    Change(
                        event: "removed", identifier: id, extensionPoint: previous.entry.manifest.extensionPoint,
                        previousState: previous.stateCode), context)
            }
            known = current
            first = false
        }
        return .success
    }

    private func emit(_ change: Change, _ context: CommandContext) throws {
        if json {
            try context.console.jsonLine(change)
            return
        }
        let symbol = ["present": " ", "added": "+", "changed": "~", "removed": "-"][change.event] ?? "?"
        var line = "\(symbol) \(change.identifier.inert) [\(change.extensionPoint.inert)]"
        if let previous = change.previousState, let state = change.state {
            line += " \(previous) -> \(state)"
        } else if let state = change.state {
            line += " \(state)"
        } else {
            line += " removed"
        }
        if let reason = change.reason { line += ": \(reason.inert)" }
        context.console.out(line + "\n")
    }
}
