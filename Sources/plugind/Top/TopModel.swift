import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem

/// What `plugind top` shows: the rows in the chosen order, as lines of text (no terminal calls,
/// so the table is the same on screen and in tests).
struct TopModel {
    enum SortKey: String, CaseIterable {
        case cpu, memory, requests, plugin, uptime

        /// The key that picks it.
        var key: Character {
            switch self {
            case .cpu: "c"
            case .memory: "m"
            case .requests: "r"
            case .plugin: "p"
            case .uptime: "u"
            }
        }
    }

    var sort: SortKey = .cpu
    var rows: [WorkerTable.Row] = []

    var sortedRows: [WorkerTable.Row] {
        rows.sorted { left, right in
            let ordered: Bool? =
                switch sort {
                case .cpu: left.cpuPercent == right.cpuPercent ? nil : left.cpuPercent > right.cpuPercent
                case .memory: left.memoryBytes == right.memoryBytes ? nil : left.memoryBytes > right.memoryBytes
                case .requests: left.requestsEnded == right.requestsEnded ? nil : left.requestsEnded > right.requestsEnded
                case .plugin: left.plugin == right.plugin ? nil : left.plugin < right.plugin
                case .uptime: left.uptimeSeconds == right.uptimeSeconds ? nil : left.uptimeSeconds > right.uptimeSeconds
                }
            if let ordered { return ordered }
            return (left.hostPID, left.workerPID) < (right.hostPID, right.workerPID)
        }
    }

    /// The table as text lines: a heading and one line per worker. The plugin and host columns
    /// are as wide as their longest value (up to a bound), so identifiers are seen whole.
    func tableLines(showUser: Bool) -> [String] {
        let pluginWidth = min(48, max(6, rows.map { $0.plugin.inert.count }.max() ?? 0))
        let hostWidth = min(32, max(4, rows.map { $0.hostIdentifier.inert.count }.max() ?? 0))
        var heading = [
            ("PLUGIN", pluginWidth), ("HOST", hostWidth), ("HOST PID", 9), ("WORKER", 8), ("STATE", 8), ("CPU%", 6),
            ("MEMORY / LIMIT", 19), ("ANSWERED", 9), ("FAILED", 7), ("ACTIVE", 7), ("UPTIME", 9),
        ]
        if showUser { heading.insert(("USER", 10), at: 0) }
        var lines = [heading.map { Self.cell($0.0, $0.1) }.joined(separator: " ")]
        for row in sortedRows {
            var cells = [
                Self.cell(row.plugin.inert, pluginWidth), Self.cell(row.hostIdentifier.inert, hostWidth),
                Self.cell(String(row.hostPID), 9), Self.cell(String(row.workerPID), 8), Self.cell(row.state, 8),
                Self.cell(String(format: "%.1f", row.cpuPercent), 6),
                Self.cell("\(ByteCount(row.memoryBytes)) / \(ByteCount(row.memoryLimitBytes))", 19),
                Self.cell(String(row.requestsAnswered), 9), Self.cell(String(row.requestsFailed), 7),
                Self.cell(String(row.requestsInFlight), 7), Self.cell(Self.uptime(row.uptimeSeconds), 9),
            ]
            if showUser { cells.insert(Self.cell(row.user.inert, 10), at: 0) }
            lines.append(cells.joined(separator: " "))
        }
        return lines
    }

    /// `text` cut or padded to `width` columns (a cut one ends in "…").
    static func cell(_ text: String, _ width: Int) -> String {
        if text.count > width { return String(text.prefix(width - 1)) + "…" }
        return text + String(repeating: " ", count: width - text.count)
    }

    static func uptime(_ seconds: Double) -> String {
        // The start time is the page writer's: anything, so clamped before it becomes a count.
        let total = seconds.isFinite ? Int(min(max(seconds, 0), 1e12)) : 0
        if total < 3600 { return String(format: "%d:%02d", total / 60, total % 60) }
        if total < 86400 { return String(format: "%d:%02d:%02d", total / 3600, total % 3600 / 60, total % 60) }
        return "\(total / 86400)d \(total % 86400 / 3600)h"
    }

    var footer: String {
        "sorted by \(sort.rawValue) · " + SortKey.allCases.map { "\($0.key) \($0.rawValue)" }.joined(separator: "  ") + "  q quit"
    }
}
