import Dispatch
import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

/// Writes a crash record when a worker ends badly, so that repeated crashes quarantine the
/// plugin. File I/O happens on a utility queue, never on the event loop or the caller's task.
package enum CrashRecorder {
    private static let queue = DispatchQueue(label: "plugind.crash-recorder", qos: .utility)

    /// Records the end of `channel` when it comes, unless the host ended it. The record is queued
    /// before anyone waiting for the termination resumes.
    package static func watch(_ channel: WorkerChannel, entry: CatalogEntry, host: AppExtensionHost) {
        let limits = channel.limits
        let activity = channel.activity
        channel.setTerminationObserver { termination in
            if termination.refusals > 0, let last = termination.lastRefusal {
                queue.async {
                    CrashLog(host: host).recordRefusals(
                        identifier: entry.identifier, count: termination.refusals, last: last.description)
                }
            }
            // Ended by the host or the owner: no crash of the plugin's.
            guard !termination.wasInvalidated else { return }
            if case .disabledByOwner = termination.stopCause { return }
            let error = termination.error(plugin: entry.identifier, limits: limits)
            // Killed from outside: said in the log, never counted against the plugin.
            if error.code == .workerKilled {
                activity?.record(.killed, priority: 4, error.reason)
                return
            }
            activity?.record(error.code == .limitExceeded ? .limit : .crash, priority: 3, error.reason)
            record(error, entry: entry, host: host, log: activity?.subject.log)
        }
    }

    /// Returns once every crash queued so far is on disk.
    package static func waitForPendingRecords() async {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume() }
        }
    }

    /// Blocks until every crash queued so far is on disk, or `timeout` has passed. For callers
    /// outside Swift concurrency (the C API), never on the recorder's own queue.
    package static func waitForPendingRecords(timeout: Duration) {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        let (seconds, attoseconds) = timeout.components
        _ = done.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
    }

    /// Records a launch that failed because the worker died or hung while loading.
    package static func recordLaunchFailure(_ error: AppExtensionError, entry: CatalogEntry, host: AppExtensionHost) {
        let counted: Set<AppExtensionError.Code> = [
            .workerCrashed, .workerExited, .limitExceeded, .protocolViolation, .timedOut, .pluginLoadFailed,
        ]
        let log = PluginLogWriter.forHost(host)
        if error.code == .workerKilled {
            log?.submit(logEntry(.killed, error.reason, priority: 4, entry: entry, host: host))
            return
        }
        guard counted.contains(error.code), error.termination != nil else { return }
        log?.submit(logEntry(error.code == .limitExceeded ? .limit : .crash, "while loading: \(error.reason)", entry: entry, host: host))
        record(error, entry: entry, host: host, log: log)
    }

    private static func record(_ error: AppExtensionError, entry: CatalogEntry, host: AppExtensionHost, log: PluginLogWriter?) {
        queue.async {
            let quarantine = CrashLog(host: host).record(
                identifier: entry.identifier, bundle: entry.bundle, reason: error.reason, output: error.standardErrorTail,
                backtrace: error.backtrace)
            if let quarantine { log?.submit(logEntry(.quarantine, "quarantined: \(quarantine.reason)", entry: entry, host: host)) }
        }
    }

    /// An error entry of this host about `entry` when no worker is there to name.
    private static func logEntry(
        _ event: PluginLogEntry.Event, _ message: String, priority: Int = 3, entry: CatalogEntry, host: AppExtensionHost
    ) -> PluginLogEntry {
        PluginLogEntry(
            priority: priority, event: event, message: message, plugin: entry.identifier, pluginVersion: entry.manifest.version,
            hostIdentifier: host.identifier, hostExecutable: WorkerActivity.hostExecutable, hostPID: WorkerActivity.hostPID)
    }
}
