import PlugindSystem
import PlugindWire
import Synchronization

/// Carrying out the protocol's decisions: `decide` runs an input on `ChannelProtocol` under the
/// lock and turns its effects into state changes and `Actions`, which run once the lock is
/// released (writes, resumes, the channel's one timer).
extension WorkerChannel {
    /// Runs `body` on the protocol under the lock, then carries out its effects without it.
    func decide(_ body: (inout ChannelProtocol) -> [ChannelProtocol.Effect]) {
        var actions = Actions()
        state.withLock { state in
            let effects = body(&state.machine)
            collect(effects, into: &actions, state: &state)
        }
        perform(actions)
    }

    /// What to do once the lock is released.
    struct Actions {
        var write = false
        var requests: [(ReplyWaiter, Result<WorkerReply, AppExtensionError>)] = []
        var connections: [(CheckedContinuation<Void, any Error>, Result<Void, AppExtensionError>)] = []
        var handshake: (CheckedContinuation<Ready, any Error>, Ready)?
        var askHandlers: [(UInt64, UInt32, [UInt8], RequestHandler?)] = []
        /// Callbacks, and asks whose handler may start on a caller, that came while nobody polled.
        var pendingAnswers: [PendingAnswer] = []
        var cancelledAsks: [Task<Void, Never>] = []
        var broadcasts: [(AppExtensionMessage, connection: UInt32?)] = []
        var subscribers: [(buffer: AppExtensionMessages.Buffer, connection: UInt32)] = []
        var stop: StopCause?
        var sharedResponses: [(UInt64, SharedMemoryLocation)] = []
        var sharedCallResults: [(UInt64, SharedMemoryLocation)] = []
        var stackRequests: [UInt64] = []
        /// The steps of ending the worker, in the order the protocol decided them.
        var teardown: [ChannelProtocol.TeardownStep] = []
        /// The channel's timer is set for this deadline, the one it was set for cancelled.
        var arm: ContinuousClock.Instant?
        var disarmedToken: UInt64?
        /// The worker switched to the rings: read its frames from this one from now on.
        var ringInput: SharedRingConsumer?
    }

    /// Turns effects into state changes (under the lock) and actions (for after it). Frames are
    /// queued here, so that they leave in the order decided; `requestFlags` mark the frame of a
    /// request or call among them (`start` passes `pollForNext`).
    func collect(
        _ effects: [ChannelProtocol.Effect], into actions: inout Actions, state: inout State, requestFlags: FrameFlags = []
    ) {
        for effect in effects {
            switch effect {
            case .send(let message):
                switch message {
                case .request, .sharedRequest, .call:
                    loop.traffic.add(1, ordering: .relaxed)
                    writer.enqueue(message, flags: requestFlags)
                case .openConnection, .nestedRequest, .answer, .askFailed:
                    loop.traffic.add(1, ordering: .relaxed)
                    writer.enqueue(message)
                default:
                    writer.enqueue(message)
                }
                actions.write = true
            case .completeRequest(let id, let result):
                loop.traffic.add(1, ordering: .relaxed)
                state.sharedRequests?.release(id)
                if let waiter = state.requests.removeValue(forKey: id) {
                    loop.awaitedAnswers.subtract(1, ordering: .relaxed)
                    actions.requests.append((waiter, result))
                    if case .success = result { activity?.requestEnded(succeeded: true) } else { activity?.requestEnded(succeeded: false) }
                }
            case .completeConnection(let id, let result):
                loop.traffic.add(1, ordering: .relaxed)
                if case .failure = result {
                    state.handlers[id] = nil
                    state.handlersStartingOnCaller.remove(id)
                }
                if let continuation = state.connections.removeValue(forKey: id) { actions.connections.append((continuation, result)) }
            case .handshakeDone(let ready):
                activity?.ready()
                state.workerPollsForNext = ready.features.contains(ProtocolFeature.busyPolling)
                if let offered = state.sharedMemoryOffered, ready.features.contains(ProtocolFeature.sharedMemory) {
                    state.sharedRequests = SharedRequestRegion(memory: offered.memory, layout: offered.layout)
                    if ready.features.contains(ProtocolFeature.ring) {
                        // Queued under the lock: every frame decided after this one goes into the ring.
                        writer.switchToRing(SharedRingProducer(memory: offered.memory, layout: SharedMemoryLayout.toWorkerRing))
                        actions.write = true
                        actions.ringInput = SharedRingConsumer(memory: offered.memory, layout: SharedMemoryLayout.toHostRing)
                    }
                }
                state.sharedMemoryOffered = nil
                if let continuation = state.handshake {
                    state.handshake = nil
                    actions.handshake = (continuation, ready)
                }
            case .runAskHandler(let connection, let ask, let bytes):
                let handler = state.handlers[connection]
                guard let handler, state.handlersStartingOnCaller.contains(connection) else {
                    actions.askHandlers.append((ask, connection, bytes, handler))
                    break
                }
                // The caller of the request it serves polls: it runs the handler, with no thread
                // woken for it. Its task, otherwise, looks for the next ask as that caller would.
                let pending = PendingAnswer(ask: ask, source: .connection(connection), bytes: bytes, handler: handler)
                if state.asksForPoller[connection]?.append(pending) == nil { actions.pendingAnswers.append(pending) }
            case .runCallbackHandler(let call, let ask, let parameter, let arguments):
                let handler = state.callbackHandlers[call]
                let answer: RequestHandler = { _ in
                    guard let handler else { throw CallbackWithoutHandler(parameter: parameter) }
                    var writer = PayloadWriter()
                    writer.write(try await handler(parameter, arguments))
                    return writer.bytes
                }
                // The call's caller polls for its answer: it runs the callback, as the library's
                // caller would in process, with no thread woken for it.
                let pending = PendingAnswer(ask: ask, source: .call(call), bytes: [], handler: answer)
                if state.callbacksForPoller[call]?.append(pending) == nil { actions.pendingAnswers.append(pending) }
            case .cancelAskHandler(let ask):
                if let task = state.askTasks.removeValue(forKey: ask) { actions.cancelledAsks.append(task) }
            case .broadcast(let message, let connection):
                actions.broadcasts.append((message, connection))
            case .stop(let cause):
                if actions.stop == nil { actions.stop = cause }
            case .tearDown(let steps):
                actions.teardown += steps
            case .captureStack(let id):
                actions.stackRequests.append(id)
            case .sharedResponse(let id, let location):
                actions.sharedResponses.append((id, location))
            case .sharedCallResult(let id, let location):
                actions.sharedCallResults.append((id, location))
            }
        }
        if !actions.broadcasts.isEmpty { actions.subscribers = Array(state.subscribers.values) }
        // Only an earlier deadline moves the timer: one that fires for a deadline disarmed since
        // costs one look, whereas moving it at every request would cost a schedule each.
        if !state.machine.isEnded, let next = state.machine.nextDeadline, state.armedDeadline.map({ next < $0 }) ?? true {
            state.armedDeadline = next
            actions.arm = next
            actions.disarmedToken = state.armedToken
            state.armedToken = nil
        }
    }

    func perform(_ actions: Actions) {
        if let ring = actions.ringInput {
            input.useRing(ring)
            // What the worker wrote into the ring since its `ready`, whose wake-up may have been
            // read before the switch.
            loop.execute { [weak self] in self?.readFromWorker() }
        }
        if actions.write { flush() }
        tearDown(actions.teardown)
        if let token = actions.disarmedToken { loop.cancelTimer(token) }
        if let deadline = actions.arm { arm(at: deadline) }
        if let (continuation, ready) = actions.handshake { continuation.resume(returning: ready) }
        for (waiter, result) in actions.requests {
            // A timed-out request's stack is named first, off this thread.
            if case .failure(let failure) = result, failure.unsymbolizedStack != nil {
                StackSymbolizer.resolve(failure, files: stackObjects ?? .none) {
                    waiter.resume(with: .failure($0))
                }
            } else {
                waiter.resume(with: result)
            }
        }
        for (continuation, result) in actions.connections { continuation.resume(with: result.mapError { $0 as any Error }) }
        for task in actions.cancelledAsks { task.cancel() }
        for (ask, connection, bytes, handler) in actions.askHandlers { runHandler(handler, ask: ask, connection: connection, bytes: bytes) }
        for pending in actions.pendingAnswers { runThenLook(pending) }
        for (message, connection) in actions.broadcasts {
            recordForOwner(message)
            for subscriber in actions.subscribers where connection == nil || subscriber.connection == connection {
                subscriber.buffer.yield(message)
            }
        }
        for (id, location) in actions.sharedResponses {
            let bytes = readSharedResponse(at: location)
            decide { $0.complete(sharedResponse: id, bytes: bytes) }
        }
        for (id, location) in actions.sharedCallResults {
            // Read and decoded before the lock: a large result is a large copy.
            let decoded = ChannelProtocol.decodeSharedCallResult(readSharedResponse(at: location))
            decide { $0.complete(sharedCallResult: id, decoded: decoded) }
        }
        // A worker that cannot be signalled leaves the request to fail when the wait ends.
        for id in actions.stackRequests { process.requestStack(of: id) }
        if let cause = actions.stop { stop(cause) }
    }

    /// Carries out the steps of ending the worker, in order. A `wait` ends the list here: the
    /// protocol's timer runs the steps after it, unless the worker is reaped first.
    func tearDown(_ steps: [ChannelProtocol.TeardownStep]) {
        for step in steps {
            switch step {
            case .sendShutdown:
                writer.enqueue(.shutdown)
                flush()
            case .closeInputWhenWritten:
                state.withLock { if $0.writeEnd == .open { $0.writeEnd = .closingWhenWritten } }
                loop.execute { [weak self] in self?.closeWhenWritten() }
            case .wait:
                return
            case .readProcessorWait:
                if let wait = ProcessorWait.read(processIdentifier: processIdentifier) { state.withLock { $0.processorWait = wait } }
            case .kill:
                kill()
            case .release:
                release()
            }
        }
    }

    /// Lets go of what the reaped worker held: the pipes (the one to it unless it was closed
    /// already), its pidfd and its control group. Loop thread.
    private func release() {
        writer.close()
        process.close()
        let writeEndOpen = state.withLock { state -> Bool in
            defer { state.writeEnd = .closed }
            return state.writeEnd != .closed
        }
        var descriptors = [fromWorker, diagnostics]
        if writeEndOpen { descriptors.append(toWorker) }
        for descriptor in descriptors {
            loop.deregister(descriptor)
            descriptor.close()
        }
    }

    /// A log line or a refusal of the sandbox goes to the owner's log too.
    private func recordForOwner(_ message: AppExtensionMessage) {
        guard let activity else { return }
        switch message {
        case .log(let level, let text): activity.logged(level, text)
        case .sandboxRefusal(let refusal): activity.record(.refusal, priority: 4, refusal.description)
        default: break
        }
    }

    /// Sets the channel's timer for `deadline` (scheduling may wake the loop: a system call, so
    /// not under the lock), unless an earlier deadline took its place meanwhile. When it fires,
    /// the protocol's due timers fire, and the next deadline sets it again.
    func arm(at deadline: ContinuousClock.Instant) {
        let token = loop.schedule(at: deadline) { [weak self] in
            guard let self else { return }
            self.state.withLock { state in
                guard state.armedDeadline == deadline else { return }
                state.armedDeadline = nil
                state.armedToken = nil
            }
            self.decide { $0.expire(now: .now) }
        }
        let kept = state.withLock { state -> Bool in
            guard state.armedDeadline == deadline, !state.machine.isEnded else { return false }
            state.armedToken = token
            return true
        }
        if !kept { loop.cancelTimer(token) }
    }
}
