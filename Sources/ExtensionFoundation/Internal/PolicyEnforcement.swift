import Foundation
import PlugindSystem

/// Ends running workers the moment the owner (or the administrator) disables or revokes their
/// plugin, or it is quarantined: the policy and crash-log directories of every host with running
/// workers are watched, and each change checks those workers against the policy as it now is.
/// New bytes on disk end nothing: a running worker keeps running what was approved when it
/// started, and the next launch sees the change.
enum PolicyEnforcement {
    private struct Watch {
        var watcher: DirectoryWatcher
        var sessions = 0
    }

    private static let watches = Locked<[AppExtensionHost: Watch]>([:])

    /// Starts watching `host`'s policy for a new running session; balanced by `ended`.
    static func started(_ session: WorkerSession) {
        let host = session.host
        let watching = watches.withLock { watches -> Bool in
            guard watches[host] != nil else { return false }
            watches[host]?.sessions += 1
            return true
        }
        guard !watching else { return }
        // Without a watcher (no event loop, no inotify), the policy is still checked at every
        // launch; only running workers go unchecked.
        guard let loop = try? WorkerEventLoop.shared(),
            let watcher = try? DirectoryWatcher(loop: loop, onChange: { Task.detached { check(host) } })
        else { return }
        watcher.watch([host.policyDirectory.path, host.administratorPolicyDirectory.path, host.stateDirectory.path])
        let surplus = watches.withLock { watches -> DirectoryWatcher? in
            if watches[host] != nil {
                watches[host]?.sessions += 1
                return watcher
            }
            watches[host] = Watch(watcher: watcher, sessions: 1)
            return nil
        }
        surplus?.close()
    }

    /// A session of `host` ended; the last one stops the watch.
    static func ended(_ session: WorkerSession) {
        let host = session.host
        let finished = watches.withLock { watches -> DirectoryWatcher? in
            guard var watch = watches[host] else { return nil }
            watch.sessions -= 1
            guard watch.sessions <= 0 else {
                watches[host] = watch
                return nil
            }
            watches[host] = nil
            return watch.watcher
        }
        finished?.close()
    }

    /// Checks every running worker of `host` against the policy as it is now.
    static func check(_ host: AppExtensionHost) {
        let sessions = WorkerSessions.running(host: host)
        guard !sessions.isEmpty else { return }
        let policy = PolicySnapshot.read(for: host)
        let crashLog = CrashLog(host: host)
        for session in sessions {
            if let reason = revocation(of: session.entry, policy: policy, crashLog: crashLog) {
                session.channel.stop(.disabledByOwner(reason))
            }
        }
    }

    /// Why `entry` may no longer run, if it may not.
    static func revocation(of entry: CatalogEntry, policy: PolicySnapshot, crashLog: CrashLog) -> String? {
        switch policy.decision(for: entry) {
        case .available, .approvalOutdated:
            break
        case .disabled(let byAdministrator):
            return byAdministrator ? "was disabled by the administrator while it ran" : "was disabled by its owner while it ran"
        case .unapproved:
            return "its approval was revoked while it ran"
        }
        if let quarantine = crashLog.quarantine(of: entry.identifier, bundle: entry.bundle) {
            return "was quarantined while it ran (\(quarantine.reason))"
        }
        return nil
    }
}
