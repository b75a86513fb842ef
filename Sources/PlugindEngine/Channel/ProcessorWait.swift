import FoundationEssentials
import Glibc
import PlugindSystem

/// How long a worker's threads waited for a processor, and how busy the machine was, read when
/// one of the worker's timeouts fires, so that a timeout the machine's load explains says so
/// ("the machine was busy: the worker waited 21.4 s of the 30 s for a processor").
///
/// Read only then, never on a request's path: sampling every request's start would cost several
/// reads of `/proc` each. So the kernel's totals are since each thread started
/// (`/proc/<pid>/task/<tid>/schedstat`), and `waited(within:)` attributes them to the timeout's
/// window: exactly for a thread younger than the window (a launch's, or a young worker's), else
/// what must have fallen inside, or the rate the thread has waited since it started. The decision is a pure function of the numbers
/// (`busyMachineSentence(timeout:)`); `read(processIdentifier:)` is the only system access.
package struct ProcessorWait: Sendable, Equatable {
    /// One thread of the worker: the kernel's totals since it started.
    package struct Thread: Sendable, Equatable {
        /// Time it ran on a processor.
        package var ran: Duration
        /// Time it was runnable but waited on a run queue for a processor.
        package var waited: Duration
        /// How long ago it started.
        package var age: Duration

        package init(ran: Duration, waited: Duration, age: Duration) {
            self.ran = ran
            self.waited = waited
            self.age = age
        }
    }

    package var threads: [Thread]
    /// The share (percent) of the last 10 s in which some runnable task of the machine waited for
    /// a processor (`/proc/pressure/cpu`, "some avg10"); nil where the kernel keeps no pressure.
    package var cpuPressure: Double?
    /// The machine's load average over the last minute.
    package var loadAverage: Double?
    package var processors: Int

    package init(threads: [Thread], cpuPressure: Double?, loadAverage: Double?, processors: Int) {
        self.threads = threads
        self.cpuPressure = cpuPressure
        self.loadAverage = loadAverage
        self.processors = processors
    }

    /// The share of a timeout a thread must have waited for a processor for the machine's load to
    /// explain it: at half, the plugin had at most half the time it was given.
    package static let busyShare = 0.5

    /// How a thread's wait within a window is known.
    package enum Evidence: Sendable, Equatable {
        /// The thread is younger than the window: every wait of it fell inside.
        case measured
        /// At least this much fell inside: a thread waits at most as long as it exists, so of `w`
        /// waited over an age `a`, at least `w - (a - window)` (close for a thread started just
        /// before the window, as a first request's is, at its launch).
        case atLeast
        /// The thread's waits at the rate it has waited since it started, `w * window / a`: never
        /// below the least (it exceeds it by `(a - window) * (1 - w / a)`), but an estimate, which
        /// underrates a burst of load after a quiet life.
        case atItsRate
    }

    /// The wait for a processor, within the last `window`, of the thread that waited most in it:
    /// how much, how that is known, and the thread's age. Nil for an empty window or no threads.
    package func waited(within window: Duration) -> (waited: Duration, evidence: Evidence, age: Duration)? {
        guard window > .zero else { return nil }
        var most: (waited: Duration, evidence: Evidence, age: Duration)?
        for thread in threads {
            let waited = max(thread.waited, .zero)
            let inWindow: Duration
            let evidence: Evidence
            if thread.age <= window {
                (inWindow, evidence) = (waited, .measured)
            } else {
                let least = waited - (thread.age - window)
                // The sound bound when it alone shows the thread waited half the window.
                if least / window >= Self.busyShare {
                    (inWindow, evidence) = (least, .atLeast)
                } else {
                    (inWindow, evidence) = (waited * (window / thread.age), .atItsRate)
                }
            }
            let bounded = min(inWindow, window)
            if most.map({ bounded > $0.waited }) ?? true { most = (bounded, evidence, thread.age) }
        }
        return most
    }

    /// The sentence a timeout of `timeout` adds to its error's reason when the worker waited for
    /// a processor for at least `busyShare` of it; nil when its waits do not explain the timeout.
    package func busyMachineSentence(timeout: Duration) -> String? {
        guard let wait = waited(within: timeout), wait.waited > .zero, wait.waited / timeout >= Self.busyShare else { return nil }
        let waited = Self.text(wait.waited)
        let window = DurationText(timeout).description
        let how: String
        switch wait.evidence {
        case .measured: how = "the worker waited \(waited) of the \(window) for a processor"
        case .atLeast: how = "the worker waited at least \(waited) of the \(window) for a processor"
        case .atItsRate:
            how =
                "the worker waited about \(waited) of the \(window) for a processor, at the rate it has waited since it started \(Self.text(wait.age)) ago"
        }
        var machine: [String] = []
        if let cpuPressure, cpuPressure.isFinite, cpuPressure >= 0 { machine.append("CPU pressure \(Int(cpuPressure.rounded()))%") }
        if let loadAverage, loadAverage.isFinite, loadAverage >= 0 {
            let processors = processors == 1 ? "1 processor" : "\(max(processors, 0)) processors"
            machine.append("load average \(DecimalText.fixed(loadAverage, digits: 2)) on \(processors)")
        }
        let context = machine.isEmpty ? "" : " (\(machine.joined(separator: ", ")))"
        return "the machine was busy: \(how)\(context); a longer timeout may help"
    }

    /// "420 ms", "21.4 s", "5.2 min", "3.1 h": one decimal, in the largest unit that is at least one.
    static func text(_ duration: Duration) -> String {
        let seconds = max(duration / .seconds(1), 0)
        if seconds < 1 { return "\(Int((seconds * 1000).rounded())) ms" }
        if seconds < 120 { return DecimalText.fixed(seconds, digits: 1) + " s" }
        if seconds < 2 * 3600 { return DecimalText.fixed(seconds / 60, digits: 1) + " min" }
        return DecimalText.fixed(seconds / 3600, digits: 1) + " h"
    }
}

extension ProcessorWait {
    /// The worker's threads' totals and the machine's load now; nil when the worker's threads
    /// cannot be read (it ended, or `/proc` is not there). A thread that ends meanwhile is left out.
    package static func read(processIdentifier pid: Int32) -> ProcessorWait? {
        guard pid > 0, let uptime = contents("/proc/uptime").flatMap(firstNumber) else { return nil }
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticksPerSecond > 0, let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else {
            return nil
        }
        var threads: [Thread] = []
        for name in names where !name.isEmpty && name.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            let directory = "/proc/\(pid)/task/\(name)"
            guard let schedstat = contents(directory + "/schedstat"), let stat = contents(directory + "/stat"),
                let thread = thread(schedstat: schedstat, stat: stat, uptime: uptime, ticksPerSecond: ticksPerSecond)
            else { continue }
            threads.append(thread)
        }
        guard !threads.isEmpty else { return nil }
        return ProcessorWait(
            threads: threads, cpuPressure: contents("/proc/pressure/cpu").flatMap(someAverage10),
            loadAverage: contents("/proc/loadavg").flatMap(firstNumber), processors: ProcessInfo.processInfo.activeProcessorCount)
    }

    /// A thread from its `schedstat` ("<ran ns> <waited ns> <slices>") and `stat` (its start, in
    /// clock ticks since boot, is the 22nd field; the name before it may hold spaces and
    /// parentheses, so fields are counted after the last ")").
    static func thread(schedstat: String, stat: String, uptime: Double, ticksPerSecond: Double) -> Thread? {
        let times = schedstat.split(whereSeparator: \.isWhitespace)
        guard times.count >= 2, let ran = Int64(times[0]), let waited = Int64(times[1]), ran >= 0, waited >= 0,
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(whereSeparator: \.isWhitespace)
        guard fields.count > 19, let started = UInt64(fields[19]) else { return nil }
        let age = max(uptime - Double(started) / ticksPerSecond, 0)
        guard age.isFinite, age < 1e9 else { return nil }
        return Thread(ran: .nanoseconds(ran), waited: .nanoseconds(waited), age: .milliseconds(Int64(age * 1000)))
    }

    /// "some avg10=87.43 avg60=… total=…" on the first line of `/proc/pressure/cpu`.
    static func someAverage10(_ text: String) -> Double? {
        guard let some = text.split(separator: "\n").first(where: { $0.hasPrefix("some ") }) else { return nil }
        for field in some.split(separator: " ") where field.hasPrefix("avg10=") {
            return Double(field.dropFirst("avg10=".count)).flatMap { $0.isFinite ? $0 : nil }
        }
        return nil
    }

    private static func firstNumber(_ text: String) -> Double? {
        text.split(whereSeparator: \.isWhitespace).first.flatMap { Double($0) }.flatMap { $0.isFinite ? $0 : nil }
    }

    private static func contents(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }
}

extension AppExtensionError {
    /// This error with `sentence` added to its reason, everything else kept.
    func addingToReason(_ sentence: String) -> AppExtensionError {
        var error = AppExtensionError(
            code, plugin: pluginIdentifier, "\(reason); \(sentence)", termination: termination, exceededLimit: exceededLimit,
            pluginErrorCode: pluginErrorCode, standardErrorTail: standardErrorTail, underlying: underlying)
        error.backtrace = backtrace
        error.unsymbolizedStack = unsymbolizedStack
        return error
    }
}

extension WorkerChannel.StopCause {
    /// The time the worker was given, for a stop because it ran out: the window its waits for a
    /// processor are judged against.
    var timeoutWindow: Duration? {
        switch self {
        case .launchTimedOut(let timeout): timeout
        case .unresponsive(_, let grace), .unresponsiveConnection(_, let grace), .unreadFrames(_, let grace): grace
        case .missedBlockDeadline(let deadline): deadline
        case .protocolViolation, .closedChannel, .cancelledLaunch, .exceededLimit, .hostFailure, .disabledByOwner: nil
        }
    }
}

extension WorkerChannel {
    /// `error`, when it is a deadline of `window` that passed while the worker ran (`timedOut`,
    /// no termination), with the sentence saying the machine was busy if the worker's waits for
    /// a processor explain it. Runs only when a deadline passed, never on a request's path.
    func explainingTimeout(_ error: AppExtensionError, window: Duration?) -> AppExtensionError {
        // Once reaped, the pid may name another process: read only while the worker is ours.
        guard error.code == .timedOut, error.termination == nil, let window, !isTerminated,
            let wait = ProcessorWait.read(processIdentifier: processIdentifier), !isTerminated,
            let sentence = wait.busyMachineSentence(timeout: window)
        else { return error }
        return error.addingToReason(sentence)
    }
}
