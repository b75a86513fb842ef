/// How many log lines of one worker reach the log: a bucket of `burst` lines refilled at `rate`
/// per second. What is refused is counted, and said once a line is admitted again (or the worker
/// ends), so a flood costs the log a bounded number of entries plus one that says how many went.
struct LogRateLimiter: Sendable {
    static let burst = 100.0
    static let rate = 50.0

    private var tokens = LogRateLimiter.burst
    private var last: ContinuousClock.Instant?
    /// Lines refused since the last admitted one.
    private(set) var dropped = 0

    enum Decision: Equatable {
        /// Log it; `droppedBefore` lines were refused since the last one logged.
        case admit(droppedBefore: Int)
        case refuse
    }

    mutating func consider(at now: ContinuousClock.Instant) -> Decision {
        if let last {
            let elapsed = now - last
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            tokens = min(Self.burst, tokens + seconds * Self.rate)
        }
        last = now
        guard tokens >= 1 else {
            dropped += 1
            return .refuse
        }
        tokens -= 1
        defer { dropped = 0 }
        return .admit(droppedBefore: dropped)
    }

    /// The refused lines not yet said, and forgets them.
    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }
}
