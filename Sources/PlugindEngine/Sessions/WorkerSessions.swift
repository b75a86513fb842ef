import PlugindSystem

/// The workers of a runtime (`PlugindRuntime.sessions`): the shared ones by what they run, and
/// every running one for the policy checks. A launch for a key another launch is already making
/// waits for that one instead of starting a second worker.
package final class WorkerSessions: Sendable {
    private final class WeakSession: Sendable {
        weak let session: WorkerSession?
        init(_ session: WorkerSession) { self.session = session }
    }

    private struct Registry {
        var sessions: [WorkerSession.Key: WeakSession] = [:]
        /// Launches under way, with the callers waiting for them.
        var launching: [WorkerSession.Key: [CheckedContinuation<WorkerSession?, Never>]] = [:]
        /// Every running session, shared or dedicated, for the policy checks.
        var tracked: [ObjectIdentifier: WeakSession] = [:]
    }

    private let registry = Locked(Registry())

    /// Follows a new session (shared or dedicated) until it ends.
    func track(_ session: WorkerSession) {
        registry.withLock { $0.tracked[ObjectIdentifier(session)] = WeakSession(session) }
    }

    /// The running session for `key`, or the one `launch` makes (once, however many callers ask
    /// at the same time: the first launches, in its own task, the others wait for it).
    package func session(
        for key: WorkerSession.Key,
        launch: () async throws -> WorkerSession
    ) async throws -> WorkerSession {
        while true {
            enum Found {
                case running(WorkerSession)
                case launching
                case mine
            }
            let found = registry.withLock { registry -> Found in
                if let running = registry.sessions[key]?.session, running.isUsable { return .running(running) }
                registry.sessions[key] = nil
                if registry.launching[key] != nil { return .launching }
                registry.launching[key] = []
                return .mine
            }
            switch found {
            case .running(let session):
                return session
            case .launching:
                // Someone else's launch: its failure is theirs to report; this caller tries anew.
                let launched = await withCheckedContinuation { (continuation: CheckedContinuation<WorkerSession?, Never>) in
                    let finished = registry.withLock { registry -> Bool in
                        guard registry.launching[key] != nil else { return true }
                        registry.launching[key]?.append(continuation)
                        return false
                    }
                    if finished { continuation.resume(returning: nil) }
                }
                if let launched, launched.isUsable { return launched }
                try Task.checkCancellation()
            case .mine:
                let result: Result<WorkerSession, any Error>
                do {
                    result = .success(try await launch())
                } catch {
                    result = .failure(error)
                }
                let waiters = registry.withLock { registry -> [CheckedContinuation<WorkerSession?, Never>] in
                    if case .success(let session) = result { registry.sessions[key] = WeakSession(session) }
                    return registry.launching.removeValue(forKey: key) ?? []
                }
                let session = try? result.get()
                for waiter in waiters { waiter.resume(returning: session) }
                return try result.get()
            }
        }
    }

    /// Every session of `host` that is still running.
    func running(host: AppExtensionHost) -> [WorkerSession] {
        all().filter { $0.host == host }
    }

    /// Every session that is still running.
    func all() -> [WorkerSession] {
        registry.withLock { registry in
            registry.tracked = registry.tracked.filter { $0.value.session != nil }
            return registry.tracked.values.compactMap(\.session).filter(\.isUsable)
        }
    }

    /// A session that ended, or whose last claim was released: no handle attaches to it any
    /// more. True when it was tracked until now.
    func forget(_ session: WorkerSession) -> Bool {
        registry.withLock { registry -> Bool in
            let wasTracked = registry.tracked.removeValue(forKey: ObjectIdentifier(session)) != nil
            if let key = session.key, registry.sessions[key]?.session === session || registry.sessions[key]?.session == nil {
                registry.sessions[key] = nil
            }
            return wasTracked
        }
    }
}
