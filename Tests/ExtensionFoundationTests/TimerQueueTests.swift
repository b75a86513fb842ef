import ExtensionFoundation
import PlugindEngine
import TestSupport
import Testing

@Suite("Timer queue", .tags(.unit))
struct TimerQueueTests {
    @Test("timers fire in deadline order; cancelled ones never fire")
    func order() {
        var queue = TimerQueue<Int>()
        let start = ContinuousClock.now
        _ = queue.schedule(at: start + .seconds(3), 3)
        let cancelled = queue.schedule(at: start + .seconds(1), 1)
        _ = queue.schedule(at: start + .seconds(2), 2)
        queue.cancel(cancelled)
        #expect(queue.nextDeadline() == start + .seconds(2))
        #expect(queue.popDue(now: start + .seconds(5)) == [2, 3])
        #expect(queue.isEmpty)
    }

    @Test("a cancelled deadline still bounds the wait, so a later deadline needs no wake-up")
    func wakeBound() {
        var queue = TimerQueue<Int>()
        let start = ContinuousClock.now
        let first = queue.schedule(at: start + .seconds(30), 1)
        queue.cancel(first)
        // The loop may keep sleeping until the cancelled deadline…
        #expect(queue.wakeBound(now: start) == start + .seconds(30))
        // …which is earlier than the next request's, so that one need not wake it.
        _ = queue.schedule(at: start + .seconds(31), 2)
        #expect(queue.wakeBound(now: start) == start + .seconds(30))
        // An earlier live deadline wins; a passed cancelled one is forgotten.
        _ = queue.schedule(at: start + .seconds(5), 3)
        #expect(queue.wakeBound(now: start) == start + .seconds(5))
        #expect(queue.popDue(now: start + .seconds(5)) == [3])
        #expect(queue.wakeBound(now: start + .seconds(30)) == start + .seconds(31))
    }
}
