import Foundation
import Glibc
import PlugindSystem

/// Facts about processes and descriptors, read from /proc, for leak checks.
package enum ProcessInspection {
    /// Whether a process with this pid exists (kill(pid, 0) does not fail with ESRCH).
    package static func exists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }

    /// Descriptors an exit test's process had when it started, which `openDescriptorKinds` leaves
    /// out (see `ignoreInheritedDescriptors`).
    private static let inherited = Locked<Set<String>>([])

    /// For exit tests, first thing: descriptors open now came from the parent test process, not
    /// from the code under test. The parent runs other tests meanwhile, and a file one of them
    /// had open without close-on-exec (Foundation's writes) when the child was spawned stays
    /// open here under its path — and shows as "(deleted)" once that test removes it, which a
    /// count by kind took for a leak (CI: `manifest.json 1 → 0, manifest.json (deleted) 0 → 1`).
    package static func ignoreInheritedDescriptors() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        inherited.withLock { $0.formUnion(names.filter { Int32($0).map { $0 > 2 } ?? false }) }
    }

    /// Descriptors open in this process, counted by kind ("pipe", "socket", "anon_inode:[pidfd]",
    /// or a file's path), but for those `ignoreInheritedDescriptors` set aside. Kinds, not
    /// numbers: a descriptor closed and opened again may take another number, and a leak shows
    /// as a kind whose count grew.
    package static func openDescriptorKinds() -> [String: Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let inherited = inherited.withLock { $0 }
        var kinds: [String: Int] = [:]
        for name in names where !inherited.contains(name) {
            // The directory listing itself is a descriptor that is gone by now.
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)") else { continue }
            let kind = target.firstRange(of: ":[").map { target[..<$0.lowerBound] }.map(String.init) ?? target
            kinds[kind == "anon_inode" ? target : kind, default: 0] += 1
        }
        return kinds
    }

    /// For exit tests: ends the process with `status`, naming the change on stderr, when its
    /// descriptors differ from `before` (an `openDescriptorKinds()` result).
    package static func exitIfDescriptorsChanged(since before: [String: Int], status: Int32) {
        let after = openDescriptorKinds()
        guard after != before else { return }
        FileHandle.standardError.write(Data("descriptors: \(describeChange(from: before, to: after))\n".utf8))
        exit(status)
    }

    /// What changed between two `openDescriptorKinds()` results, e.g. "pipe 4 → 6".
    private static func describeChange(from before: [String: Int], to after: [String: Int]) -> String {
        Set(before.keys).union(after.keys).sorted()
            .filter { before[$0] != after[$0] }
            .map { "\($0) \(before[$0] ?? 0) → \(after[$0] ?? 0)" }
            .joined(separator: ", ")
    }

    /// What each descriptor of this process names ("pipe:[…]", "/memfd:plugind:libX.so (deleted)").
    package static func ownDescriptorTargets() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
    }

    /// Children of this process that exited but were not reaped.
    package static func zombieChildren() -> [Int32] {
        children(of: getpid()).filter { state(of: $0) == "Z" }
    }

    /// Direct children of `pid`.
    package static func children(of pid: Int32) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var result: [Int32] = []
        for task in tasks {
            let text = readProcFile("/proc/\(pid)/task/\(task)/children")
            result += text.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        return result
    }

    /// The state letter from /proc/PID/stat (R, S, Z, …), or nil when the process is gone.
    package static func state(of pid: Int32) -> String? {
        let stat = readProcFile("/proc/\(pid)/stat")
        guard let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ").first.map(String.init)
    }

    /// Pids of every process whose command name (/proc/PID/comm) is `name`.
    package static func processes(named name: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            let comm = readProcFile("/proc/\(pid)/comm").trimmingCharacters(in: .newlines)
            return comm == name && state(of: pid) != "Z"
        }
    }

    /// Whether process `pid` (this one by default) has `path` mapped, from /proc/PID/maps.
    package static func mapsFile(_ path: String, pid: Int32? = nil) -> Bool {
        readProcFile("/proc/\(pid.map(String.init) ?? "self")/maps").contains(path)
    }

    /// The whole of a /proc file. Their size reads as 0, so read until end of file.
    package static func readProcFile(_ path: String) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    }
}

extension ProcessInspection {
    /// Waits on a pidfd for `pid` to exit. True when it exited (or never existed).
    package static func waitForExit(_ pid: Int32, milliseconds: Int32) -> Bool {
        let processDescriptor: FileDescriptor
        do {
            processDescriptor = try FileDescriptor.processDescriptor(for: pid)
        } catch {
            return error.errno == .noSuchProcess
        }
        defer { processDescriptor.close() }
        var descriptor = pollfd(fd: processDescriptor.rawValue, events: Int16(POLLIN), revents: 0)
        while true {
            let result = poll(&descriptor, 1, milliseconds)
            if result < 0 && errno == EINTR { continue }
            return result > 0
        }
    }
}
