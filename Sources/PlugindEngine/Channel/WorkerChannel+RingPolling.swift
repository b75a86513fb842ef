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
    /// A typed call's caller runs the call's callbacks meanwhile, each in a task that starts on
    /// its thread (outside the reader turn, so a call the handler makes may read too); each one
    /// starts the window again, since a library that calls back is likely to call back again,
    /// and contention does not end the look (the processor it keeps is the call's). Whatever it
    /// leaves when it stops runs the usual way, each in a task of its own, which looks for the
    /// next callback in turn (`lookForCallbacks`).
    func lookForAnswer(_ id: UInt64, _ look: AnswerLook) {
        // One looker runs a call's callbacks; another (a callback's task that looks while the
        // caller still does) only looks for the answer.
        let runsCallbacks = state.withLock { state -> Bool in
            guard state.callbackHandlers[id] != nil, state.callbacksForPoller[id] == nil else { return false }
            state.callbacksForPoller[id] = []
            return true
        }
        defer {
            stopPolling(look.ring)
            if runsCallbacks {
                for left in state.withLock({ $0.callbacksForPoller.removeValue(forKey: id) }) ?? [] {
                    runHandler(left.handler, ask: left.ask, connection: 0, bytes: []) { [weak self] in self?.lookForCallbacks(of: id) }
                }
            }
        }
        var deadline = MonotonicInstant.after(BusyPolling.window)
        while true {
            let (waiting, callbacks) = state.withLock { state in
                (state.requests[id] != nil, runsCallbacks ? state.callbacksForPoller.updateValue([], forKey: id) ?? [] : [])
            }
            if !callbacks.isEmpty {
                for callback in callbacks { runHandler(callback.handler, ask: callback.ask, connection: 0, bytes: [], immediately: true) }
                deadline = .after(BusyPolling.window)
                continue
            }
            guard waiting, MonotonicInstant.now < deadline else { return }
            if input.ringHasInput, readRing(leavingBusyTurnToLoop: false) { continue }
            guard look.betweenLooks() || runsCallbacks else { return }
        }
    }

    /// After a callback of typed call `call` ran in a task of its own (its caller had stopped
    /// looking): that task looks for the call's next callback, or its answer, as the caller
    /// would, so that a library calling back many times pays one wake-up, not one per call.
    func lookForCallbacks(of call: UInt64) {
        guard state.withLock({ $0.requests[call] != nil && $0.callbacksForPoller[call] == nil }), let look = beginLookingForAnswer() else {
            return
        }
        lookForAnswer(call, look)
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
