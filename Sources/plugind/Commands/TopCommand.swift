import CTerminal
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine

/// `plugind top`: the running workers, with what each costs and serves, updated every second.
struct TopCommand: PlugindCommand {
    private enum Options {
        static let json = CommandOption.flag("json", "Print one snapshot as JSON (its rows under \"workers\") and exit.")
        static let sort = CommandOption.value(
            "sort", "KEY", "Order by cpu (the default), memory, requests, plugin or uptime.",
            choices: TopModel.SortKey.allCases.map(\.rawValue))
        static let plugin = CommandOption.value("plugin", "<id>", "Only workers of this plugin.")
    }

    static let description = CommandDescription(
        name: "top",
        abstract: "Show the running plugin workers: CPU, memory, requests, host; live in a terminal.",
        usage: "[--sort KEY] [--plugin <id>] [--json]",
        discussion: """
            Each worker of this user's hosts (every user's, for root): its plugin, the host that
            launched it and the host's pid, the worker's pid and state, CPU use over the last
            second, resident memory against the plugin's memory limit, requests answered, failed
            and in flight, and uptime. Hosts publish a small page per worker in their runtime
            directory ($XDG_RUNTIME_DIR/plugind/workers, PLUGIND_RUNTIME_DIR); CPU and memory come
            from /proc. In a terminal the table updates every second: c, m, r, p, u sort by CPU,
            memory, requests, plugin, uptime; q or Ctrl-C quits. Without a terminal it prints one
            snapshot (CPU over a quarter of a second); --json prints it for scripts.
            """,
        options: [Options.sort, Options.plugin, Options.json]
    )

    let json: Bool
    let sort: TopModel.SortKey
    let plugin: String?

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        json = arguments.flag(Options.json)
        plugin = arguments.value(Options.plugin)
        if let text = arguments.value(Options.sort) {
            guard let key = TopModel.SortKey(rawValue: text) else {
                throw UsageError(
                    message: "--sort: '\(text.inert)' is not one of \(TopModel.SortKey.allCases.map(\.rawValue).joined(separator: ", "))",
                    command: "top")
            }
            sort = key
        } else {
            sort = .cpu
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let directories = WorkerTable.directories(host: context.host)
        if json || isatty(STDIN_FILENO) != 1 || isatty(STDOUT_FILENO) != 1 {
            let first = WorkerTable.sample(directories)
            try await Task.sleep(for: .milliseconds(250))
            var model = TopModel(sort: sort)
            model.rows = filtered(WorkerTable.rows(WorkerTable.sample(directories), since: first))
            if json {
                try context.console.json(Snapshot(workers: model.sortedRows))
            } else {
                for line in model.tableLines(showUser: geteuid() == 0) { context.console.out(line + "\n") }
                if model.rows.isEmpty { context.console.out("No plugin workers are running.\n") }
            }
            return .success
        }
        let mailbox = try BrowserMailbox()
        let (sort, plugin) = (sort, plugin)
        let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
        let ending = await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(
                    returning: TopSession(directories: directories, sort: sort, plugin: plugin, wake: mailbox).run(noColor: noColor))
            }.start()
        }
        switch ending {
        case .quit: return .success
        case .unusableTerminal:
            throw CommandFailure(message: "this terminal cannot show the live table; try 'plugind top --json'", status: .failure)
        case .signal(let signal):
            plugind_terminal_exit_by_signal(signal)
            return .failure
        }
    }

    private func filtered(_ rows: [WorkerTable.Row]) -> [WorkerTable.Row] {
        rows.filter { plugin == nil || $0.plugin == plugin }
    }

    /// `plugind top --json`: one snapshot, a row per worker.
    struct Snapshot: JSONDocument {
        static let formatVersion = 1
        var workers: [WorkerTable.Row]
    }
}

/// The live table's loop, on a thread of its own that alone touches the terminal: sample, draw,
/// wait a second or for a key, again.
final class TopSession {
    private let directories: [WorkerTable.PageDirectory]
    private let plugin: String?
    private let wake: BrowserMailbox
    private var model: TopModel
    private var previous: [WorkerTable.Sample] = []

    init(directories: [WorkerTable.PageDirectory], sort: TopModel.SortKey, plugin: String?, wake: BrowserMailbox) {
        self.directories = directories
        self.plugin = plugin
        self.wake = wake
        self.model = TopModel(sort: sort)
    }

    func run(noColor: Bool) -> BrowserSession.Ending {
        _ = plugind_terminal_watch_exit_signals(wake.wakeWriteEnd)
        guard plugind_terminal_begin(noColor ? 1 : 0) == 0 else { return .unusableTerminal }
        defer { plugind_terminal_end() }
        var nextSample = ContinuousClock.now
        while true {
            if ContinuousClock.now >= nextSample {
                let samples = WorkerTable.sample(directories)
                model.rows = WorkerTable.rows(samples, since: previous).filter { plugin == nil || $0.plugin == plugin }
                previous = samples
                nextSample = ContinuousClock.now + .seconds(1)
            }
            _ = wake.take()
            let signal = plugind_terminal_exit_signal()
            if signal != 0 { return .signal(signal) }
            draw()
            let left = nextSample - ContinuousClock.now
            let milliseconds = max(0, Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            var descriptors = [
                pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.wakeReadEnd, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&descriptors, 2, milliseconds)
            if descriptors[0].revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return .quit }
            var key = plugind_terminal_key()
            while key != PLUGIND_TERMINAL_KEY_NONE {
                if key == Int32(UInt8(ascii: "q")) || key == PLUGIND_TERMINAL_KEY_INTERRUPT { return .quit }
                if let sort = TopModel.SortKey.allCases.first(where: { Int32($0.key.asciiValue ?? 0) == key }) { model.sort = sort }
                key = plugind_terminal_key()
            }
        }
    }

    private func draw() {
        var height: Int32 = 0
        var width: Int32 = 0
        plugind_terminal_size(&height, &width)
        plugind_terminal_clear()
        let title = "plugind top · \(model.rows.count) worker(s) · \(Date().formatted(date: .omitted, time: .standard))"
        title.withCString { plugind_terminal_draw(0, 0, $0, PLUGIND_TERMINAL_HEADING, 1) }
        let lines = model.tableLines(showUser: geteuid() == 0)
        for (index, line) in lines.prefix(Int(max(0, height - 3))).enumerated() {
            line.withCString {
                plugind_terminal_draw(Int32(index + 1), 0, $0, index == 0 ? PLUGIND_TERMINAL_HEADING : PLUGIND_TERMINAL_PLAIN, 0)
            }
        }
        if model.rows.isEmpty {
            "No plugin workers are running.".withCString { plugind_terminal_draw(2, 0, $0, PLUGIND_TERMINAL_DIM, 0) }
        }
        model.footer.withCString { plugind_terminal_draw(height - 1, 0, $0, PLUGIND_TERMINAL_DIM, 1) }
        plugind_terminal_show()
    }
}
