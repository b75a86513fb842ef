import Dispatch
import FoundationEssentials
import Glibc
public import Observation
import PlugindBundle
import PlugindEngine
import PlugindSystem

extension AppExtensionPoint {
    /// Lists the plugins available to the host for the extension points it monitors, and keeps
    /// the list current while the host runs: bundles installed, changed or removed, and the
    /// owner's approvals and disables, are seen within milliseconds (inotify; no polling).
    ///
    /// `identities` and `state` are observable:
    ///
    ///     let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: .textFilters)
    ///     for await identities in Observations({ monitor.identities }) { … }
    ///
    /// Thread-safe: read it from any task or actor.
    @Observable
    public final class Monitor: Sendable {
        /// A snapshot of what the monitor sees.
        public struct State: Sendable, Hashable {
            /// The approved and enabled plugins of all monitored points.
            public var identities: [AppExtensionIdentity]
            /// Plugins of the monitored points that the owner (or administrator) disabled.
            public var disabledCount: Int
            /// Plugins of the monitored points that are not approved yet, or whose approval no
            /// longer matches their bytes or permissions.
            public var unapprovedCount: Int

            public init(identities: [AppExtensionIdentity] = [], disabledCount: Int = 0, unapprovedCount: Int = 0) {
                self.identities = identities
                self.disabledCount = disabledCount
                self.unapprovedCount = unapprovedCount
            }
        }

        private struct Storage {
            var points: [AppExtensionPoint] = []
            var state = State()
            var diagnostics: [AppExtensionDiagnostic] = []
            var generation = 0
        }

        @ObservationIgnored private let storage = Locked(Storage())
        @ObservationIgnored let host: AppExtensionHost
        @ObservationIgnored let engine: MonitorEngine

        /// A monitor without extension points, for `AppExtensionHost.current`; add points with
        /// `addAppExtensionPoint(_:)`.
        public convenience init() {
            self.init(host: .current)
        }

        /// A monitor for `host`. Linux addition.
        public convenience init(host: AppExtensionHost) {
            self.init(host: host, engine: MonitorEngine(host: host))
        }

        init(host: AppExtensionHost, engine: MonitorEngine) {
            self.host = host
            self.engine = engine
            engine.onInventory = { [weak self] inventory in self?.apply(inventory) }
        }

        /// A monitor for one point; returns once the initial list is known.
        public convenience init(appExtensionPoint: AppExtensionPoint) async throws {
            self.init(host: .current)
            try await addAppExtensionPoint(appExtensionPoint)
        }

        /// The unlabeled form of `init(appExtensionPoint:)`, as Apple's sample calls it.
        public convenience init(_ appExtensionPoint: AppExtensionPoint) async throws {
            try await self.init(appExtensionPoint: appExtensionPoint)
        }

        deinit {
            engine.stop()
        }

        /// The approved and enabled plugins of all monitored points. Observable.
        public var identities: [AppExtensionIdentity] {
            access(keyPath: \.identities)
            return storage.withLock { $0.state.identities }
        }

        /// Available plugins and how many are disabled or unapproved. Observable.
        public var state: State {
            access(keyPath: \.state)
            return storage.withLock { $0.state }
        }

        /// Every plugin of the monitored points that is not available, and every bundle or policy
        /// file plugind could not use, with the reason. Observable. Linux addition.
        public var diagnostics: [AppExtensionDiagnostic] {
            access(keyPath: \.diagnostics)
            return storage.withLock { $0.diagnostics }
        }

        /// The points being monitored.
        public var appExtensionPoints: [AppExtensionPoint] {
            storage.withLock { $0.points }
        }

        /// Starts monitoring `appExtensionPoint`; returns once `identities` includes its plugins.
        /// Adding a point twice has no effect.
        ///
        /// - Throws: `AppExtensionPoint.Error` when the point has no name or its host no
        ///   identifier; `AppExtensionError` with code `configurationError` when the directories
        ///   cannot be watched.
        public func addAppExtensionPoint(_ appExtensionPoint: AppExtensionPoint) async throws {
            try appExtensionPoint.validated(in: host)
            let added = storage.withLock { storage -> Bool in
                guard !storage.points.contains(appExtensionPoint) else { return false }
                storage.points.append(appExtensionPoint)
                return true
            }
            guard added else { return }
            do {
                try await engine.refreshNow()
            } catch {
                // Not monitored until a refresh succeeds: a retry adds it again and refreshes.
                storage.withLock { storage in storage.points.removeAll { $0 == appExtensionPoint } }
                throw error
            }
        }

        /// Stops monitoring `appExtensionPoint`; its plugins leave `identities`. Removing a point
        /// that is not monitored has no effect.
        public func removeAppExtensionPoint(_ appExtensionPoint: AppExtensionPoint) async throws {
            let removed = storage.withLock { storage -> Bool in
                guard let index = storage.points.firstIndex(of: appExtensionPoint) else { return false }
                storage.points.remove(at: index)
                return true
            }
            guard removed else { return }
            do {
                try await engine.refreshNow()
            } catch {
                storage.withLock { storage in if !storage.points.contains(appExtensionPoint) { storage.points.append(appExtensionPoint) } }
                throw error
            }
        }

        /// Publishes what a scan found, touching only the properties that changed.
        ///
        /// The new value is stored before observers are told: `Observations` re-reads a property
        /// as soon as it hears of a change, possibly on another thread, and must never read the
        /// value the change replaces.
        private func apply(_ inventory: Inventory) {
            let points = storage.withLock { $0.points }
            let (state, diagnostics) = Self.evaluate(inventory, points: points, host: host)
            let changed = storage.withLock { storage -> (identities: Bool, state: Bool, diagnostics: Bool) in
                let changed = (storage.state.identities != state.identities, storage.state != state, storage.diagnostics != diagnostics)
                storage.state = state
                storage.diagnostics = diagnostics
                return changed
            }
            if changed.identities { withMutation(keyPath: \.identities) {} }
            if changed.state { withMutation(keyPath: \.state) {} }
            if changed.diagnostics { withMutation(keyPath: \.diagnostics) {} }
        }

        static func evaluate(
            _ inventory: Inventory,
            points: [AppExtensionPoint],
            host: AppExtensionHost
        ) -> (State, [AppExtensionDiagnostic]) {
            var state = State()
            var diagnostics: [AppExtensionDiagnostic] = []
            // A monitor may hold one point several times, with different required capabilities:
            // a plugin is listed for the first that admits it.
            let identifiers = Dictionary(grouping: points) { $0.identifier(in: host) }
            for item in inventory.items {
                guard let candidates = identifiers[item.entry.manifest.extensionPoint],
                    let point = candidates.first(where: { $0.admits(capabilities: item.entry.manifest.capabilities) })
                else { continue }
                if point.scopeRestriction == .application && !item.entry.root.isBundledWithHost {
                    diagnostics.append(
                        AppExtensionDiagnostic(
                            kind: .outsideScope,
                            path: item.entry.bundle.bundlePath,
                            bundleIdentifier: item.entry.identifier,
                            extensionPointIdentifier: item.entry.manifest.extensionPoint,
                            message: "the extension point accepts only plugins shipped with the host"
                        )
                    )
                    continue
                }
                if let declared = point.version.flatMap(HostVersion.init), let supported = item.entry.manifest.extensionPointVersions,
                    !supported.contains(declared)
                {
                    diagnostics.append(
                        AppExtensionDiagnostic(
                            kind: .incompatiblePointVersion,
                            path: item.entry.bundle.bundlePath,
                            bundleIdentifier: item.entry.identifier,
                            extensionPointIdentifier: item.entry.manifest.extensionPoint,
                            message: "supports versions \(supported) of the extension point; the host declares \(declared)"
                        )
                    )
                    continue
                }
                if item.isAvailable {
                    state.identities.append(item.identity(host: host, requiresEnhancedSecurity: point.requiresEnhancedSecurity))
                    continue
                }
                switch item.explanation.category {
                case .disabled: state.disabledCount += 1
                case .unapproved: state.unapprovedCount += 1
                case .available, .quarantined: break
                }
                if let diagnostic = item.diagnostic { diagnostics.append(diagnostic) }
            }
            diagnostics += inventory.problems.filter { problem in
                problem.extensionPointIdentifier.map { identifiers[$0] != nil } ?? true
            }
            return (state, diagnostics)
        }
    }
}
