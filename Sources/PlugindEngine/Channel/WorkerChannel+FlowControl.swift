import PlugindSystem
import PlugindWire

/// The pipe to the worker: writing what the protocol queued, watching for room, and the budget of
/// frames the host holds for a worker that does not read them (past it, the host stops reading
/// from that worker). Loop thread, except `flush`.
extension WorkerChannel {
    /// Writes what is queued; when the pipe is full, the loop thread watches it for room.
    func flush() {
        switch writer.flush() {
        case .done, .busy, .waitingForRoom: break
        case .closed:
            loop.execute { [weak self] in self?.closeWriteEnd() }
        case .blocked:
            loop.execute { [weak self] in self?.watchWritable() }
        case .ringFull:
            // The worker says when it has read (`readFromWorker` then flushes).
            break
        case .violation(let reason):
            stop(.protocolViolation(reason))
        }
    }

    /// The most bytes of frames the host holds for one worker that has not read them (answers
    /// to its asks, cancels, requests waiting for room in the pipe). Past it the host stops
    /// reading from the worker until the worker has read down to half of it, so that nothing a
    /// worker sends makes the host hold more; a worker that reads nothing of it for the
    /// cancellation grace period is stopped (`unreadFrames`).
    static let heldFrameBudget = 8 << 20

    /// What one turn of the loop reads from a worker at most.
    static let readPerTurn = 1 << 20

    /// Loop thread only: stops reading from a worker that leaves more than the budget unread.
    func pauseReadingIfOverBudget() {
        guard writer.queuedBytes > Self.heldFrameBudget else { return }
        let paused = state.withLock { state -> Bool in
            guard !state.readingPaused, !state.machine.isEnded else { return false }
            state.readingPaused = true
            state.lastDrain = .now
            return true
        }
        guard paused else { return }
        // With the rings the pipe stays watched: it brings the worker's word that it read what
        // waits (`wakeHost`); its ring is not read meanwhile.
        if !writer.usesRing {
            do {
                try loop.modify(fromWorker, events: 0)
            } catch {
                stop(.hostFailure("cannot pause reading from the worker: \(error)"))
                return
            }
            watchWritable()
        }
        checkDrain(after: cancellationGracePeriod)
    }

    /// Stops the worker if it has read nothing of what waits for `cancellationGracePeriod`.
    func checkDrain(after delay: Duration) {
        _ = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            let grace = self.cancellationGracePeriod
            let idle: Duration? = self.state.withLock { state in state.readingPaused ? ContinuousClock.now - state.lastDrain : nil }
            guard let idle else { return }
            if idle >= grace {
                self.stop(.unreadFrames(bytes: self.writer.queuedBytes, after: grace))
            } else {
                self.checkDrain(after: grace - idle)
            }
        }
    }

    /// Loop thread only, after a flush: notes that the worker read some of what waits, and
    /// resumes reading once the queue is down to half the budget (however it got there: a flush
    /// on another thread may have emptied it).
    func noteDrained(from before: Int) {
        let now = writer.queuedBytes
        let resume = state.withLock { state -> Bool in
            guard state.readingPaused else { return false }
            if now < before { state.lastDrain = .now }
            guard now <= Self.heldFrameBudget / 2, !state.machine.isEnded else { return false }
            state.readingPaused = false
            return true
        }
        guard resume else { return }
        if writer.usesRing {
            // What the worker wrote meanwhile, whose wake-ups were taken.
            loop.execute { [weak self] in self?.readFromWorker() }
        } else if !input.isClosed {
            do {
                try loop.modify(fromWorker, events: Epoll.readable)
            } catch {
                stop(.hostFailure("cannot resume reading from the worker: \(error)"))
                return
            }
        }
        // Watched for room only while reading was paused: no longer, if nothing waits.
        watchWritable()
    }

    /// Loop thread only: watches the pipe for room while frames wait (and while reading is
    /// paused, so that the resumption is noticed), and stops watching when none do. When epoll
    /// refuses, nothing queued would ever be written: the worker is stopped.
    func watchWritable() {
        // With the rings, only frames for the pipe wait for its room, and the worker's wake-ups
        // tell of a paused reading's resumption (the pipe, carrying wake-ups, has room).
        let wanted = writer.waitsForPipe || (!writer.usesRing && state.withLock { $0.readingPaused })
        let change = state.withLock { state -> Bool in
            guard state.writeEnd != .closed, state.writeInterest != wanted else { return false }
            state.writeInterest = wanted
            return true
        }
        guard change else { return }
        do {
            try loop.modify(toWorker, events: wanted ? Epoll.writable : 0)
        } catch {
            writer.close()
            stop(.hostFailure("cannot watch the pipe to the worker: \(error)"))
        }
    }

    /// The pipe has room: write, and stop watching once nothing waits.
    func flushFromLoop() {
        let before = writer.queuedBytes
        defer { noteDrained(from: before) }
        switch writer.flush(roomAvailable: true) {
        case .closed: closeWriteEnd()
        case .violation(let reason): stop(.protocolViolation(reason))
        case .done, .blocked, .busy, .waitingForRoom, .ringFull: watchWritable()
        }
        if state.withLock({ $0.writeEnd == .closingWhenWritten }) { closeWhenWritten() }
    }

    /// A teardown's `closeInputWhenWritten`: closes the pipe once the shutdown left, so that the
    /// worker reads end-of-file after it.
    func closeWhenWritten() {
        if writer.isEmpty { closeWriteEnd() } else { watchWritable() }
    }

    /// Closes the descriptor to the worker, which reads end-of-file. Loop thread only.
    func closeWriteEnd() {
        writer.close()
        let close = state.withLock { state -> Bool in
            guard state.writeEnd != .closed else { return false }
            state.writeEnd = .closed
            return true
        }
        if close {
            loop.deregister(toWorker)
            toWorker.close()
        }
    }
}
