/// When work made ahead may start: once the host's work with its workers has been quiet for
/// `quiet` (no request, call or connection sent or answered, no answer awaited), or at
/// `deadline` whatever happens.
///
/// Priming the next worker right after a launch (its confinement and the plugin's `dlopen`)
/// competes for the processors with the first request to the worker just launched, and on a
/// machine with few processors makes that request several times slower. A launch that
/// comes before the moment does not wait for it: it takes the spare and loads the plugin itself,
/// as a first launch does. No system calls: the pool feeds it the loop's traffic count and clock.
struct QuietMoment: Sendable, Equatable {
    enum Decision: Sendable, Equatable {
        case start
        case checkAgain(at: ContinuousClock.Instant)
    }

    let quiet: Duration
    let deadline: ContinuousClock.Instant
    /// The traffic count at the last check: unchanged at the next one means nothing moved since.
    private var trafficSeen: UInt64

    /// When the first check is due.
    let firstCheck: ContinuousClock.Instant

    /// Begins waiting `now`, with the loop's traffic count then.
    init(traffic: UInt64, now: ContinuousClock.Instant, quiet: Duration, atMost: Duration) {
        self.quiet = quiet
        self.deadline = now.advanced(by: atMost)
        self.firstCheck = min(deadline, now.advanced(by: quiet))
        self.trafficSeen = traffic
    }

    /// The moment to prime after a launch at `now`: when the host is quiet, unless launches come
    /// back to back (the one before was less than `backToBack` ago), when the next launch wants
    /// its worker primed more than a request wants the processors: then at once.
    static func afterLaunch(
        now: ContinuousClock.Instant, previousLaunch: ContinuousClock.Instant?, traffic: UInt64,
        quiet: Duration, atMost: Duration, backToBack: Duration
    ) -> QuietMoment {
        let isBackToBack = previousLaunch.map { $0.duration(to: now) < backToBack } ?? false
        return QuietMoment(traffic: traffic, now: now, quiet: quiet, atMost: isBackToBack ? .zero : atMost)
    }

    /// The check `quiet` after the last one, with the count of frames so far and the answers
    /// awaited now.
    mutating func check(traffic: UInt64, awaitedAnswers: Int, now: ContinuousClock.Instant) -> Decision {
        if now >= deadline || (traffic == trafficSeen && awaitedAnswers == 0) { return .start }
        trafficSeen = traffic
        return .checkAgain(at: min(deadline, now.advanced(by: quiet)))
    }
}
