import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Host protocol deadlines, as data", .tags(.unit))
struct ChannelProtocolDeadlineTests {
    @Test("deadlines are armed at now plus their duration; expire fires exactly those due, earliest first, and the next is known")
    func expireFiresWhatIsDue() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        let quick = try conversation.send([1], on: connection, timeout: .milliseconds(100))
        let slow = try conversation.send([2], on: connection, timeout: .seconds(2))
        let untimed = try conversation.send([3], on: connection, timeout: nil)
        #expect(
            conversation.machine.deadlines.entries == [.deadline(quick): start + .milliseconds(100), .deadline(slow): start + .seconds(2)])
        #expect(conversation.machine.nextDeadline == start + .milliseconds(100))
        _ = try conversation.sentToWorker()
        // Nothing is due before the first deadline.
        conversation.apply(conversation.machine.expire(now: start + .milliseconds(99)))
        #expect(conversation.requests.isEmpty)
        // At it, only the quick request fails; its grace is armed from then on.
        conversation.apply(conversation.machine.expire(now: start + .milliseconds(100)))
        #expect(failureCode(conversation.requests[quick]) == .timedOut)
        #expect(conversation.requests[slow] == nil && conversation.requests[untimed] == nil)
        #expect(conversation.machine.deadlines[.grace(quick)] == start + .milliseconds(600))
        #expect(conversation.machine.nextDeadline == start + .milliseconds(600))
        #expect(try conversation.sentToWorker() == [.cancel(id: quick)])
        // An answer disarms: the next deadline moves to the slow request's.
        try conversation.worker(.response(id: slow, bytes: [9]))
        try conversation.worker(.cancelled(id: quick))
        #expect(conversation.machine.nextDeadline == nil)
        #expect(conversation.stops.isEmpty)
    }

    @Test("a request sent long after the last input gets its whole timeout from when it is sent")
    func deadlineFromSendTime() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        // Ten seconds in which nothing happens, then a request with a one-second timeout.
        conversation.clock = start + .seconds(10)
        let late = try conversation.send([1], on: connection, timeout: .seconds(1))
        #expect(conversation.machine.deadlines[.deadline(late)] == start + .seconds(11))
        conversation.apply(conversation.machine.expire(now: start + .seconds(10) + .milliseconds(500)))
        #expect(conversation.requests[late] == nil)
    }

    @Test("two timers due at once fire in deadline order in one expire; a worker silent after its cancel is stopped")
    func severalDue() throws {
        var conversation = Conversation()
        let start = ContinuousClock.now
        conversation.clock = start
        try conversation.ready()
        let connection = try conversation.open()
        let first = try conversation.send([1], on: connection, timeout: .milliseconds(10))
        let second = try conversation.send([2], on: connection, timeout: .milliseconds(20))
        conversation.apply(conversation.machine.expire(now: start + .seconds(5)))
        // Both deadlines, then (armed at 5 s) no grace yet.
        #expect(failureCode(conversation.requests[first]) == .timedOut && failureCode(conversation.requests[second]) == .timedOut)
        #expect(conversation.stops.isEmpty)
        conversation.apply(conversation.machine.expire(now: start + .seconds(6)))
        #expect(
            conversation.stops == [
                .unresponsive(requestID: first, after: .milliseconds(500)), .unresponsive(requestID: second, after: .milliseconds(500)),
            ])
    }

    @Test(
        "the launch deadline stops a worker that never answers, and is disarmed by its ready; the shutdown grace kills one that does not exit"
    )
    func launchAndShutdown() throws {
        var silent = Conversation()
        let start = ContinuousClock.now
        silent.machine.awaitReady(timeout: .seconds(1), now: start)
        silent.apply(silent.machine.expire(now: start + .seconds(1)))
        #expect(silent.stops == [.launchTimedOut(.seconds(1))])

        var answering = Conversation()
        answering.machine.awaitReady(timeout: .seconds(1), now: start)
        try answering.ready()
        #expect(answering.timers.isEmpty)
        answering.apply(answering.machine.invalidate(grace: .seconds(2), now: start))
        #expect(answering.timers == [.exitGrace])
        answering.apply(answering.machine.expire(now: start + .seconds(1)))
        #expect(answering.kills == 0)
        answering.apply(answering.machine.expire(now: start + .seconds(2)))
        #expect(answering.kills == 1)
        #expect(answering.stops.isEmpty)
    }
}
