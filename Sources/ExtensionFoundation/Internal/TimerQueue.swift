/// Deadlines ordered by time (a binary min-heap), with cancellation by identifier.
struct TimerQueue<Action> {
    struct Entry {
        let deadline: ContinuousClock.Instant
        let identifier: UInt64
    }

    private var heap: [Entry] = []
    private var actions: [UInt64: Action] = [:]
    private var nextIdentifier: UInt64 = 1

    var isEmpty: Bool { actions.isEmpty }

    /// The earliest live deadline.
    mutating func nextDeadline() -> ContinuousClock.Instant? {
        dropCancelledHead()
        return heap.first?.deadline
    }

    mutating func schedule(at deadline: ContinuousClock.Instant, _ action: Action) -> UInt64 {
        let identifier = nextIdentifier
        nextIdentifier += 1
        actions[identifier] = action
        heap.append(Entry(deadline: deadline, identifier: identifier))
        siftUp(heap.count - 1)
        return identifier
    }

    /// Forgets a timer; its entry leaves the heap lazily.
    mutating func cancel(_ identifier: UInt64) {
        actions[identifier] = nil
    }

    /// Removes and returns the actions whose deadline is at or before `now`.
    mutating func popDue(now: ContinuousClock.Instant) -> [Action] {
        var due: [Action] = []
        while let first = heap.first, first.deadline <= now {
            removeHead()
            if let action = actions.removeValue(forKey: first.identifier) { due.append(action) }
        }
        return due
    }

    private mutating func dropCancelledHead() {
        while let first = heap.first, actions[first.identifier] == nil { removeHead() }
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
