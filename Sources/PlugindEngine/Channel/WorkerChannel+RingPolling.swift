import PlugindSystem
import PlugindWire
import Synchronization

/// A caller that expects its answer within microseconds polls the ring for it on its own thread,
/// for at most `BusyPolling.window`, instead of waiting for the loop's thread to read it and
/// wake the caller: on a small virtual machine each of those wake-ups costs tens of
/// microseconds, many times what a small request costs. While any caller polls, the ring says
/// so and the worker writes no wake-up to the pipe. Where the process may run on more than one
/// processor it polls (`BusyPolling`); on one, it yields the processor between looks
/// (`BusyPolling.yieldsToPeer`); and only a caller alone (`WorkerEventLoop.callerIsAlone`):
/// a polling caller holds its thread, and tasks queued behind it wait. Were it allowed whenever
/// no more than one answer is awaited, a load of many tasks over a few workers would run two
/// requests at a time, each caller polling while the other tasks wait for a thread, and lose
/// both throughput and tail latency.
extension WorkerChannel {
    /// How long one caller must have been alone before it polls.
    static let aloneBeforePolling: Duration = .milliseconds(1)

    /// A caller's look at the ring for its answer.
    struct AnswerLook {
        let ring: SharedRingConsumer
        /// Between two looks (it yields the processor): false when the caller should stop looking
        /// and sleep.
        let betweenLooks: () -> Bool
    }

    /// Before sending a request: whether its caller will look for the answer, and if so the ring
    /// says so already, so that a worker that answers before the caller looks (on one processor
    /// it runs as soon as the request wakes it) writes no wake-up for the loop's thread. On a
    /// process confined to one processor the caller yields it between looks
    /// (`BusyPolling.yieldsToPeer`).
    func beginLookingForAnswer() -> AnswerLook? {
        let betweenLooks: () -> Bool
        if BusyPolling.isWorthwhile {
            betweenLooks = BusyPolling.yieldUncontended
        } else if BusyPolling.yieldsToPeer {
            betweenLooks = BusyPolling.yieldAndKeepLooking
        } else {
            return nil
        }
        guard !loop.isOnLoopThread, let ring = input.ring, loop.callerIsAlone(for: Self.aloneBeforePolling) else { return nil }
        if ringPollers.add(1, ordering: .sequentiallyConsistent).newValue == 1 { ring.setPolling(true) }
        loop.callersPolling.add(1, ordering: .relaxed)
        return AnswerLook(ring: ring, betweenLooks: betweenLooks)
    }

    /// After sending request `id`: looks for its answer, reading and dispatching what arrives.
    /// Returns when it is answered, when the window ends, or when `betweenLooks` says to stop
    /// (with more than one processor: they are wanted elsewhere); the answer then comes the usual
    /// way. The window bounds every turn, those that read too: a worker that keeps writing (a
    /// stream of events), a read the reader turn or a paused reading holds off, must not keep a
    /// caller's thread past it.
    ///
    /// Meanwhile the caller runs what the call or the request waits for: a typed call's callbacks,
    /// and the plugin's asks on a connection whose handler may start on the caller
    /// (`openConnection(handler:timeout:startsOnCaller:)`), each in a task that starts on its
    /// thread (outside the reader turn, so that a call the handler makes may read too). Each one
    /// starts the window again, since what asks or calls back is likely to do it again. A yield
    /// that gave the processor away ends the look as it ends any other (two typed calls calling
    /// back at once on two processors were slower when it did not). What it leaves when it stops
    /// runs the usual way, each in a task of its own, which then looks for the next one in turn
    /// (`lookForCallbacks`, `lookForAsks`).
    func lookForAnswer(_ id: UInt64, connection: UInt32, _ look: AnswerLook) {
        // One looker runs a call's callbacks or a connection's asks; another (a handler's task
        // that looks while the caller still does) only looks for the answer.
        let (runsCallbacks, runsAsks) = state.withLock { state -> (Bool, Bool) in
            var callbacks = false
            var asks = false
            if state.callbackHandlers[id] != nil, state.callbacksForPoller[id] == nil {
                state.callbacksForPoller[id] = []
                callbacks = true
            }
            if connection != 0, state.handlersStartingOnCaller.contains(connection), state.asksForPoller[connection] == nil {
                state.asksForPoller[connection] = []
                asks = true
            }
            return (callbacks, asks)
        }
        defer {
            stopPolling(look.ring)
            let left = state.withLock { state in
                (runsCallbacks ? state.callbacksForPoller.removeValue(forKey: id) ?? [] : [])
                    + (runsAsks ? state.asksForPoller.removeValue(forKey: connection) ?? [] : [])
            }
            for pending in left { runThenLook(pending) }
        }
        var deadline = MonotonicInstant.after(BusyPolling.window)
        while true {
            let (waiting, queued) = state.withLock { state in
                (
                    state.requests[id] != nil,
                    (runsCallbacks ? state.callbacksForPoller.updateValue([], forKey: id) ?? [] : [])
                        + (runsAsks ? state.asksForPoller.updateValue([], forKey: connection) ?? [] : [])
                )
            }
            if !queued.isEmpty {
                for pending in queued { runHere(pending) }
                deadline = .after(BusyPolling.window)
                continue
            }
            guard waiting, MonotonicInstant.now < deadline else { return }
            if input.ringHasInput, readRing(leavingBusyTurnToLoop: false) { continue }
            guard look.betweenLooks() else { return }
        }
    }

    /// After a callback of typed call `call` ran in a task of its own (its caller had stopped
    /// looking): that task looks for the call's next callback, or its answer, as the caller
    /// would, so that a library calling back many times pays one wake-up, not one per call.
    func lookForCallbacks(of call: UInt64) {
        guard state.withLock({ $0.requests[call] != nil && $0.callbacksForPoller[call] == nil }), let look = beginLookingForAnswer() else {
            return
        }
        lookForAnswer(call, connection: 0, look)
    }

    /// After an ask on `connection` ran in a task of its own: while one request on it is awaited,
    /// that task looks for the plugin's next ask, or the request's answer, as its caller would.
    func lookForAsks(on connection: UInt32) {
        guard
            let request = state.withLock({ state in
                state.asksForPoller[connection] == nil ? state.machine.onlyRequest(on: connection) : nil
            }), let look = beginLookingForAnswer()
        else { return }
        lookForAnswer(request, connection: connection, look)
    }

    /// The last poller stops: the ring says so, and whatever the worker wrote while it said
    /// otherwise (with no wake-up) is read now.
    private func stopPolling(_ ring: SharedRingConsumer) {
        loop.callersPolling.subtract(1, ordering: .relaxed)
        guard ringPollers.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 else { return }
        ring.setPolling(false)
        SharedMemory.fence()
        if input.ringHasInput { readRing(leavingBusyTurnToLoop: true) }
    }

    /// Reads the ring and dispatches its frames when no other reader is at it. Another reader may
    /// have looked at the ring before these bytes arrived: with `leavingBusyTurnToLoop`, the loop
    /// then reads once more. True when bytes were read.
    @discardableResult
    private func readRing(leavingBusyTurnToLoop: Bool) -> Bool {
        let batch = readAndDispatchIfNoOtherReader {
            // Not while the host holds too much for the worker: the loop reads again once it can.
            input.read(budget: SharedMemoryLayout.ringSize, pipe: false, ring: !state.withLock { $0.readingPaused })
        }
        switch batch.map(\.violation) {
        case .none:
            if leavingBusyTurnToLoop { loop.execute { [weak self] in self?.readFromWorker() } }
        case .some(.some(let error)):
            stop(.protocolViolation(error.description))
        case .some(.none):
            break
        }
        return batch?.received == true && batch?.violation == nil
    }
}
