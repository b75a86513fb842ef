/// When each of a state machine's armed timers fires, and which is next: timers as data, so that
/// the machine needs no clock of its own and its owner one loop timer. The earliest is kept as
/// timers are armed, and found again only after it was disarmed.
struct Deadlines<Timer: Hashable> {
    private(set) var entries: [Timer: ContinuousClock.Instant] = [:]
    private var earliest: ContinuousClock.Instant?
    private var earliestKnown = true

    var isEmpty: Bool { entries.isEmpty }

    subscript(timer: Timer) -> ContinuousClock.Instant? { entries[timer] }

    mutating func arm(_ timer: Timer, at deadline: ContinuousClock.Instant) {
        entries[timer] = deadline
        if earliestKnown, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
    }

    mutating func disarm(_ timer: Timer) {
        guard let deadline = entries.removeValue(forKey: timer) else { return }
        if deadline == earliest { earliestKnown = false }
    }

    mutating func removeAll() {
        entries.removeAll()
        earliest = nil
        earliestKnown = true
    }

    /// The earliest deadline; nil when nothing is armed.
    var next: ContinuousClock.Instant? {
        mutating get {
            if !earliestKnown {
                earliest = entries.values.min()
                earliestKnown = true
            }
            return earliest
        }
    }

    /// The timer due first at `now`, if any is due.
    func firstDue(at now: ContinuousClock.Instant) -> Timer? {
        guard let (timer, deadline) = entries.min(by: { $0.value < $1.value }), deadline <= now else { return nil }
        return timer
    }
}
