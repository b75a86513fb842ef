/// When each of a state machine's armed timers fires, and which is next: timers as data, so that
/// the machine needs no clock of its own and its owner one loop timer. The earliest is kept as
/// timers are armed, and found again only after it was disarmed. Timers due at the same instant
/// fire in the order they were armed.
struct Deadlines<Timer: Hashable> {
    private struct Entry {
        var deadline: ContinuousClock.Instant
        /// The order of arming, for timers due at the same instant.
        var sequence: UInt64
    }

    private var armed: [Timer: Entry] = [:]
    private var nextSequence: UInt64 = 0
    private var earliest: ContinuousClock.Instant?
    private var earliestKnown = true

    /// Every armed timer with its deadline.
    var entries: [Timer: ContinuousClock.Instant] { armed.mapValues(\.deadline) }

    subscript(timer: Timer) -> ContinuousClock.Instant? { armed[timer]?.deadline }

    mutating func arm(_ timer: Timer, at deadline: ContinuousClock.Instant) {
        armed[timer] = Entry(deadline: deadline, sequence: nextSequence)
        nextSequence += 1
        if earliestKnown, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
    }

    mutating func disarm(_ timer: Timer) {
        guard let entry = armed.removeValue(forKey: timer) else { return }
        if entry.deadline == earliest { earliestKnown = false }
    }

    mutating func removeAll() {
        armed.removeAll()
        earliest = nil
        earliestKnown = true
    }

    /// The earliest deadline; nil when nothing is armed.
    var next: ContinuousClock.Instant? {
        mutating get {
            if !earliestKnown {
                // A plain loop: no array, and no key path, on this path of every request.
                var found: ContinuousClock.Instant?
                for entry in armed.values where found.map({ entry.deadline < $0 }) ?? true { found = entry.deadline }
                earliest = found
                earliestKnown = true
            }
            return earliest
        }
    }

    /// The timer due first at `now`, if any is due.
    func firstDue(at now: ContinuousClock.Instant) -> Timer? {
        var first: (timer: Timer, entry: Entry)?
        for (timer, entry) in armed where entry.deadline <= now {
            if let current = first?.entry,
                current.deadline < entry.deadline || (current.deadline == entry.deadline && current.sequence < entry.sequence)
            {
                continue
            }
            first = (timer, entry)
        }
        return first?.timer
    }
}
