import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

/// How the host ends a worker, for each way a worker ends: the protocol's lifecycle and the
/// teardown it decides, as data (`WorkerChannel.tearDown` carries it out), without a process.
@Suite("Host protocol lifecycle and teardown, as data", .tags(.unit))
struct ChannelTeardownTests {
    /// The start of the clock the conversations' inputs are given at.
    let start = ContinuousClock.now

    func readyConversation() throws -> Conversation {
        var conversation = Conversation()
        conversation.clock = start
        try conversation.ready()
        return conversation
    }

    @Test("asked to stop: shutdown, end-of-file once written, the grace, then a kill; a worker that exits within it is not killed")
    func invalidated() throws {
        var conversation = try readyConversation()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.invalidate(grace: .seconds(2), now: start))
        #expect(conversation.teardowns == [[.sendShutdown, .closeInputWhenWritten, .wait(.seconds(2)), .kill]])
        #expect(failureCode(conversation.requests[id]) == .cancelled)
        #expect(conversation.machine.deadlines.entries == [.exitGrace: start + .seconds(2)])
        #expect(conversation.machine.lifecycle.isInvalidated && conversation.machine.lifecycle.isRunning)
        #expect(conversation.machine.lifecycle.ready != nil, "its answer to the handshake is kept")
        // Idempotent: a second invalidation decides nothing.
        conversation.apply(conversation.machine.invalidate(grace: .seconds(1), now: start))
        #expect(conversation.teardowns.count == 1)
        #expect(conversation.kills == 0)
        // The grace ends before the exit: the steps after the wait.
        conversation.apply(conversation.machine.expire(now: start + .seconds(2)))
        #expect(conversation.teardowns.last == [.kill])
        #expect(conversation.kills == 1)
        conversation.end(.signaled(signal: SignalNumber.kill, coreDumped: false))
        #expect(conversation.teardowns.last == [.release])
        #expect(conversation.machine.lifecycle.termination?.wasInvalidated == true)
        #expect(conversation.stops.isEmpty)

        // One that exits within the grace: released, and the grace's timer is gone with it.
        var quick = try readyConversation()
        quick.apply(quick.machine.invalidate(grace: .seconds(2), now: start))
        quick.end(.exited(status: 0))
        #expect(quick.teardowns == [[.sendShutdown, .closeInputWhenWritten, .wait(.seconds(2)), .kill], [.release]])
        #expect(quick.timers.isEmpty)
        quick.apply(quick.machine.timerFired(.exitGrace))
        #expect(quick.kills == 0)
    }

    @Test("crashed: nothing to send and nobody to kill; what it held is released, everything waiting fails with the crash")
    func crashed() throws {
        var conversation = try readyConversation()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        conversation.machine.reaped()
        #expect(!conversation.machine.lifecycle.isRunning)
        // Reaped: a stop changes nothing (a closed pipe's, say, while its crash's stack is named).
        conversation.apply(conversation.machine.stop(.closedChannel))
        conversation.end(.signaled(signal: 11, coreDumped: false))
        #expect(conversation.teardowns == [[.release]])
        #expect(failureCode(conversation.requests[id]) == .workerCrashed)
        let termination = try #require(conversation.machine.lifecycle.termination)
        #expect(termination.stopCause == nil && !termination.wasInvalidated)
        #expect(conversation.machine.lifecycle.ready != nil)
        // Ended: later requests learn the end, a stop and an invalidation decide nothing.
        #expect(throws: AppExtensionError.self) { try conversation.machine.reserveRequest(connection: 0, timeout: nil).get() }
        conversation.apply(conversation.machine.stop(.closedChannel))
        conversation.apply(conversation.machine.invalidate(grace: .seconds(1), now: start))
        #expect(conversation.teardowns == [[.release]])
        #expect(conversation.machine.lifecycle.isInvalidated, "an invalidation after the end is still told")
    }

    @Test("timed out: its waits for a processor read, then a kill at once; the first cause is the one kept")
    func timedOut() throws {
        var conversation = try readyConversation()
        let connection = try conversation.open()
        let id = try conversation.send([1], on: connection)
        conversation.apply(conversation.machine.timerFired(.deadline(id)))
        conversation.apply(conversation.machine.timerFired(.grace(id)))
        #expect(conversation.stops == [.unresponsive(requestID: id, after: .milliseconds(500))])
        #expect(conversation.teardowns == [[.readProcessorWait, .kill]])
        #expect(!conversation.machine.lifecycle.isRunning)
        // A violation read after it (its frames are no longer believed) stops nothing more.
        conversation.apply(conversation.machine.stop(.protocolViolation("late")))
        #expect(conversation.teardowns.count == 1)
        conversation.end(.signaled(signal: SignalNumber.kill, coreDumped: false))
        #expect(conversation.machine.lifecycle.termination?.stopCause == .unresponsive(requestID: id, after: .milliseconds(500)))
        #expect(conversation.teardowns.last == [.release])

        // A launch that does not answer in time.
        var silent = Conversation()
        silent.machine.awaitReady(timeout: .seconds(1), now: start)
        silent.apply(silent.machine.expire(now: start + .seconds(1)))
        #expect(silent.teardowns == [[.readProcessorWait, .kill]])
        silent.end(.signaled(signal: SignalNumber.kill, coreDumped: false))
        #expect(silent.machine.lifecycle.ready == nil)
        #expect(silent.machine.lifecycle.termination?.stopCause == .launchTimedOut(.seconds(1)))
    }

    @Test(
        "host shutting down: a worker still launching is asked to end as a ready one is, and its late ready is still taken; a failed loop names its cause"
    )
    func hostShuttingDown() throws {
        var launching = Conversation()
        launching.clock = start
        launching.machine.awaitReady(timeout: .seconds(10), now: start)
        launching.apply(launching.machine.invalidate(grace: .seconds(3), now: start))
        #expect(launching.teardowns == [[.sendShutdown, .closeInputWhenWritten, .wait(.seconds(3)), .kill]])
        try launching.ready()
        #expect(launching.readyCount == 1)
        #expect(launching.machine.lifecycle.ready != nil)
        #expect(launching.timers == [.exitGrace])
        guard case .failure(let refused) = launching.machine.reserveRequest(connection: 0, timeout: nil) else {
            Issue.record("an invalidated worker took a request")
            return
        }
        #expect(refused.code == .cancelled)

        var failedLoop = try readyConversation()
        failedLoop.apply(failedLoop.machine.stop(.hostFailure("the host's event loop failed")))
        #expect(failedLoop.teardowns == [[.kill]])
        #expect(failedLoop.machine.lifecycle.stopCause == .hostFailure("the host's event loop failed"))
    }

    @Test("disabled by the owner: a kill at once, even while it is asked to end; the cause names the end")
    func disabledByOwner() throws {
        var conversation = try readyConversation()
        conversation.apply(conversation.machine.stop(.disabledByOwner("the owner disabled it")))
        #expect(conversation.teardowns == [[.kill]])
        conversation.end(.signaled(signal: SignalNumber.kill, coreDumped: false))
        guard case .failure(let error) = conversation.machine.reserveRequest(connection: 0, timeout: nil) else {
            Issue.record("an ended worker took a request")
            return
        }
        #expect(error.code == .invalidated)

        // Asked to end, then disabled within the grace: killed at once.
        var ending = try readyConversation()
        ending.apply(ending.machine.invalidate(grace: .seconds(5), now: start))
        ending.apply(ending.machine.stop(.disabledByOwner("quarantined")))
        #expect(ending.teardowns.last == [.kill])
        #expect(ending.kills == 1)
        ending.end(.signaled(signal: SignalNumber.kill, coreDumped: false))
        let termination = try #require(ending.machine.lifecycle.termination)
        #expect(termination.stopCause == .disabledByOwner("quarantined") && termination.wasInvalidated)
        #expect(
            termination.error(plugin: "org.plugind.tests.machine", limits: ResourceLimits()).code == .disabledByOwner)
    }
}
