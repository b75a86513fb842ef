import CPlugindShims
package import Dispatch
import FoundationEssentials
import Glibc
import PlugindSystem

/// Where a host's plugin entries go, and the one writer per destination in this process. Callers
/// only queue (no system call, a bounded queue: past it entries are counted as lost), so the
/// event loop and the worker never wait for the journal or the disk; a queue of its own writes.
package final class PluginLogWriter: Sendable {
    package enum Sink: Sendable, Hashable, CustomStringConvertible {
        /// The system journal, through its native socket (`/run/systemd/journal/socket`, or a
        /// namespace's): non-blocking datagrams, so a journal that does not keep up costs lost
        /// entries, counted, never a blocked thread — libsystemd's `sd_journal_send` blocks then.
        case journal(socket: String, namespace: String?)
        /// The per-user log files where no journal runs: `plugins.log` and `events.log` in
        /// `directory`, each rotated to `.1` past `PluginLogFile.rotationBytes`.
        case file(directory: String)

        package var description: String {
            switch self {
            case .journal(_, let namespace?): "the system journal (namespace \(namespace))"
            case .journal: "the system journal"
            case .file(let directory): "the log files in \(directory)"
            }
        }
    }

    package let sink: Sink
    private let queue: DispatchQueue
    private struct Pending {
        var queued = 0
        /// Entries lost since the last one written: the queue was full or the journal refused.
        var lost = 0
        /// Each plugin's budgets in this destination, across its workers in this process.
        var budgets: [String: PluginBudgets] = [:]
    }
    private struct PluginBudgets {
        var bytes = PluginLogBudget.bytesPerPlugin()
        var refusals = PluginLogBudget.refusalsPerPlugin()
    }
    /// The most plugins whose budgets are kept; past it, those with nothing to say are forgotten.
    static let budgetCapacity = 1024
    private let pending = Locked(Pending())
    private let socket: Int32

    /// The most entries waiting to be written; more are lost (and counted).
    static let queueCapacity = 4096

    /// Hosts share one writer per destination (`forHost`); a private one is for tests.
    init(sink: Sink) {
        self.sink = sink
        self.queue = DispatchQueue(label: "plugind.plugin-log", qos: .utility)
        if case .journal = sink {
            // Minus an errno when no socket can be made: every entry is then counted as lost.
            self.socket = plugind_shim_journal_socket()
        } else {
            self.socket = -1
        }
    }

    private static let writers = Locked<[Sink: PluginLogWriter]>([:])

    /// The writer for `host`'s destination; nil when the host turned logging off.
    package static func forHost(_ host: AppExtensionHost) -> PluginLogWriter? {
        guard let sink = sink(for: host) else { return nil }
        return writers.withLock { writers in
            if let known = writers[sink] { return known }
            let writer = PluginLogWriter(sink: sink)
            writers[sink] = writer
            return writer
        }
    }

    /// Where `host`'s entries go: the journal when its socket is there (for `.automatic`), else
    /// the file under the state directory.
    package static func sink(for host: AppExtensionHost) -> Sink? {
        let file = Sink.file(directory: host.stateDirectory.appendingPathComponent("logs").path)
        let socket = journalSocketPath(namespace: host.journalNamespace)
        let journal = Sink.journal(socket: socket, namespace: host.journalNamespace)
        switch host.pluginLog {
        case .off: return nil
        case .file: return file
        case .journal: return journal
        case .automatic:
            var status = stat()
            return lstat(socket, &status) == 0 && (status.st_mode & S_IFMT) == S_IFSOCK ? journal : file
        }
    }

    package static func journalSocketPath(namespace: String?) -> String {
        namespace.map { "/run/systemd/journal.\($0)/socket" } ?? "/run/systemd/journal/socket"
    }

    /// Queues `entry`, one of plugind's own or the owner's; never blocks, and makes no system call.
    package func submit(_ entry: PluginLogEntry) {
        let admitted = pending.withLock { Self.enqueue(&$0) }
        guard admitted else { return }
        queue.async { self.write(entry) }
    }

    /// Queues a line the plugin logged, within its plugin's budget of bytes; what is over it is
    /// counted and said with the next line admitted (or by `flushDropped`).
    func submitPluginLine(_ entry: PluginLogEntry, at now: ContinuousClock.Instant = .now) {
        submit(entry, cost: Double(entry.message.utf8.count + 256), budget: \.bytes, noting: .dropped, at: now) { count in
            "\(count) log line(s) of \(entry.plugin) were dropped: more than \(ByteCount(Int(PluginLogBudget.bytesPerPlugin().rate))) a second"
        }
    }

    /// Queues a report of the sandbox's refusal, within its plugin's budget of refusals.
    func submitRefusal(_ entry: PluginLogEntry, at now: ContinuousClock.Instant = .now) {
        submit(entry, cost: 1, budget: \.refusals, noting: .refusal, at: now) { count in
            "\(count) more refusal(s) of the sandbox for \(entry.plugin) were not logged: more than \(Int(PluginLogBudget.refusalsPerPlugin().rate)) a second"
        }
    }

    /// Says what `plugin`'s budgets refused and has not said yet (its worker ended).
    func flushDropped(plugin: String, like entry: PluginLogEntry) {
        let dropped = pending.withLock { pending -> (lines: Int, refusals: Int) in
            guard var budgets = pending.budgets[plugin] else { return (0, 0) }
            defer { pending.budgets[plugin] = budgets }
            return (budgets.bytes.takeDropped(), budgets.refusals.takeDropped())
        }
        if dropped.lines > 0 {
            submit(note(like: entry, .dropped, "\(dropped.lines) log line(s) of \(plugin) were dropped: over its budget"))
        }
        if dropped.refusals > 0 {
            submit(
                note(
                    like: entry, .refusal,
                    "\(dropped.refusals) more refusal(s) of the sandbox for \(plugin) were not logged: over its budget"))
        }
    }

    private func submit(
        _ entry: PluginLogEntry, cost: Double, budget: WritableKeyPath<PluginBudgets, TokenBucket>, noting event: PluginLogEntry.Event,
        at now: ContinuousClock.Instant, saying: (Int) -> String
    ) {
        let decision = pending.withLock { pending -> (admitted: Bool, droppedBefore: Int) in
            if pending.budgets[entry.plugin] == nil, pending.budgets.count >= Self.budgetCapacity {
                pending.budgets = pending.budgets.filter { $0.value.bytes.dropped > 0 || $0.value.refusals.dropped > 0 }
            }
            var budgets = pending.budgets[entry.plugin] ?? PluginBudgets()
            defer { pending.budgets[entry.plugin] = budgets }
            guard case .admit(let droppedBefore) = budgets[keyPath: budget].consider(cost: cost, at: now) else { return (false, 0) }
            return (true, droppedBefore)
        }
        guard decision.admitted else { return }
        if decision.droppedBefore > 0 { submit(note(like: entry, event, saying(decision.droppedBefore))) }
        submit(entry)
    }

    /// An entry of plugind's saying what a budget refused, naming what `entry` names.
    private func note(like entry: PluginLogEntry, _ event: PluginLogEntry.Event, _ message: String) -> PluginLogEntry {
        var note = entry
        (note.priority, note.event, note.message, note.level) = (4, event, message, nil)
        return note
    }

    private static func enqueue(_ pending: inout Pending) -> Bool {
        guard pending.queued < queueCapacity else {
            pending.lost += 1
            return false
        }
        pending.queued += 1
        return true
    }

    /// Returns once everything queued so far is written (the command line calls it before it
    /// exits, tests before they read).
    package func waitForPendingEntries() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    /// The same, blocking, for at most `timeout`: for a process about to exit.
    package func waitForPendingEntries(timeout: DispatchTimeInterval) {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        _ = done.wait(timeout: .now() + timeout)
    }

    /// Every writer of this process, waited for (see `waitForPendingEntries(timeout:)`).
    package static func waitForAllPendingEntries(timeout: DispatchTimeInterval = .seconds(1)) {
        for writer in writers.withLock({ Array($0.values) }) { writer.waitForPendingEntries(timeout: timeout) }
    }

    private func write(_ entry: PluginLogEntry) {
        let lost = pending.withLock { pending -> Int in
            pending.queued -= 1
            defer { pending.lost = 0 }
            return pending.lost
        }
        if lost > 0 {
            let note = PluginLogEntry(
                priority: 4, event: .dropped, message: "\(lost) plugind log entries were lost: they came faster than \(sink) took them",
                plugin: entry.plugin, hostPID: entry.hostPID)
            if !send(note) { pending.withLock { $0.lost += lost } }
        }
        if !send(entry) { pending.withLock { $0.lost += 1 } }
    }

    /// Writes one entry; false when it was lost.
    private func send(_ entry: PluginLogEntry) -> Bool {
        switch sink {
        case .journal(let path, _):
            guard socket >= 0 else { return false }
            let datagram = entry.journalDatagram
            let result = datagram.withUnsafeBytes { bytes -> Int32 in
                guard let base = bytes.baseAddress else { return EINVAL }
                return plugind_shim_journal_send(socket, path, base, bytes.count)
            }
            return result == 0
        case .file(let directory):
            return PluginLogFile(directory: directory).append(entry)
        }
    }
}
