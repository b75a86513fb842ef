import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindTypes

/// What one worker's host records for the owner: its log lines and events in the plugin log
/// (rate-limited), and its statistics page for `plugind top`. Every method is cheap and makes no
/// blocking call: entries are queued for the log's own thread, counters are atomic adds.
final class WorkerActivity: Sendable {
    /// Who the entries name and where they go; the same for every worker of a launch plan.
    struct Subject: Sendable {
        var plugin: String
        var pluginVersion: String
        var bundleDigest: String?
        var hostIdentifier: String
        var memoryLimit: UInt64
        var log: PluginLogWriter?
        var statisticsDirectory: String
        var activity: PluginActivityStore
    }

    let subject: Subject
    let workerPID: Int32
    private let page: WorkerStatisticsPage
    private let limiter = Locked(PluginLogBudget.linesPerWorker())

    static let hostPID = getpid()
    static let hostExecutable =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? ""

    /// Whether the worker counts as a launch of the plugin (not a probe).
    private let servesRequests: Bool

    init(_ subject: Subject, workerPID: Int32, servesRequests: Bool = true) {
        self.servesRequests = servesRequests
        self.subject = subject
        self.workerPID = workerPID
        let statistics = WorkerStatistics(
            state: .starting, hostPID: Self.hostPID, workerPID: workerPID,
            startedNanoseconds: PluginLogEntry.now() * 1000, memoryLimit: subject.memoryLimit, plugin: subject.plugin,
            pluginVersion: subject.pluginVersion, hostIdentifier: subject.hostIdentifier, hostExecutable: Self.hostExecutable)
        self.page = WorkerStatisticsPage(statistics, directory: servesRequests ? subject.statisticsDirectory : nil)
        if servesRequests { subject.activity.noteLaunch(of: subject.plugin) }
    }

    // MARK: Statistics

    func ready() { page.setState(.running) }
    func requestStarted() { page.requestStarted() }
    func requestEnded(succeeded: Bool) {
        if succeeded { page.requestAnswered() } else { page.requestFailed() }
    }

    // MARK: The log

    /// A line the plugin logged, unless the worker is over its rate.
    func logged(_ level: PluginLogLevel, _ message: String) {
        guard let log = subject.log else { return }
        let decision = limiter.withLock { $0.consider(at: .now) }
        guard case .admit(let dropped) = decision else { return }
        if dropped > 0 { log.submit(droppedEntry(dropped)) }
        let priority =
            switch level {
            case .debug: 7
            case .info: 6
            case .warning: 4
            case .error: 3
            }
        log.submitPluginLine(entry(.log, priority: priority, PluginLogEntry.bounded(message), level: level.description))
    }

    /// An event of plugind's about this worker (a crash, a limit); a refusal of the sandbox, which
    /// the plugin can provoke at will, within its plugin's budget of them.
    func record(_ event: PluginLogEntry.Event, priority: Int, _ message: String) {
        let entry = entry(event, priority: priority, PluginLogEntry.bounded(message))
        if event == .refusal { subject.log?.submitRefusal(entry) } else { subject.log?.submit(entry) }
    }

    /// The worker ended: what the limiter refused last is said, the page goes, and the plugin's
    /// activity record gains its requests.
    func ended() {
        page.setState(.ending)
        page.remove()
        let counts = page.counts
        if servesRequests { subject.activity.noteEnd(of: subject.plugin, answered: counts.answered, failed: counts.failed) }
        let dropped = limiter.withLock { $0.takeDropped() }
        if dropped > 0 { subject.log?.submit(droppedEntry(dropped)) }
        subject.log?.flushDropped(plugin: subject.plugin, like: entry(.dropped, priority: 4, ""))
    }

    private func droppedEntry(_ count: Int) -> PluginLogEntry {
        entry(
            .dropped, priority: 4,
            "\(count) log line(s) of \(subject.plugin) were dropped: more than \(Int(PluginLogBudget.linesPerWorker().rate)) per second")
    }

    private func entry(_ event: PluginLogEntry.Event, priority: Int, _ message: String, level: String? = nil) -> PluginLogEntry {
        PluginLogEntry(
            priority: priority, event: event, message: message, plugin: subject.plugin, pluginVersion: subject.pluginVersion,
            bundleDigest: subject.bundleDigest, hostIdentifier: subject.hostIdentifier, hostExecutable: Self.hostExecutable,
            hostPID: Self.hostPID, workerPID: workerPID, level: level)
    }
}
