import FoundationEssentials
// mkdir, rmdir and access on the control-group file system, and kill(pid, 0) for a stale group's
// owner: a control group is a directory, and this file is the one place that speaks that interface.
import Glibc
package import PlugindSystem
package import PlugindWire

/// Control groups for workers of plugins the owner approved to start processes: without one, a
/// child would get fresh per-process limits. Each such worker gets a group of its own whose
/// memory limit covers its children, memfds and shared memory, whose pids limit covers every
/// thread and process, and whose CPU time the host sums up and stops at the limit.
///
/// Used where the host may create groups: the cgroup v1 memory, pids and cpuacct hierarchies
/// (writable by root), or a cgroup v2 directory delegated to the host
/// (`AppExtensionHost.workerCgroupDirectory`, e.g. a systemd unit with `Delegate=yes`). Without
/// either, plugins with the `processes` permission run with per-process limits only, and
/// `plugind info` and the approval say so.
package struct WorkerCgroups: Sendable {
    package enum Hierarchy: Sendable, Equatable {
        /// cgroup v1: the host's own group in the memory, pids and cpuacct hierarchies.
        case version1(memory: String, pids: String, cpuAccounting: String)
        /// cgroup v2: a directory whose subtree the host may manage, with the memory and pids
        /// controllers enabled for its children.
        case version2(String)
    }

    package let hierarchy: Hierarchy

    /// The hierarchy usable on this machine, found once per process. `delegated` is the host's
    /// cgroup v2 directory, if it has one.
    package static func available(delegated: String?) -> WorkerCgroups? {
        if let delegated { return version2(delegated) }
        return detected.withLock { detected in
            if let found = detected { return found }
            let found = version1()
            found?.removeAbandonedGroups()
            detected = .some(found)
            return found
        }
    }

    /// Groups named after host processes that no longer exist: left behind by a host that was
    /// killed. Only empty groups can be removed, so a group still in use is never touched.
    private func removeAbandonedGroups() {
        let parents: [String] =
            switch hierarchy {
            case .version1(let memory, let pids, let cpu): [memory, pids, cpu]
            case .version2(let directory): [directory]
            }
        for parent in parents {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(Self.namePrefix) {
                let owner = name.dropFirst(Self.namePrefix.count).prefix { $0 != "." }
                if let pid = Int32(owner), kill(pid, 0) != 0, errno == ESRCH { rmdir(parent + "/" + name) }
            }
        }
    }

    /// "plugind.<host pid>.<plugin>.<random>": the host's pid tells which groups are abandoned.
    private static let namePrefix = "plugind."

    private static let detected = Locked<WorkerCgroups??>(nil)

    /// The host's own groups in the v1 hierarchies, when it may create groups beneath them.
    private static func version1() -> WorkerCgroups? {
        guard let groups = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
            let mounts = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        else { return nil }
        // "4:memory:/a/b" → memory → /a/b
        var paths: [String: String] = [:]
        for line in groups.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            for controller in fields[1].split(separator: ",") { paths[String(controller)] = String(fields[2]) }
        }
        // "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory"
        var mountPoints: [String: String] = [:]
        for line in mounts.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let before = halves[0].split(separator: " ")
            let after = halves[1].split(separator: " ")
            guard before.count >= 5, after.count >= 3, after[0] == "cgroup", before[3] == "/" else { continue }
            for option in after[2].split(separator: ",") { mountPoints[String(option)] = String(before[4]) }
        }
        func directory(_ controller: String) -> String? {
            guard let mount = mountPoints[controller], let path = paths[controller] else { return nil }
            let directory = path == "/" ? mount : mount + path
            return access(directory, W_OK) == 0 ? directory : nil
        }
        guard let memory = directory("memory"), let pids = directory("pids"), let cpu = directory("cpuacct") else { return nil }
        return WorkerCgroups(hierarchy: .version1(memory: memory, pids: pids, cpuAccounting: cpu))
    }

    private static func version2(_ directory: String) -> WorkerCgroups? {
        guard let controllers = try? String(contentsOfFile: directory + "/cgroup.subtree_control", encoding: .utf8) else {
            return nil
        }
        let enabled = Set(controllers.split(whereSeparator: \.isWhitespace).map(String.init))
        guard enabled.isSuperset(of: ["memory", "pids"]), access(directory, W_OK) == 0 else { return nil }
        return WorkerCgroups(hierarchy: .version2(directory))
    }

    /// Where each limit of a plugin with the `processes` permission is enforced, in words.
    package var description: String {
        switch hierarchy {
        case .version1: "cgroup v1 (memory, pids, cpuacct)"
        case .version2(let directory): "cgroup v2 at \(directory)"
        }
    }

    /// A new group for one worker, with `limits` written. Nothing is in it yet.
    package func makeGroup(for plugin: String, limits: ResourceLimits) throws(SystemError) -> WorkerCgroup {
        let safe = plugin.unicodeScalars.map { $0.properties.isAlphabetic || ("0"..."9").contains($0) ? Character($0) : "_" }
        let name = Self.namePrefix + "\(getpid())." + String(safe.prefix(64)) + "." + String(UInt64.random(in: 0..<UInt64.max), radix: 36)
        let group: WorkerCgroup
        switch hierarchy {
        case .version1(let memory, let pids, let cpu):
            group = WorkerCgroup(
                directories: [memory, pids, cpu].map { $0 + "/" + name }, version: 1, memory: memory + "/" + name, pids: pids + "/" + name,
                cpuAccounting: cpu + "/" + name)
        case .version2(let directory):
            let path = directory + "/" + name
            group = WorkerCgroup(directories: [path], version: 2, memory: path, pids: path, cpuAccounting: path)
        }
        do throws(SystemError) {
            for directory in group.directories {
                guard mkdir(directory, 0o755) == 0 else { throw SystemError("mkdir \(directory)", Errno(rawValue: errno)) }
            }
            try group.writeLimits(limits)
        } catch {
            group.remove()
            throw error
        }
        return group
    }
}

/// One worker's control group (one directory per v1 hierarchy, or one v2 directory).
package struct WorkerCgroup: Sendable {
    package let directories: [String]
    let version: Int
    let memory: String
    let pids: String
    let cpuAccounting: String

    /// The files a process id is written to, to move that process into the group.
    package var processFiles: [String] { directories.map { $0 + "/cgroup.procs" } }

    fileprivate func writeLimits(_ limits: ResourceLimits) throws(SystemError) {
        if limits.addressSpaceBytes > 0 {
            try write(String(limits.addressSpaceBytes), to: memory + (version == 1 ? "/memory.limit_in_bytes" : "/memory.max"))
            // No swap beyond the limit either, where the kernel accounts it.
            let swap = memory + (version == 1 ? "/memory.memsw.limit_in_bytes" : "/memory.swap.max")
            if access(swap, W_OK) == 0 { try? write(version == 1 ? String(limits.addressSpaceBytes) : "0", to: swap) }
        }
        if limits.tasks > 0 { try write(String(limits.tasks), to: pids + "/pids.max") }
    }

    private func write(_ text: String, to path: String) throws(SystemError) {
        let file = try FileDescriptor.open(path, .writeOnly)
        defer { file.close() }
        try file.writeAll(Array(text.utf8))
    }

    /// Moves process `pid` (and with it everything it starts later) into the group.
    package func add(_ pid: Int32) throws(SystemError) {
        for file in processFiles { try write(String(pid), to: file) }
    }

    /// CPU time the group used, in nanoseconds, or nil when it cannot be read.
    package var cpuNanoseconds: UInt64? {
        if version == 1 {
            return (try? String(contentsOfFile: cpuAccounting + "/cpuacct.usage", encoding: .utf8))
                .flatMap { UInt64($0.filter { !$0.isWhitespace }) }
        }
        guard let stat = try? String(contentsOfFile: cpuAccounting + "/cpu.stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("usage_usec ") }),
            let microseconds = UInt64(line.dropFirst("usage_usec ".count))
        else { return nil }
        return microseconds * 1000
    }

    /// Whether the kernel killed a process of the group for exceeding its memory limit.
    package var hitMemoryLimit: Bool {
        let file = memory + (version == 1 ? "/memory.oom_control" : "/memory.events")
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return false }
        return text.split(separator: "\n").contains { line in
            line.hasPrefix("oom_kill ") && line.split(separator: " ").last.flatMap { Int($0) }.map { $0 > 0 } == true
        }
    }

    /// Removes the directories; a group some process is still leaving is retried by the caller.
    /// Returns whether all are gone.
    @discardableResult
    package func remove() -> Bool {
        var removed = true
        for directory in directories.reversed() where rmdir(directory) != 0 && errno != ENOENT {
            removed = false
        }
        return removed
    }
}
