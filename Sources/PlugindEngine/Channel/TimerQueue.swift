/// Deadlines ordered by time (a binary min-heap), with cancellation by identifier.
package struct TimerQueue<Action> {
    package init() {}

    struct Entry {
        let deadline: ContinuousClock.Instant
        let identifier: UInt64
    }

    private var heap: [Entry] = []
    private var actions: [UInt64: Action] = [:]
    private var nextIdentifier: UInt64 = 1
    /// The latest deadline of a cancelled timer dropped from the heap: a wake-up the loop may
    /// still plan for, so that a new, later deadline does not need to wake it (see `wakeBound`).
    private var latestDroppedDeadline: ContinuousClock.Instant?

    package var isEmpty: Bool { actions.isEmpty }

    /// The earliest live deadline.
    package mutating func nextDeadline() -> ContinuousClock.Instant? {
        dropCancelledHead()
        return heap.first?.deadline
    }

    /// When a loop serving this queue should wake at the latest: the earliest live deadline, or
    /// failing that the deadline of a recently cancelled timer that is still ahead. Waking for a
    /// cancelled timer costs one spurious wake-up; in exchange, requests that each schedule a
    /// deadline later than the previous one's (the usual case) never have to interrupt the wait.
    package mutating func wakeBound(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        if let dropped = latestDroppedDeadline, dropped <= now { latestDroppedDeadline = nil }
        guard let live = nextDeadline() else { return latestDroppedDeadline }
        return latestDroppedDeadline.map { min($0, live) } ?? live
    }

    package mutating func schedule(at deadline: ContinuousClock.Instant, _ action: Action) -> UInt64 {
        let identifier = nextIdentifier
        nextIdentifier += 1
        actions[identifier] = action
        heap.append(Entry(deadline: deadline, identifier: identifier))
        siftUp(heap.count - 1)
        return identifier
    }

    /// Forgets a timer; its entry leaves the heap lazily.
    package mutating func cancel(_ identifier: UInt64) {
        actions[identifier] = nil
    }

    /// Removes and returns the actions whose deadline is at or before `now`.
    package mutating func popDue(now: ContinuousClock.Instant) -> [Action] {
        var due: [Action] = []
        while let first = heap.first, first.deadline <= now {
            removeHead()
            if let action = actions.removeValue(forKey: first.identifier) { due.append(action) }
        }
        return due
    }

    private mutating func dropCancelledHead() {
        while let first = heap.first, actions[first.identifier] == nil {
            latestDroppedDeadline = max(latestDroppedDeadline ?? first.deadline, first.deadline)
            removeHead()
        }
    }

    private mutating func removeHead() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
