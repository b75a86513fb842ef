import CTerminal
import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// What the browser shows and how keys change it, with no terminal in it: `BrowseCommand`
/// feeds it the inventory and keys, carries out the commands it returns and draws its lines.
struct BrowserModel {
    enum Action: Equatable {
        case approve, disable, enable, revoke, clearQuarantine
    }

    enum Mode: Equatable {
        case list
        case filtering
        case help
        /// The details of a plugin, scrolled.
        case details(String)
        /// What approving a plugin grants, waiting for `y`.
        case review(String)
        /// A destructive action waiting for `y`.
        case confirm(Action, String)
    }

    /// What the command must do after a key.
    enum Command: Equatable {
        case none
        case quit
        case perform(Action, String)
        /// Gather the details (or the review) of a plugin, then `show(text:)`.
        case loadDetails(String)
        case loadReview(String)
    }

    struct Line: Equatable {
        var text: String
        var style: plugind_terminal_style
        var fill = false
    }

    private(set) var entries: [BrowserEntry] = []
    private(set) var filter = ""
    private(set) var selected = 0
    private(set) var mode: Mode = .list
    private(set) var scroll = 0
    /// The details or review text on screen.
    private(set) var text: [String] = []
    /// False while the text is a placeholder (still being read) or says why it could not be
    /// read: a review that is not complete cannot be answered with `y`.
    private(set) var textComplete = false
    /// One line under the list: what the last action did, or why it failed.
    var status: String?
    let title: String

    init(title: String) {
        self.title = title
    }

    var visible: [BrowserEntry] {
        guard !filter.isEmpty else { return entries }
        let needle = filter.lowercased()
        return entries.filter { entry in
            [entry.identifier, entry.name, entry.extensionPoint, entry.state].contains { $0.lowercased().contains(needle) }
        }
    }

    var selectedEntry: BrowserEntry? {
        let visible = visible
        return visible.indices.contains(selected) ? visible[selected] : nil
    }

    /// A new inventory: the selection stays on the same plugin when it is still listed.
    mutating func update(_ entries: [BrowserEntry]) {
        let current = selectedEntry?.identifier
        self.entries = entries
        if let current, let index = visible.firstIndex(where: { $0.identifier == current }) { selected = index }
        clampSelection()
    }

    /// Shows gathered details or review text.
    mutating func show(text: [String], complete: Bool = true) {
        self.text = text
        textComplete = complete
        scroll = 0
    }

    private mutating func clampSelection() {
        selected = max(0, min(selected, visible.count - 1))
    }

    // MARK: Keys

    mutating func handle(key: Int32) -> Command {
        // Ctrl-C quits from anywhere: in raw mode it is a key, not a signal.
        if key == PLUGIND_TERMINAL_KEY_INTERRUPT { return .quit }
        switch mode {
        case .list: return listKey(key)
        case .filtering: return filterKey(key)
        case .help:
            mode = .list
            return .none
        case .details(let identifier): return detailsKey(key, identifier)
        case .review(let identifier):
            // A long review is read to its end before deciding: scrolling is not an answer.
            if scrollKey(key) { return .none }
            mode = .list
            let yes = key == character("y") || key == character("Y")
            if yes && textComplete { return .perform(.approve, identifier) }
            status = yes ? "Not approved: the review of \(identifier.inert) was not complete." : "Not approved: \(identifier.inert)"
            return .none
        case .confirm(let action, let identifier):
            mode = .list
            if key == character("y") || key == character("Y") { return .perform(action, identifier) }
            status = "Cancelled."
            return .none
        }
    }

    private func character(_ text: Character) -> Int32 {
        Int32(text.asciiValue ?? 0)
    }

    private mutating func listKey(_ key: Int32) -> Command {
        let count = visible.count
        switch key {
        case PLUGIND_TERMINAL_KEY_UP, character("k"): selected = max(selected - 1, 0)
        case PLUGIND_TERMINAL_KEY_DOWN, character("j"): selected = min(selected + 1, max(count - 1, 0))
        case PLUGIND_TERMINAL_KEY_PAGE_UP: selected = max(selected - 10, 0)
        case PLUGIND_TERMINAL_KEY_PAGE_DOWN: selected = min(selected + 10, max(count - 1, 0))
        case PLUGIND_TERMINAL_KEY_HOME, character("g"): selected = 0
        case PLUGIND_TERMINAL_KEY_END, character("G"): selected = max(count - 1, 0)
        case character("/"):
            mode = .filtering
            status = nil
        case character("?"): mode = .help
        case character("q"), character("Q"): return .quit
        case PLUGIND_TERMINAL_KEY_ENTER:
            guard let entry = selectedEntry else { return .none }
            mode = .details(entry.identifier)
            show(text: ["Reading \(entry.identifier.inert)…"], complete: false)
            return .loadDetails(entry.identifier)
        case character("a"), character("d"), character("e"), character("r"), character("c"):
            guard let entry = selectedEntry else { return .none }
            guard entry.isPlugin else {
                status = "\(entry.name.inert) is \(entry.state), not a plugin that can be approved: Enter shows why"
                return .none
            }
            return act(on: entry, key: key)
        default: break
        }
        return .none
    }

    private mutating func act(on entry: BrowserEntry, key: Int32) -> Command {
        switch key {
        case character("a"):
            mode = .review(entry.identifier)
            show(text: ["Reading \(entry.identifier.inert)…"], complete: false)
            return .loadReview(entry.identifier)
        case character("d"): return .perform(.disable, entry.identifier)
        case character("e"): return .perform(.enable, entry.identifier)
        case character("r"):
            mode = .confirm(.revoke, entry.identifier)
            return .none
        default:
            guard entry.state == "quarantined" else {
                status = "\(entry.identifier.inert) is not quarantined"
                return .none
            }
            return .perform(.clearQuarantine, entry.identifier)
        }
    }

    private mutating func filterKey(_ key: Int32) -> Command {
        switch key {
        case PLUGIND_TERMINAL_KEY_ENTER: mode = .list
        case PLUGIND_TERMINAL_KEY_ESCAPE:
            filter = ""
            mode = .list
        case PLUGIND_TERMINAL_KEY_BACKSPACE: if !filter.isEmpty { filter.removeLast() }
        case 0x20..<0x7F: filter.append(Character(Unicode.Scalar(UInt8(key))))
        default: break
        }
        selected = 0
        clampSelection()
        return .none
    }

    private mutating func detailsKey(_ key: Int32, _ identifier: String) -> Command {
        if scrollKey(key) { return .none }
        switch key {
        case character("a"):
            mode = .review(identifier)
            show(text: ["Reading \(identifier.inert)…"], complete: false)
            return .loadReview(identifier)
        case character("q"), PLUGIND_TERMINAL_KEY_ESCAPE, PLUGIND_TERMINAL_KEY_ENTER, PLUGIND_TERMINAL_KEY_BACKSPACE:
            mode = .list
        default: break
        }
        return .none
    }

    /// Moves through the details or review text; false for any other key.
    private mutating func scrollKey(_ key: Int32) -> Bool {
        let last = max(text.count - 1, 0)
        switch key {
        case PLUGIND_TERMINAL_KEY_UP, character("k"): scroll = max(scroll - 1, 0)
        case PLUGIND_TERMINAL_KEY_DOWN, character("j"): scroll = min(scroll + 1, last)
        case PLUGIND_TERMINAL_KEY_PAGE_UP: scroll = max(scroll - 10, 0)
        case PLUGIND_TERMINAL_KEY_PAGE_DOWN, character(" "): scroll = min(scroll + 10, last)
        case PLUGIND_TERMINAL_KEY_HOME, character("g"): scroll = 0
        case PLUGIND_TERMINAL_KEY_END, character("G"): scroll = last
        default: return false
        }
        return true
    }

    // MARK: Drawing

    static let stateWidth = 17
    /// "ed25519:" and 12 hex digits, and room for " INVALID".
    static let publisherWidth = 28

    /// The screen as lines, `height` of them at most, each cut to `width` columns.
    func render(height: Int, width: Int) -> [Line] {
        guard height > 2, width > 10 else { return [Line(text: "plugind browse: the terminal is too small", style: PLUGIND_TERMINAL_BAD)] }
        var lines: [Line] = []
        var body: [Line]
        switch mode {
        case .list, .filtering:
            lines.append(Line(text: cut(header, width), style: PLUGIND_TERMINAL_HEADING))
            body = listLines(height: height - 3, width: width)
        case .help:
            lines.append(Line(text: cut("plugind browse: keys", width), style: PLUGIND_TERMINAL_HEADING))
            body = Self.help.map { Line(text: cut($0, width), style: PLUGIND_TERMINAL_PLAIN) }
        case .details(let identifier):
            lines.append(Line(text: cut("Details of \(identifier.inert)", width), style: PLUGIND_TERMINAL_HEADING))
            body = textLines(height: height - 3, width: width)
        case .review(let identifier):
            let heading = textComplete ? "Approve \(identifier.inert)?" : "Review of \(identifier.inert)"
            lines.append(Line(text: cut(heading, width), style: PLUGIND_TERMINAL_HEADING))
            body = textLines(height: height - 3, width: width)
        case .confirm(let action, let identifier):
            lines.append(Line(text: cut("Confirm", width), style: PLUGIND_TERMINAL_HEADING))
            body = [
                Line(
                    text: cut("\(Self.verb(action)) \(identifier.inert)? It would need approving again to run.", width),
                    style: PLUGIND_TERMINAL_WARNING)
            ]
        }
        lines += body.prefix(height - 3)
        while lines.count < height - 2 { lines.append(Line(text: "", style: PLUGIND_TERMINAL_PLAIN)) }
        lines.append(Line(text: cut(statusText, width), style: status == nil ? PLUGIND_TERMINAL_DIM : PLUGIND_TERMINAL_WARNING))
        lines.append(Line(text: cut(footer(width: width), width), style: PLUGIND_TERMINAL_SELECTED, fill: true))
        return lines
    }

    private var header: String {
        var counts: [String: Int] = [:]
        for entry in entries { counts[entry.state, default: 0] += 1 }
        let states = [
            "available", "unapproved", "approval-outdated", "disabled", "denied", "quarantined", "rejected", "shadowed",
            "policy-unreadable",
        ]
        let summary = states.compactMap { state in
            counts[state].map { "\($0) \(state)" }
        }
        return "\(title): \(entries.count) plugin(s)" + (summary.isEmpty ? "" : " — " + summary.joined(separator: ", "))
    }

    private var statusText: String {
        if mode == .filtering { return "filter: \(filter)▏ (Enter keeps it, Esc clears it)" }
        if let status { return status }
        if !filter.isEmpty { return "filter: \(filter) (/ to change)" }
        return ""
    }

    /// The keys of the current mode, as many as fit: the longest form that fits the width, down
    /// to the keys that always matter (help, quit, the answer).
    private func footer(width: Int) -> String {
        let forms: [String]
        switch mode {
        case .list, .filtering:
            forms = [
                "↑↓ move  / filter  ⏎ details  a approve  d disable  e enable  r revoke  c clear  ? help  q quit",
                "↑↓ / ⏎  a approve  d disable  e enable  r revoke  c clear  ? help  q quit",
                "/ ⏎  a approve  d disable  e enable  ? help  q quit",
                "? help  q quit",
            ]
        case .help: forms = ["any key: back"]
        case .details: forms = ["↑↓ scroll  a approve  q back"]
        case .review:
            forms =
                textComplete
                ? ["↑↓ scroll  y approve exactly this  any other key: do not approve", "↑↓ scroll  y approve  other keys: no"]
                : ["any key: back"]
        case .confirm: forms = ["y: yes   any other key: no"]
        }
        return forms.first { $0.count <= width } ?? forms[forms.count - 1]
    }

    static let help = [
        "  ↑ ↓  j k      move through the list (PgUp PgDn, g G: faster, to the ends)",
        "  /             filter by identifier, name, extension point or state",
        "  Enter         details: permissions, limits, files and digest, functions, confinement, crashes",
        "  a             approve, after a review of exactly what is granted and what changed",
        "  d  e          disable, enable",
        "  r             revoke the approval (asks first)",
        "  c             clear a quarantine",
        "  q             quit",
        "",
        "  States: available, unapproved, approval-outdated (its bytes or requests changed),",
        "  disabled, quarantined (it crashed repeatedly), rejected (the bundle is broken),",
        "  shadowed (a bundle with the same identifier comes first), policy-unreadable.",
    ]

    static func verb(_ action: Action) -> String {
        switch action {
        case .approve: "Approve"
        case .disable: "Disable"
        case .enable: "Enable"
        case .revoke: "Revoke the approval of"
        case .clearQuarantine: "Clear the quarantine of"
        }
    }

    /// Column headings, one row per plugin, and under them what does not fit in a row about the
    /// selected one: extension point, publisher, and why it is not available.
    private func listLines(height: Int, width: Int) -> [Line] {
        let visible = visible
        guard !visible.isEmpty else {
            return [Line(text: filter.isEmpty ? "  No plugins found." : "  Nothing matches the filter.", style: PLUGIND_TERMINAL_DIM)]
        }
        let columns = Columns(visible, width: width)
        let panel = selectedEntry.map { panelLines($0, width: width) } ?? []
        let rows = max(height - 1 - panel.count, 1)
        // Keep the selection on screen.
        let first = max(0, min(selected - rows / 2, visible.count - rows))
        var lines = [
            Line(
                text: cut(columns.row("STATE", "NAME", "VERSION", publisher: "PUBLISHER", "IDENTIFIER", "EXTENSION POINT"), width),
                style: PLUGIND_TERMINAL_DIM)
        ]
        lines += visible.indices.dropFirst(first).prefix(rows).map { index in
            let entry = visible[index]
            let text = cut(
                columns.row(
                    entry.state, entry.name.inert, entry.version.inert, publisher: entry.shortPublisher.inert, entry.identifier.inert,
                    entry.extensionPoint.inert), width)
            return index == selected
                ? Line(text: text, style: PLUGIND_TERMINAL_SELECTED, fill: true) : Line(text: text, style: Self.style(of: entry.state))
        }
        while lines.count < height - panel.count { lines.append(Line(text: "", style: PLUGIND_TERMINAL_PLAIN)) }
        return lines + panel
    }

    private func panelLines(_ entry: BrowserEntry, width: Int) -> [Line] {
        var lines = [Line(text: String(repeating: "─", count: width), style: PLUGIND_TERMINAL_DIM)]
        var facts = "\(entry.name.inert): \(entry.state)"
        if !entry.extensionPoint.isEmpty { facts += ", for \(entry.extensionPoint.inert)" }
        lines.append(Line(text: cut(facts, width), style: PLUGIND_TERMINAL_PLAIN))
        let publisher =
            entry.publisher.isEmpty
            ? "publisher: none (not a plugin)" : "publisher: \(entry.publisher.inert)"
        lines.append(Line(text: cut(publisher, width), style: PLUGIND_TERMINAL_DIM))
        let reason = entry.reason.map { "why: " + $0.inert } ?? "ready for hosts to use"
        let rows = Self.wrap(reason, width: width)
        let style = entry.reason == nil ? PLUGIND_TERMINAL_DIM : Self.style(of: entry.state)
        lines += rows.prefix(2).enumerated().map { index, row in
            Line(text: index == 1 && rows.count > 2 ? String(row.prefix(width - 1)) + "…" : row, style: style)
        }
        // A fixed height, so that the list does not jump as the selection moves.
        while lines.count < 5 { lines.append(Line(text: "", style: PLUGIND_TERMINAL_PLAIN)) }
        return lines
    }

    /// Column widths for the list: the state word in full, then name, version, identifier and
    /// extension point, each as wide as its longest value where the screen allows.
    private struct Columns {
        var widths: [Int]

        init(_ entries: [BrowserEntry], width: Int) {
            func longest(_ values: [String], heading: String) -> Int { max(values.map(\.count).max() ?? 0, heading.count) }
            let state = BrowserModel.stateWidth
            let version = min(longest(entries.map(\.version), heading: "VERSION"), 10)
            let name = min(longest(entries.map(\.name), heading: "NAME"), max(12, (width - state - version) / 3))
            // The publisher has a column of its own where the screen is wide enough; else the
            // panel under the list shows it for the selected plugin.
            showsPublisher = width >= 120
            let publisher = showsPublisher ? BrowserModel.publisherWidth : 0
            let identifier = min(
                longest(entries.map(\.identifier), heading: "IDENTIFIER"), max(width - state - version - name - publisher - 4, 10))
            widths = [state, name, version] + (showsPublisher ? [publisher] : []) + [identifier]
            self.width = width
        }

        var width: Int
        let showsPublisher: Bool

        func row(_ state: String, _ name: String, _ version: String, publisher: String, _ identifier: String, _ point: String) -> String {
            let values = [state, name, version] + (showsPublisher ? [publisher] : []) + [identifier, point]
            var text = ""
            for (index, value) in values.enumerated() {
                guard index < widths.count else {
                    // The last column only where it fits whole enough to be read.
                    let room = width - text.count
                    if room >= 12 { text += value.count > room ? String(value.prefix(room - 1)) + "…" : value }
                    break
                }
                let shown = value.count > widths[index] ? String(value.prefix(widths[index] - 1)) + "…" : value
                text += shown.padding(toLength: widths[index], withPad: " ", startingAt: 0) + " "
            }
            while text.last == " " { text.removeLast() }
            return text
        }
    }

    /// From line `scroll` on, long lines wrapped rather than cut: a digest is shown whole.
    private func textLines(height: Int, width: Int) -> [Line] {
        let wrapped = text.dropFirst(scroll).lazy.flatMap { Self.wrap($0, width: width) }
        var lines = Array(wrapped.prefix(max(height, 0))).map { Line(text: $0, style: PLUGIND_TERMINAL_PLAIN) }
        let remaining = text.count - scroll - 1
        if lines.count == height, remaining > 0 {
            lines[height - 1] = Line(text: cut("… more below (↓, PgDn)", width), style: PLUGIND_TERMINAL_DIM)
        }
        return lines
    }

    /// `text` in rows of at most `width` characters, broken after a space where one is near the
    /// end of the row (a digest has none and is broken anywhere); continuation rows are indented.
    static func wrap(_ text: String, width: Int) -> [String] {
        let indent = "      "
        guard text.count > width, width > indent.count + 10 else { return [String(text.prefix(max(width, 1)))] }
        var rows: [String] = []
        var rest = Substring(text)
        var room = width
        while rest.count > room {
            var row = rest.prefix(room)
            // Break after a space, else after a slash in a path, unless that wastes most of the row.
            let usable = { (index: Substring.Index) in row.distance(from: row.startIndex, to: index) > room / 4 }
            if let space = row.lastIndex(of: " ").flatMap({ usable($0) ? $0 : nil })
                ?? row.lastIndex(of: "/").flatMap({ usable($0) ? $0 : nil })
            {
                row = rest[rest.startIndex...space]
            }
            rows.append((rows.isEmpty ? "" : indent) + row)
            rest = rest[row.endIndex...]
            room = width - indent.count
        }
        rows.append((rows.isEmpty ? "" : indent) + rest)
        return rows
    }

    static func style(of state: String) -> plugind_terminal_style {
        switch state {
        case "available": PLUGIND_TERMINAL_GOOD
        case "unapproved", "approval-outdated": PLUGIND_TERMINAL_WARNING
        case "quarantined", "rejected", "denied": PLUGIND_TERMINAL_BAD
        default: PLUGIND_TERMINAL_DIM
        }
    }

    /// At most `width` characters (one column each for the text plugind shows; inert text has no
    /// control characters left).
    private func cut(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(max(width - 1, 0))) + "…"
    }
}
