import ExtensionFoundation
import PlugindEngine
import PlugindSystem

/// Shows what a plugin reports while `plugind run` waits: a progress bar redrawn in place when
/// stderr is a terminal, plain "progress: 3/20" lines otherwise, and the plugin's log lines.
final class ProgressDisplay: Sendable {
    private let console: Console
    private let terminal: Bool
    /// Whether a bar is on screen and must be cleared before other output.
    private let barVisible = Locked(false)

    init(console: Console) {
        self.console = console
        self.terminal = console.standardErrorIsTerminal
    }

    func show(_ message: AppExtensionMessage) {
        switch message {
        case .progress(_, let completed, let total):
            if terminal {
                barVisible.withLock { $0 = true }
                console.errControl("\r")
                console.err(Self.bar(completed: completed, total: total))
            } else {
                console.err(total > 0 ? "progress: \(completed)/\(total)\n" : "progress: \(completed)\n")
            }
        case .log(let level, let text):
            clearBar()
            console.err("plugin \(level): \(text.inert)\n")
        case .dropped(let count):
            clearBar()
            console.err("note: \(count) message(s) of the plugin were dropped while plugind was busy\n")
        case .sandboxRefusal(let refusal):
            clearBar()
            console.err("\(refusal)\n")
        case .event:
            break
        }
    }

    /// Removes the bar, if one is shown.
    func finish() {
        clearBar()
    }

    private func clearBar() {
        let visible = barVisible.withLock { visible in
            defer { visible = false }
            return visible
        }
        if visible { console.errControl("\r\u{1B}[2K") }
    }

    /// "[##########----------]  50% (10/20)"
    static func bar(completed: UInt64, total: UInt64, width: Int = 30) -> String {
        guard total > 0 else { return "[\(String(repeating: "?", count: width))] \(completed)" }
        let fraction = min(Double(completed) / Double(total), 1)
        let filled = Int((fraction * Double(width)).rounded(.down))
        let percent = Int((fraction * 100).rounded(.down))
        let percentText = String(repeating: " ", count: 3 - String(percent).count) + "\(percent)%"
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            + "] \(percentText) (\(completed)/\(total))"
    }
}
