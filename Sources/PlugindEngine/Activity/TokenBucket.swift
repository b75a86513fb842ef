import PlugindSystem

/// A budget over time: `burst` units at once, refilled at `rate` per second. What it refuses is
/// counted, and said once something is admitted again (or the count is taken), so a flood costs
/// the log a bounded number of entries plus one that says how many went. A value without system
/// calls: the caller passes the time.
package struct TokenBucket: Sendable {
    package let burst: Double
    package let rate: Double

    private var tokens: Double
    private var last: ContinuousClock.Instant?
    /// Refused since the last admission.
    private(set) var dropped = 0

    init(burst: Double, rate: Double) {
        self.burst = burst
        self.rate = rate
        self.tokens = burst
    }

    enum Decision: Equatable {
        /// Take it; `droppedBefore` were refused since the last one admitted.
        case admit(droppedBefore: Int)
        case refuse
    }

    /// Whether something costing `cost` units fits now. A cost over the whole burst never does.
    mutating func consider(cost: Double = 1, at now: ContinuousClock.Instant) -> Decision {
        if let last {
            // A clock read out of order (another thread's earlier instant) refills nothing.
            if now > last {
                let elapsed = now - last
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                tokens = min(burst, tokens + seconds * rate)
                self.last = now
            }
        } else {
            last = now
        }
        guard tokens >= cost else {
            dropped = dropped.addingSaturating(1)
            return .refuse
        }
        tokens -= cost
        defer { dropped = 0 }
        return .admit(droppedBefore: dropped)
    }

    /// The refused not yet said, and forgets them.
    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }
}

/// What one plugin may put in the owner's log, so that no plugin can push the owner's history
/// out of it nor flood the journal: lines per worker (as fast as a person can read a burst),
/// bytes per plugin across its workers in a host (lines may be 8 KiB each), and the sandbox's
/// refusal reports per plugin (the worker limits them too, but in memory the plugin can write).
package enum PluginLogBudget {
    static func linesPerWorker() -> TokenBucket { TokenBucket(burst: 100, rate: 50) }
    package static func bytesPerPlugin() -> TokenBucket { TokenBucket(burst: 256 * 1024, rate: 16 * 1024) }
    static func refusalsPerPlugin() -> TokenBucket { TokenBucket(burst: 10, rate: 1) }
}
