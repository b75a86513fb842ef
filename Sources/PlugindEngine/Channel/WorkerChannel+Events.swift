import PlugindSystem
import PlugindWire

/// The event loop's side of a channel: what the worker sent (frames, output), its exit, and the
/// end of everything waiting once it is reaped. Loop thread.
extension WorkerChannel {
    func handleEvent(descriptor: Int32, events: UInt32) {
        switch descriptor {
        case fromWorker.rawValue: readFromWorker()
        case diagnostics.rawValue: readDiagnostics()
        case toWorker.rawValue:
            if events & (Epoll.error | Epoll.hangUp) != 0 {
                closeWriteEnd()
            } else {
                flushFromLoop()
            }
        case process.descriptor.rawValue: processExited()
        default: break
        }
    }

    /// Reads a batch with `read` and dispatches its frames, under the reader turn: every reader
    /// (the loop's thread, a caller waiting for the handshake or polling the ring for its answer)
    /// dispatches what it read before another reads more, so frames are taken in their order.
    func readAndDispatch(_ read: () -> WorkerInput.Batch) -> WorkerInput.Batch {
        readerTurn.withLock { _ in dispatchAll(read()) }
    }

    /// `readAndDispatch` when no other reader is at it; nil otherwise.
    func readAndDispatchIfNoOtherReader(_ read: () -> WorkerInput.Batch) -> WorkerInput.Batch? {
        readerTurn.withLockIfAvailable { _ in dispatchAll(read()) }
    }

    private func dispatchAll(_ batch: WorkerInput.Batch) -> WorkerInput.Batch {
        // After a violation nothing more from this worker is believed, not even a later answer.
        for frame in batch.frames where state.withLock({ $0.machine.lifecycle.isRunning }) { dispatch(frame) }
        return batch
    }

    func readFromWorker() {
        let batch = readAndDispatch { input.read(budget: Self.readPerTurn, ring: !state.withLock { $0.readingPaused }) }
        // The worker may have read what waited for room in its ring.
        if batch.woken, !writer.isEmpty { flushFromLoop() }
        pauseReadingIfOverBudget()
        // What is left in the ring brings no wake-up of its own (the worker may be waiting for
        // room): another turn reads it, unless reading is paused.
        if input.ringHasInput, batch.violation == nil, !state.withLock({ $0.readingPaused }) {
            loop.execute { [weak self] in self?.readFromWorker() }
        }
        if let violation = batch.violation {
            stop(.protocolViolation(violation.description))
        }
        if batch.endOfStream {
            loop.deregister(fromWorker)
            // The worker closes this pipe when it exits, just before its pidfd reports the exit.
            // If it is still alive a moment later, it closed the pipe itself and cannot answer.
            loop.schedule(after: .milliseconds(500)) { [weak self] in
                guard let self, !self.isTerminated else { return }
                self.stop(.closedChannel)
            }
        }
    }

    func dispatch(_ frame: Frame) {
        let message: WorkerMessage
        do {
            message = try WorkerMessage(frame)
        } catch {
            stop(.protocolViolation(error.description))
            return
        }
        decide { $0.receive(message) }
    }

    func readDiagnostics() {
        let closed = input.readOutput { bytes in state.withLock { $0.output.append(bytes) } }
        if closed { loop.deregister(diagnostics) }
    }

    func processExited() {
        // Take what the worker wrote before it died: final answers and its fatal-signal report.
        readFromWorker()
        readDiagnostics()
        guard let exit = process.reap() else { return }
        // A crash's stack is named before anyone hears of the end: off the loop's thread, then
        // back on it.
        if let stack = state.withLock({ $0.machine.fatalStack }), let objects = stackObjects {
            // Reaped: its pidfd stays readable, and must not report the exit again meanwhile; and
            // no stop (the closed pipe's, above) may rename its end meanwhile.
            loop.deregister(process.descriptor)
            state.withLock { $0.machine.reaped() }
            let loop = self.loop
            StackSymbolizer.resolveFrames(of: stack, files: objects) { [weak self] frames in
                loop.execute { [weak self] in self?.finish(exit, backtrace: frames) }
            }
            return
        }
        finish(
            exit, backtrace: state.withLock { $0.machine.fatalStack }.map { StackSymbolizer.frames(of: $0, files: .none) } ?? [])
    }

    func finish(_ exit: ProcessExit, backtrace: [AppExtensionError.StackFrame] = []) {
        var actions = Actions()
        var handshake: CheckedContinuation<Ready, any Error>?
        var subscribers: [(buffer: AppExtensionMessages.Buffer, connection: UInt32)] = []
        var waiters: [CheckedContinuation<WorkerTermination, Never>] = []
        var interruption: (@Sendable () -> Void)?
        var observer: (@Sendable (WorkerTermination) -> Void)?
        // Read before the lock: a file of the kernel's.
        let hitMemoryLimit = process.hitMemoryLimit
        let termination: WorkerTermination? = state.withLock { state in
            guard !state.machine.isEnded else { return nil }
            let lifecycle = state.machine.lifecycle
            var termination = WorkerTermination(
                exit: exit,
                fatalReport: state.machine.fatalReport,
                stopCause: lifecycle.stopCause,
                loadFailure: state.machine.loadFailure,
                output: state.output.text,
                wasInvalidated: lifecycle.isInvalidated
            )
            termination.cgroupHitMemoryLimit = hitMemoryLimit
            termination.backtrace = backtrace
            termination.refusals = state.machine.refusals
            termination.lastRefusal = state.machine.lastRefusal.map(AppExtensionMessage.SandboxRefusal.init)
            termination.processorWait = state.processorWait
            handshake = state.handshake
            state.handshake = nil
            collect(
                state.machine.ended(termination, failure: termination.error(plugin: pluginIdentifier, limits: limits)), into: &actions,
                state: &state)
            if let token = state.armedToken { loop.cancelTimer(token) }
            state.armedToken = nil
            state.armedDeadline = nil
            subscribers = Array(state.subscribers.values)
            state.subscribers.removeAll()
            waiters = state.terminationWaiters
            state.terminationWaiters.removeAll()
            if !lifecycle.isInvalidated && lifecycle.ready != nil { interruption = state.interruptionHandler }
            state.interruptionHandler = nil
            observer = state.terminationObserver
            state.terminationObserver = nil
            state.handlers.removeAll()
            // Unmapped here rather than with the channel, which the caller may keep long after.
            state.sharedRequests = nil
            state.sharedMemoryOffered = nil
            return termination
        }
        guard let termination else { return }
        // What the worker held is let go before anyone hears of its end.
        tearDown(actions.teardown)
        actions.teardown = []
        actions.write = false

        activity?.ended()
        observer?(termination)
        handshake?.resume(throwing: termination.launchError(plugin: pluginIdentifier, limits: limits))
        perform(actions)
        for subscriber in subscribers { subscriber.buffer.finish() }
        for waiter in waiters { waiter.resume(returning: termination) }
        if let interruption {
            Task.detached { interruption() }
        }
    }

    /// Copies a response out of the worker's region and tells the worker it may reuse it. Loop
    /// thread only. Nil when the location is not inside the region, the message is over the
    /// limit, or shared memory was never agreed.
    func readSharedResponse(at location: SharedMemoryLocation) -> [UInt8]? {
        guard let sharedMemory = state.withLock({ state in state.sharedRequests.map { (memory: $0.memory, layout: $0.layout) } }),
            let range = location.range(inRegionOf: sharedMemory.layout.regionSize), UInt64(range.count) <= limits.maxMessageBytes,
            let bytes = sharedMemory.memory.copyBytes(at: sharedMemory.layout.toHostOffset + range.lowerBound, count: range.count)
        else { return nil }
        let read = state.withLock { state in
            state.sharedResponsesRead += 1
            return state.sharedResponsesRead
        }
        sharedMemory.memory.storeCounter(read, at: SharedMemoryLayout.consumedResponsesOffset)
        return bytes
    }

    /// The loop gave up: nothing will be read or written any more. The worker is killed and
    /// reaped here, and everyone waiting learns why.
    func loopFailed(_ error: SystemError) {
        let first = state.withLock { state -> Bool in
            guard !state.machine.isEnded else { return false }
            // The cause is named; its teardown's kill is `killAndWait`'s below, which waits for the
            // exit no loop is left to report.
            _ = state.machine.stop(.hostFailure("the host's event loop failed: \(error)"))
            return true
        }
        guard first else { return }
        finish(process.killAndWait())
    }
}
