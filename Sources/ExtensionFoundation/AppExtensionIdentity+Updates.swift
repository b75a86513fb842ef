import PlugindEngine
import PlugindSystem

/// The macOS 13–15 way of discovering extensions, kept so that code written for it runs: thin
/// shims over what `AppExtensionPoint.Monitor` does. New code should use the monitor.
extension AppExtensionIdentity {
    /// The identities of the approved, enabled plugins serving the given extension points,
    /// delivered as a new array whenever that set changes (the first one as soon as it is
    /// known). Plugins installed by the owner count, as extensions of other apps did on macOS 13:
    /// the points are monitored with `Scope(restriction: .none)`, under
    /// `AppExtensionHost.current`.
    ///
    /// - Throws: `AppExtensionPoint.Error.invalidAppExtensionPoint` when an identifier cannot
    ///   name an extension point.
    @available(*, deprecated, message: "use AppExtensionPoint.Monitor and its identities")
    public static func matching(appExtensionPointIDs: String...) throws -> Identities {
        let points = try appExtensionPointIDs.map { identifier in
            try AppExtensionPoint(identifier: identifier, scope: .none)
        }
        return Identities(points: points, host: .current)
    }

    /// Whenever the number of plugins of `AppExtensionHost.current` that are enabled, wait for the
    /// owner's approval, or that the owner disabled, changes: the new counts (the first as soon as
    /// they are known).
    @available(*, deprecated, message: "use AppExtensionPoint.Monitor and its state")
    public static var availabilityUpdates: AsyncStream<Availability> {
        availabilityUpdates(host: .current)
    }

    static func availabilityUpdates(host: AppExtensionHost) -> AsyncStream<Availability> {
        InventoryUpdates.stream(host: host) { inventory in
            var availability = Availability()
            for item in inventory.items {
                switch item.explanation.category {
                case .disabled: availability.disabledCount += 1
                case .unapproved: availability.unapprovedCount += 1
                case .available: availability.enabledCount += 1
                // Quarantined plugins are counted by the monitor's diagnostics, not here: Apple's
                // counts have no such state.
                case .quarantined: break
                }
            }
            return availability
        }
    }

    /// How many plugins the host has, by whether it may use them.
    public struct Availability: Sendable, Hashable, CustomStringConvertible {
        /// Plugins the host may use now (approved, or shipped with it, and not disabled).
        public var enabledCount = 0
        /// Plugins the owner or the administrator disabled.
        public var disabledCount = 0
        /// Plugins that wait for the owner's approval, or whose approval no longer matches.
        public var unapprovedCount = 0

        public init() {}

        /// Every plugin of the host's points, whatever its state.
        public var totalCount: Int { enabledCount + disabledCount + unapprovedCount }

        public var description: String {
            "\(totalCount) plugin(s): \(enabledCount) enabled, \(disabledCount) disabled, \(unapprovedCount) waiting for approval"
        }
    }

    /// The sequence `matching(appExtensionPointIDs:)` returns: arrays of identities, each when the
    /// set changed.
    public struct Identities: AsyncSequence, Sendable {
        public typealias Element = [AppExtensionIdentity]
        let points: [AppExtensionPoint]
        let host: AppExtensionHost

        public func makeAsyncIterator() -> AsyncStream<[AppExtensionIdentity]>.Iterator {
            let (points, host) = (points, host)
            return InventoryUpdates.stream(host: host) { inventory in
                AppExtensionPoint.Monitor.evaluate(inventory, points: points, host: host).0.identities
            }
            .makeAsyncIterator()
        }
    }
}

/// A stream of what a function of the host's inventory gives, yielded each time it changes, for
/// as long as the stream is iterated.
private enum InventoryUpdates {
    static func stream<Value: Equatable & Sendable>(
        host: AppExtensionHost, _ value: @escaping @Sendable (Inventory) -> Value
    ) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let engine = MonitorEngine(host: host)
        let last = Locked<Value?>(nil)
        engine.onInventory = { inventory in
            let current = value(inventory)
            let changed = last.withLock { last in
                defer { last = current }
                return last != current
            }
            if changed { continuation.yield(current) }
        }
        let start = Task {
            do {
                try await engine.refreshNow()
            } catch {
                // Nothing can be watched: the sequence ends instead of waiting forever.
                continuation.finish()
            }
        }
        continuation.onTermination = { _ in
            start.cancel()
            engine.stop()
        }
        return stream
    }
}
