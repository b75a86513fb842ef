import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem

/// The running workers `plugind top` shows: the pages their hosts publish (who, and how many
/// requests), with what the kernel says of each worker process (CPU time, resident memory).
struct WorkerTable {
    /// One worker at one moment.
    struct Row: Encodable, Equatable {
        var plugin: String
        var pluginVersion: String
        var hostIdentifier: String
        var hostExecutable: String
        var hostPID: Int32
        var workerPID: Int32
        var user: String
        var state: String
        /// Over the last interval (or the snapshot's sample).
        var cpuPercent: Double
        var cpuSeconds: Double
        var memoryBytes: UInt64
        var memoryLimitBytes: UInt64
        var requestsAnswered: UInt64
        var requestsFailed: UInt64
        var requestsInFlight: UInt64
        var uptimeSeconds: Double

        /// Answered and failed together (a page's counters can be anything: at most the largest).
        var requestsEnded: UInt64 { requestsAnswered.addingSaturating(requestsFailed) }
    }

    /// A directory with pages, and who alone may write it: every component from `base` down is
    /// opened without following a link and must belong to `owner` (or root) and be writable by
    /// nobody else, so that a user cannot point root's `top` at files that are not theirs.
    struct PageDirectory: Equatable {
        var base: String
        var components: [String]
        var owner: uid_t

        var path: String { ([base] + components).joined(separator: "/") }
    }

    /// The directories with pages: this host's, and for root every user's (`/run/user/*`) and the
    /// system's.
    static func directories(host: AppExtensionHost) -> [PageDirectory] {
        var directories = [PageDirectory(base: host.runtimeDirectory.path, components: ["workers"], owner: geteuid())]
        if geteuid() == 0 {
            directories.append(PageDirectory(base: "/run/plugind", components: ["workers"], owner: 0))
            let users = (try? FileManager.default.contentsOfDirectory(atPath: "/run/user")) ?? []
            for user in users.sorted() {
                guard let uid = UInt32(user) else { continue }
                directories.append(PageDirectory(base: "/run/user/\(user)", components: ["plugind", "workers"], owner: uid))
            }
        }
        var seen = Set<String>()
        return directories.filter { seen.insert($0.path).inserted }
    }

    /// The most pages one sample reads, over every directory: a user cannot make root's `top`
    /// read without end.
    static let maximumPages = 4096

    /// A worker's page and CPU time at one moment.
    struct Sample {
        var statistics: WorkerStatistics
        var owner: uid_t
        var cpuTicks: UInt64
        var residentBytes: UInt64
        var taken: ContinuousClock.Instant
    }

    /// Reads every page in `directories`; a page whose host is gone is removed (when this user
    /// wrote it, in a directory of this user's), one whose worker is gone is skipped.
    static func sample(_ directories: [PageDirectory]) -> [Sample] {
        var samples: [Sample] = []
        var read = 0
        for directory in directories {
            guard let descriptor = open(directory) else { continue }
            defer { close(descriptor) }
            for name in DirectoryNames.list(descriptor, limit: maximumPages + 1).names.sorted()
            where name.hasSuffix(WorkerStatisticsLayout.fileSuffix) {
                guard read < maximumPages else { return samples }
                read += 1
                guard let (statistics, owner) = WorkerStatistics.read(name: name, in: descriptor) else { continue }
                guard isAlive(statistics.hostPID) else {
                    if owner == geteuid(), directory.owner == geteuid() { unlinkat(descriptor, name, 0) }
                    continue
                }
                guard let cpu = cpuTicks(of: statistics.workerPID) else { continue }
                samples.append(
                    Sample(
                        statistics: statistics, owner: owner, cpuTicks: cpu, residentBytes: residentBytes(of: statistics.workerPID),
                        taken: .now))
            }
        }
        return samples
    }

    /// `directory` opened component by component, never through a link, each component its
    /// owner's or root's and writable by nobody else; nil otherwise.
    private static func open(_ directory: PageDirectory) -> Int32? {
        var current = Glibc.open(directory.base, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard current >= 0 else { return nil }
        // The base itself first, then each component below it.
        for component in [nil] + directory.components.map(Optional.some) {
            if let component {
                let next = openat(current, component, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                close(current)
                guard next >= 0 else { return nil }
                current = next
            }
            var status = stat()
            guard fstat(current, &status) == 0, status.st_uid == directory.owner || status.st_uid == 0, status.st_mode & 0o022 == 0
            else {
                close(current)
                return nil
            }
        }
        return current
    }

    /// The rows for `now`, with CPU use since `before` (matched by host and worker pid).
    static func rows(_ now: [Sample], since before: [Sample]) -> [Row] {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        let earlier = Dictionary(before.map { (key($0), $0) }, uniquingKeysWith: { first, _ in first })
        let wallNow = Double(PluginLogEntry.now()) / 1e6
        return now.map { sample in
            var percent = 0.0
            if let previous = earlier[key(sample)] {
                let elapsed = sample.taken - previous.taken
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                if seconds > 0, sample.cpuTicks >= previous.cpuTicks {
                    percent = Double(sample.cpuTicks - previous.cpuTicks) / ticksPerSecond / seconds * 100
                }
            }
            let statistics = sample.statistics
            return Row(
                plugin: statistics.plugin, pluginVersion: statistics.pluginVersion, hostIdentifier: statistics.hostIdentifier,
                hostExecutable: statistics.hostExecutable, hostPID: statistics.hostPID, workerPID: statistics.workerPID,
                user: userName(sample.owner), state: statistics.state.name, cpuPercent: (percent * 10).rounded() / 10,
                cpuSeconds: Double(sample.cpuTicks) / ticksPerSecond, memoryBytes: sample.residentBytes,
                memoryLimitBytes: statistics.memoryLimit, requestsAnswered: statistics.requestsAnswered,
                requestsFailed: statistics.requestsFailed, requestsInFlight: statistics.requestsInFlight,
                uptimeSeconds: max(0, wallNow - Double(statistics.startedNanoseconds) / 1e9))
        }
    }

    private static func key(_ sample: Sample) -> String {
        "\(sample.statistics.hostPID)-\(sample.statistics.workerPID)"
    }

    private static func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    /// utime + stime of `pid`, from /proc/PID/stat (after the command's closing parenthesis, which
    /// the command itself may contain).
    private static func cpuTicks(of pid: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // Fields 3… of stat(5) start here; utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user.addingSaturating(system)
    }

    private static func residentBytes(of pid: Int32) -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { UInt64($0) } ?? 0
        return kilobytes.multipliedSaturating(by: 1024)
    }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return String(uid) }
        return String(cString: name)
    }
}
