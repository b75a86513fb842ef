import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindWire

/// Ends running workers the moment the owner (or the administrator) disables or revokes their
/// plugin, or it is quarantined: the policy and crash-log directories of every host with running
/// workers are watched, and each change checks those workers against the policy as it now is.
/// New bytes on disk end nothing: a running worker keeps running what was approved when it
/// started, and the next launch sees the change. One per runtime (`PlugindRuntime`), over its
/// sessions. Its watcher is its own: a discovery engine's queue would need a thread of its own
/// at the first change, which a host at its process limit cannot make.
package final class PolicyEnforcement: Sendable {
    private struct Watch {
        /// One watcher for every host, made once: closing an inotify instance waits for the
        /// kernel's grace period, too slow to do for every last worker of a host.
        var watcher: DirectoryWatcher?
        /// Running sessions, by host.
        var sessions: [AppExtensionHost: Int] = [:]
        /// Hosts whose last session ended lately, newest last: their directories stay watched, so
        /// that a host launching and ending workers one at a time does not add and remove the
        /// same watches every time.
        var idle: [AppExtensionHost] = []

        static let idleHostsWatched = 8

        var watchedHosts: [AppExtensionHost] { Array(sessions.keys) + idle }

        var paths: Set<String> {
            Set(watchedHosts.flatMap { [$0.policyDirectory.path, $0.administratorPolicyDirectory.path, $0.stateDirectory.path] })
        }

        var ignored: [(directory: String, namePrefix: String)] {
            watchedHosts.flatMap { DiscoveryEngine.ignoredFiles(host: $0) }
        }
    }

    private let watch = Locked(Watch())
    private let sessions: WorkerSessions

    init(sessions: WorkerSessions) {
        self.sessions = sessions
    }

    /// Starts watching `host`'s policy for a new running session; balanced by `ended`.
    func started(_ session: WorkerSession) {
        let (needsWatcher, watchedAlready) = watch.withLock { watch -> (Bool, Bool) in
            let watchedAlready = watch.sessions[session.host] != nil || watch.idle.contains(session.host)
            watch.sessions[session.host, default: 0] += 1
            watch.idle.removeAll { $0 == session.host }
            return (watch.watcher == nil || watch.watcher?.isClosed == true, watchedAlready)
        }
        if needsWatcher, let loop = try? WorkerEventLoop.shared(),
            let made = try? DirectoryWatcher(loop: loop, onChange: { [weak self] in Task.detached { self?.checkAll() } })
        {
            let surplus = watch.withLock { watch -> DirectoryWatcher? in
                guard watch.watcher == nil || watch.watcher?.isClosed == true else { return made }
                watch.watcher = made
                return nil
            }
            surplus?.close()
        }
        // Without a watcher (no event loop, no inotify), the policy is still checked at every
        // launch; only running workers go unchecked.
        if needsWatcher || !watchedAlready { updateWatches() }
    }

    /// A session of `host` ended; the host's directories are no longer watched once its last did.
    func ended(_ session: WorkerSession) {
        let changed = watch.withLock { watch -> Bool in
            watch.sessions[session.host, default: 1] -= 1
            guard watch.sessions[session.host] ?? 0 <= 0 else { return false }
            watch.sessions[session.host] = nil
            watch.idle.append(session.host)
            guard watch.idle.count > Watch.idleHostsWatched else { return false }
            watch.idle.removeFirst()
            return true
        }
        if changed { updateWatches() }
    }

    /// Closes the watcher (the runtime shuts down).
    func stop() {
        let watcher = watch.withLock { watch in
            defer { watch.watcher = nil }
            return watch.watcher
        }
        watcher?.close()
    }

    private func updateWatches() {
        let (watcher, paths, ignored) = watch.withLock { ($0.watcher, $0.paths, $0.ignored) }
        watcher?.watch(paths, ignoring: ignored)
    }

    /// A change in some watched directory: every host with running workers checks its own.
    private func checkAll() {
        let hosts = watch.withLock { Array($0.sessions.keys) }
        for host in hosts { check(host) }
    }

    /// Checks every running worker of `host` against the policy as it is now.
    func check(_ host: AppExtensionHost) {
        let sessions = sessions.running(host: host)
        guard !sessions.isEmpty else { return }
        let policy = PolicySnapshot.read(for: host)
        let crashLog = CrashLog(host: host)
        for session in sessions {
            if let reason = Self.revocation(of: session.entry, policy: policy, crashLog: crashLog) {
                session.channel.stop(.disabledByOwner(reason))
            }
        }
    }

    /// The identities of the files a policy decision of `host` reads (the owner's and the
    /// administrator's policy, the administrator's rules, the crash log; nil where missing):
    /// while they are equal no decision can have changed, and a launch need not decide again.
    package struct Fingerprint: Equatable {
        private var files: [FileIdentity?]

        package init(host: AppExtensionHost) {
            let paths = HostFiles.of(host)
            files = [
                paths.userPolicyFile, paths.administratorPolicyFile,
                paths.administratorPolicyDirectory + "/" + AdministratorRules.fileName, paths.crashLogFile,
            ].map { FileIdentity(path: $0) }
        }
    }

    /// Why `entry`, launched a moment ago, may not run under `host`'s policy as it is now, if it
    /// may not.
    package static func launchRevocation(of entry: CatalogEntry, host: AppExtensionHost) -> String? {
        revocation(of: entry, policy: PolicySnapshot.read(for: host), crashLog: CrashLog(host: host), during: "while it launched")
    }

    /// Why `entry` may no longer run, if it may not; `during` says when the decision landed.
    static func revocation(
        of entry: CatalogEntry, policy: PolicySnapshot, crashLog: CrashLog, during: String = "while it ran"
    ) -> String? {
        PolicyExplanation(decision: policy.decision(for: entry), entry: entry, crashLog: crashLog).revocation(during: during)
    }
}
