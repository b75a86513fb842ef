import PlugindSystem

/// The shared workers of this host process, by what they run. A launch for a key another launch
/// is already making waits for that one instead of starting a second worker.
enum WorkerSessions {
    private final class WeakSession: Sendable {
        weak let session: WorkerSession?
        init(_ session: WorkerSession) { self.session = session }
    }

    private struct Registry {
        var sessions: [WorkerSession.Key: WeakSession] = [:]
        var launching: [WorkerSession.Key: Task<WorkerSession, any Error>] = [:]
        /// Every running session, shared or dedicated, for the policy checks.
        var tracked: [ObjectIdentifier: WeakSession] = [:]
    }

    /// Follows a new session (shared or dedicated) until it ends.
    static func track(_ session: WorkerSession) {
        registry.withLock { $0.tracked[ObjectIdentifier(session)] = WeakSession(session) }
        PolicyEnforcement.started(session)
    }

    private static let registry = Locked(Registry())

    /// The running session for `key`, or the one `launch` makes (once, however many callers ask
    /// at the same time).
    static func session(
        for key: WorkerSession.Key,
        launch: @escaping @Sendable () async throws -> WorkerSession
    ) async throws -> WorkerSession {
        while true {
            enum Found {
                case running(WorkerSession)
                case launching(Task<WorkerSession, any Error>)
                case launched(Task<WorkerSession, any Error>)
            }
            let found = registry.withLock { registry -> Found in
                if let running = registry.sessions[key]?.session, running.isUsable { return .running(running) }
                registry.sessions[key] = nil
                if let inFlight = registry.launching[key] { return .launching(inFlight) }
                let task = Task { try await launch() }
                registry.launching[key] = task
                return .launched(task)
            }
            switch found {
            case .running(let session):
                return session
            case .launching(let task):
                // Someone else's launch: its failure is theirs to report; this caller tries anew.
                if let session = try? await task.value, session.isUsable { return session }
                try Task.checkCancellation()
            case .launched(let task):
                let result = await task.result
                registry.withLock { registry in
                    registry.launching[key] = nil
                    if case .success(let session) = result { registry.sessions[key] = WeakSession(session) }
                }
                return try result.get()
            }
        }
    }

    /// Every session of `host` that is still running.
    static func running(host: AppExtensionHost) -> [WorkerSession] {
        registry.withLock { registry in
            registry.tracked = registry.tracked.filter { $0.value.session != nil }
            return registry.tracked.values.compactMap(\.session).filter { $0.host == host && $0.isUsable }
        }
    }

    /// A session that ended, or whose last claim was released: no handle attaches to it any more.
    static func forget(_ session: WorkerSession) {
        let wasTracked = registry.withLock { registry -> Bool in
            let wasTracked = registry.tracked.removeValue(forKey: ObjectIdentifier(session)) != nil
            if let key = session.key, registry.sessions[key]?.session === session || registry.sessions[key]?.session == nil {
                registry.sessions[key] = nil
            }
            return wasTracked
        }
        if wasTracked { PolicyEnforcement.ended(session) }
    }
}
