import Foundation
import PlugindSystem
import PlugindWire

/// Ends running workers the moment the owner (or the administrator) disables or revokes their
/// plugin, or it is quarantined. While a host configuration has running workers, enforcement
/// subscribes to its discovery engine (`DiscoveryEngine`), whose one watcher already follows the
/// policy and state directories for the monitors: each change it scans for is a check of those
/// workers against the policy as it now is. New bytes on disk end nothing: a running worker keeps
/// running what was approved when it started, and the next launch sees the change. One per
/// runtime (`PlugindRuntime`), over its sessions.
final class PolicyEnforcement: Sendable {
    private struct Subscription {
        let engine: DiscoveryEngine
        let token: Int

        func cancel() { engine.unsubscribe(token) }
    }

    private struct Watch {
        /// Running sessions, by host.
        var sessions: [AppExtensionHost: Int] = [:]
        /// The hosts followed: those with running sessions and the idle ones.
        var subscriptions: [AppExtensionHost: Subscription] = [:]
        /// Hosts whose last session ended lately, newest last: they stay followed, so that a host
        /// launching and ending workers one at a time does not start and close a watcher (whose
        /// inotify instance waits for the kernel's grace period to close) every time.
        var idle: [AppExtensionHost] = []
        var stopped = false

        static let idleHostsFollowed = 8
    }

    private let watch = Locked(Watch())
    private let sessions: WorkerSessions
    private let discoveryEngines: Locked<[DiscoveryEngine.Key: DiscoveryEngine]>

    init(sessions: WorkerSessions, discoveryEngines: Locked<[DiscoveryEngine.Key: DiscoveryEngine]>) {
        self.sessions = sessions
        self.discoveryEngines = discoveryEngines
    }

    /// Follows `host`'s policy for a new running session; balanced by `ended`. The watch is in
    /// place when this returns: a change from then on is seen.
    func started(_ session: WorkerSession) {
        let host = session.host
        let followed = watch.withLock { watch -> Bool in
            watch.sessions[host, default: 0] += 1
            watch.idle.removeAll { $0 == host }
            return watch.subscriptions[host] != nil || watch.stopped
        }
        guard !followed else { return }
        let (engine, token) = DiscoveryEngine.subscribe(host: host, registry: discoveryEngines) { [weak self] _ in self?.check(host) }
        let made = Subscription(engine: engine, token: token)
        let surplus = watch.withLock { watch -> Subscription? in
            guard watch.subscriptions[host] == nil, !watch.stopped else { return made }
            watch.subscriptions[host] = made
            return nil
        }
        guard surplus == nil else { return made.cancel() }
        // Without a watcher (no event loop, no inotify), the policy is still checked at every
        // launch; only running workers go unchecked.
        try? engine.startWatchingWithoutScan()
    }

    /// A session of `host` ended; the host is no longer followed once its last did and
    /// `idleHostsFollowed` others ended after it.
    func ended(_ session: WorkerSession) {
        let dropped = watch.withLock { watch -> Subscription? in
            watch.sessions[session.host, default: 1] -= 1
            guard watch.sessions[session.host] ?? 0 <= 0 else { return nil }
            watch.sessions[session.host] = nil
            watch.idle.append(session.host)
            guard watch.idle.count > Watch.idleHostsFollowed else { return nil }
            return watch.subscriptions.removeValue(forKey: watch.idle.removeFirst())
        }
        dropped?.cancel()
    }

    /// Follows nothing any more (the runtime shuts down).
    func stop() {
        let subscriptions = watch.withLock { watch in
            watch.stopped = true
            defer { watch.subscriptions.removeAll() }
            return Array(watch.subscriptions.values)
        }
        for subscription in subscriptions { subscription.cancel() }
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
    struct Fingerprint: Equatable {
        private var files: [FileIdentity?]

        init(host: AppExtensionHost) {
            let paths = HostFiles.of(host)
            files = [
                paths.userPolicyFile, paths.administratorPolicyFile,
                paths.administratorPolicyDirectory + "/" + AdministratorRules.fileName, paths.crashLogFile,
            ].map { FileIdentity(path: $0) }
        }
    }

    /// Why `entry`, launched a moment ago, may not run under `host`'s policy as it is now, if it
    /// may not.
    static func launchRevocation(of entry: CatalogEntry, host: AppExtensionHost) -> String? {
        revocation(of: entry, policy: PolicySnapshot.read(for: host), crashLog: CrashLog(host: host), during: "while it launched")
    }

    /// Why `entry` may no longer run, if it may not; `during` says when the decision landed.
    static func revocation(
        of entry: CatalogEntry, policy: PolicySnapshot, crashLog: CrashLog, during: String = "while it ran"
    ) -> String? {
        PolicyExplanation(decision: policy.decision(for: entry), entry: entry, crashLog: crashLog).revocation(during: during)
    }
}
