import CTerminal
import ExtensionFoundation
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing

/// The browser's loop, on a thread of its own that alone touches the terminal: draw, wait for a
/// key or a message, apply it, again. Reading details and reviews (hashing, a confinement probe)
/// runs in tasks that post their result, so the screen never freezes on them.
final class BrowserSession {
    enum Ending: Sendable {
        case quit
        /// SIGINT, SIGTERM or SIGHUP; the terminal is already given back.
        case signal(Int32)
        /// There is a terminal but curses cannot use it (an unknown $TERM).
        case unusableTerminal
    }

    private let host: AppExtensionHost
    private let points: [String]
    private let mailbox: BrowserMailbox
    private var model: BrowserModel
    private var items: [String: Inventory.Item] = [:]
    private var problems: [String: AppExtensionDiagnostic] = [:]
    /// The review on screen, which `y` records exactly as shown.
    private var review: ApprovalReview?

    init(host: AppExtensionHost, points: [String], mailbox: BrowserMailbox) {
        self.host = host
        self.points = points
        self.mailbox = mailbox
        model = BrowserModel(title: points.isEmpty ? "plugind browse" : "plugind browse \(points.map(\.inert).joined(separator: ", "))")
    }

    func run(noColor: Bool) -> Ending {
        // Before curses starts, so that it leaves these signals to us.
        _ = plugind_terminal_watch_exit_signals(mailbox.wakeWriteEnd)
        guard plugind_terminal_begin(noColor ? 1 : 0) == 0 else { return .unusableTerminal }
        defer { plugind_terminal_end() }
        while true {
            receive(mailbox.take())
            let signal = plugind_terminal_exit_signal()
            if signal != 0 { return .signal(signal) }
            draw()
            let terminalOpen = waitForInput()
            var key = plugind_terminal_key()
            while key != PLUGIND_TERMINAL_KEY_NONE {
                if !carryOut(model.handle(key: key)) { return .quit }
                key = plugind_terminal_key()
            }
            guard terminalOpen else { return .quit }
        }
    }

    /// Waits for a key or a wake-up (a message, a signal, a resize). False once the terminal is
    /// gone (hung up), when no key will ever come.
    private func waitForInput() -> Bool {
        var descriptors = [
            pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
            pollfd(fd: mailbox.wakeReadEnd, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&descriptors, 2, -1) > 0 else { return true }
        return descriptors[0].revents & Int16(POLLHUP | POLLERR | POLLNVAL) == 0
    }

    private func draw() {
        var height: Int32 = 0
        var width: Int32 = 0
        plugind_terminal_size(&height, &width)
        plugind_terminal_clear()
        for (row, line) in model.render(height: Int(height), width: Int(width)).enumerated() {
            line.text.withCString { plugind_terminal_draw(Int32(row), 0, $0, line.style, line.fill ? 1 : 0) }
        }
        plugind_terminal_show()
    }

    // MARK: Messages

    private func receive(_ messages: [BrowserMailbox.Message]) {
        for message in messages {
            switch message {
            case .inventory(let inventory):
                apply(inventory)
            case .details(let identifier, let lines):
                if model.mode == .details(identifier) { model.show(text: lines) }
            case .review(let identifier, let review, let lines):
                guard model.mode == .review(identifier) else { continue }
                self.review = review
                model.show(text: lines, complete: review != nil)
            }
        }
    }

    private func apply(_ inventory: Inventory) {
        let items = inventory.items.filter { points.isEmpty || points.contains($0.entry.manifest.extensionPoint) }
        let problems = inventory.problems.filter { problem in
            points.isEmpty || problem.extensionPointIdentifier.map(points.contains) ?? true
        }
        self.items = Dictionary(items.map { ($0.entry.identifier, $0) }, uniquingKeysWith: { first, _ in first })
        self.problems = Dictionary(problems.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        model.update(items.map { BrowserEntry($0, publisher: Self.publisher(of: $0)) } + problems.map(BrowserEntry.init))
    }

    /// The publisher's key and whether its signature holds. Files are hashed once per identity
    /// (`ContentHashes`), so an update re-reads only what changed.
    private static func publisher(of item: Inventory.Item) -> String {
        ContentHashes.shared.signature(of: item.entry.bundle).description
    }

    // MARK: Commands

    /// Carries out what a key asked for; false to quit.
    private func carryOut(_ command: BrowserModel.Command) -> Bool {
        switch command {
        case .none: break
        case .quit: return false
        case .loadDetails(let identifier): loadDetails(identifier)
        case .loadReview(let identifier): loadReview(identifier)
        case .perform(let action, let identifier): model.status = perform(action, on: identifier)
        }
        return true
    }

    private func loadDetails(_ identifier: String) {
        if let problem = problems[identifier] {
            model.show(text: [
                "\(problem.bundleIdentifier?.inert ?? "(no readable identifier)") at \(problem.path.inert)",
                "  state:           \(BrowserEntry(problem).state) (\(problem.kind.code))",
                "  extension point: \(problem.extensionPointIdentifier?.inert ?? "unknown")",
                "  reason:          \(problem.message.inert)",
            ])
            return
        }
        guard let item = items[identifier] else {
            model.show(text: ["\(identifier.inert) is no longer installed."])
            return
        }
        let (host, mailbox) = (host, mailbox)
        Task.detached {
            let details = await PluginDetails.gather(item, host: host, probe: true)
            mailbox.post(.details(identifier: identifier, lines: details.lines(host: host)))
        }
    }

    private func loadReview(_ identifier: String) {
        review = nil
        guard let item = items[identifier] else {
            model.show(text: ["\(identifier.inert) is no longer installed."], complete: false)
            return
        }
        let (host, mailbox) = (host, mailbox)
        Task.detached {
            do {
                let review = try ApprovalReview(entry: item.entry, previous: ApprovalReview.previousApproval(of: identifier, host: host))
                let lines =
                    PluginDescription.reviewLines(review, host: host) + [
                        "", "y approves exactly this: these files with these digests, these permissions. Any other key cancels.",
                    ]
                mailbox.post(.review(identifier: identifier, review, lines: lines))
            } catch {
                mailbox.post(.review(identifier: identifier, nil, lines: ["Cannot review \(identifier.inert): \("\(error)".inert)"]))
            }
        }
    }

    /// Changes the owner's policy (or the crash log); returns the status line that says so.
    private func perform(_ action: BrowserModel.Action, on identifier: String) -> String {
        let name = identifier.inert
        let editor = PolicyEditor(for: host, administrator: false)
        do {
            switch action {
            case .approve:
                guard let review, review.entry.identifier == identifier else {
                    return "Not approved: the review of \(name) was not complete yet."
                }
                self.review = nil
                try editor.record(review.approval, for: identifier)
                return "Approved \(name)."
            case .disable:
                try editor.disable(identifier)
                return "Disabled \(name); 'e' enables it again."
            case .enable:
                try editor.enable(identifier)
                return "Enabled \(name)."
            case .revoke:
                try editor.revoke(identifier)
                return "Revoked the approval of \(name)."
            case .clearQuarantine:
                return try CrashLog(host: host).clear(identifier)
                    ? "Cleared the crashes and quarantine of \(name)." : "\(name) has no crash record."
            }
        } catch {
            return "Could not \(BrowserModel.verb(action).lowercased()) \(name): \("\(error)".inert)"
        }
    }
}
