import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire

/// The pool's launcher processes (the idle one, those asked, those let go) and what the loop
/// thread reads from them and the mount table.
extension LaunchPool {
    // MARK: Launchers

    /// Starts a launcher process, watched by this pool. On the loop thread.
    func startLauncher() throws(SystemError) -> LauncherProcess {
        let launcher = try LauncherProcess.start(executable: executable, image: image, environment: environment, loop: loop, handler: self)
        state.withLock { _ = $0.open.insert(launcher.serial) }
        return launcher
    }

    /// The launcher for the next request, on the loop thread: the idle one, or one made now. With
    /// `Forks.one` the next idle one is made a moment later, so that its exec does not compete
    /// with the launch.
    func takeLauncher() throws(SystemError) -> LauncherProcess {
        if forks == .many {
            if let idle = state.withLock({ $0.idle }) { return idle }
            let made = try startLauncher()
            // The pool may have stopped meanwhile: then the launcher is ended, not kept.
            let kept = state.withLock { state -> LauncherProcess? in
                guard !state.stopped else { return nil }
                state.idle = state.idle ?? made
                return state.idle
            }
            if kept != made { retire(made) }
            guard let kept else { throw SystemError("launcher", .noSuchProcess) }
            return kept
        }
        let idle = state.withLock { state -> LauncherProcess? in
            defer { state.idle = nil }
            return state.idle
        }
        defer { makeIdleLauncherLater() }
        if let idle { return idle }
        return try startLauncher()
    }

    func makeIdleLauncherLater() {
        let scheduled = state.withLock { state -> Bool in
            guard !state.stopped, state.idle == nil, !state.makingIdle else { return false }
            state.makingIdle = true
            return true
        }
        guard scheduled else { return }
        _ = loop.schedule(after: Self.replenishDelay) { [weak self] in self?.makeIdleLauncher() }
    }

    func makeIdleLauncher() {
        // A pool stopped meanwhile (a private one, after its one launch) needs none.
        guard !isStopped else {
            state.withLock { $0.makingIdle = false }
            return
        }
        let made = try? startLauncher()
        let unneeded = state.withLock { state -> LauncherProcess? in
            state.makingIdle = false
            guard let made, !state.stopped, state.idle == nil else { return made }
            state.idle = made
            return nil
        }
        if let unneeded { retire(unneeded) }
        resumeSettledWaiters()
    }

    /// After a launcher's request, answered or not: one that forks a single child is let go.
    func finished(with launcher: LauncherProcess) {
        if forks == .one { retire(launcher) }
    }

    /// Lets a launcher go: its socket closed, it ends; its pidfd stays watched until it is reaped.
    /// On the loop thread.
    func retire(_ launcher: LauncherProcess) {
        guard
            state.withLock({ state in
                state.ready.remove(launcher.serial)
                return state.open.remove(launcher.serial) != nil
            })
        else { return }
        loop.deregister(launcher.socket)
        launcher.socket.close()
        let kept = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.retired[launcher.process.processDescriptor.rawValue] = launcher
            return true
        }
        if !kept {
            loop.deregister(launcher.process.processDescriptor)
            launcher.process.processDescriptor.killAndReap()
        }
    }

    /// Sends request `id` to `launcher` and records it, so that the answer (or the launcher's
    /// end) is matched to it; the error when it could not be sent or the pool stopped
    /// (`LauncherLost` when the launcher had gone: the request never reached it). Whoever waits
    /// for a request to that launcher (`awaitRequest`) hears of it.
    func ask(_ launcher: LauncherProcess, request id: UInt32, options: SpawnRequest.Options, descriptors: [CInt], cgroupFiles: [String])
        -> (any Error)?
    {
        let recorded = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.busy[id] = launcher
            return true
        }
        guard recorded else { return SystemError("launcher", .noSuchProcess) }
        guard let error = launcher.send(id, options: options, descriptors: descriptors, cgroupFiles: cgroupFiles) else {
            let pid = launcher.process.processIdentifier
            let waiters = state.withLock { state in
                defer { state.requestWaiters.removeAll { $0.launcher == pid } }
                return state.requestWaiters.filter { $0.launcher == pid }
            }
            for waiter in waiters { waiter.continuation.resume() }
            return nil
        }
        state.withLock { _ = $0.busy.removeValue(forKey: id) }
        // A sequenced-packet send is whole or nothing: one refused for a peer that is gone never
        // reached it.
        if Self.peerGone.contains(error.errno) {
            return LauncherLost(
                launcher: launcher.process.processIdentifier, forkedWorker: false, fromOutside: true,
                what: "had ended before it could be asked (\(error))")
        }
        return error
    }

    /// What `sendmsg` says when the other end of the socket is gone.
    private static let peerGone: Set<Errno> = [
        .brokenPipe, Errno(rawValue: ECONNRESET), Errno(rawValue: ECONNREFUSED), Errno(rawValue: ENOTCONN),
    ]

    // MARK: Events

    func handleEvent(descriptor: Int32, events: UInt32) {
        if descriptor == mountTable?.rawValue {
            mountsChanged()
            return
        }
        if let launcher = state.withLock({ $0.launcher(socket: descriptor) }) {
            receiveMessages(from: launcher)
            return
        }
        if launcherExited(processDescriptor: descriptor) { return }
        if primedExited(processDescriptor: descriptor) { return }
        if !sparePrepared(socket: descriptor) { spareExited(processDescriptor: descriptor) }
    }

    /// Reads what a launcher sent, without waiting: that it is ready, and its answers. A launcher
    /// that forks one child is let go after its answer. At its end (which its pidfd reports) its
    /// socket is no longer watched.
    func receiveMessages(from launcher: LauncherProcess) {
        while let message = LauncherMessage.receive(from: launcher.socket) {
            if message.isReadiness {
                state.withLock { state in
                    if state.open.contains(launcher.serial) { state.ready.insert(launcher.serial) }
                    state.startTimes.append(ContinuousClock.now - launcher.started)
                    if state.startTimes.count > Self.keptStartTimes { state.startTimes.removeFirst() }
                }
                resumeSettledWaiters()
                continue
            }
            guard let request = message.request, let value = message.value,
                state.withLock({ $0.busy.removeValue(forKey: request) }) != nil
            else {
                // Ended, failed, or an answer to nothing asked.
                message.passed?.close()
                if message.request == nil { loop.deregister(launcher.socket) }
                return
            }
            finished(with: launcher)
            answered(request, value: value, socket: message.passed)
            if forks == .one { return }
        }
    }

    /// The answer to `request`: a pid or minus an errno, and a spare's socket.
    func answered(_ request: UInt32, value: Int32, socket spareSocket: FileDescriptor?) {
        let (continuation, isSpare, outdated) = state.withLock { state in
            if state.spareRequest == request {
                state.spareRequest = nil
                return (nil as CheckedContinuation<SpawnedProcess, any Error>?, true, state.spareRequestGeneration != state.mountGeneration)
            }
            return (state.pending.removeValue(forKey: request), false, false)
        }
        if isSpare {
            receivedSpare(pid: value, socket: spareSocket, outdated: outdated)
            return
        }
        spareSocket?.close()
        guard value > 0 else {
            continuation?.resume(throwing: SystemError("fork (pre-forked launcher)", Errno(rawValue: -value)))
            return
        }
        // The pid cannot be reused before this process, its parent, reaps it.
        do {
            let processDescriptor = try FileDescriptor.processDescriptor(for: value)
            continuation?.resume(returning: SpawnedProcess(processIdentifier: value, processDescriptor: processDescriptor))
        } catch {
            continuation?.resume(throwing: error)
        }
    }

    /// A launcher's pidfd became readable: it ended. A retired one is reaped; one that ended
    /// while asked has its answers read first (it may have answered before it died), and what it
    /// did not answer fails, saying so. False when `descriptor` is no launcher's.
    func launcherExited(processDescriptor descriptor: Int32) -> Bool {
        if let retired = state.withLock({ $0.retired.removeValue(forKey: descriptor) }) {
            loop.deregister(retired.process.processDescriptor)
            retired.process.processDescriptor.killAndReap()
            resumeSettledWaiters()
            return true
        }
        guard let launcher = state.withLock({ $0.launcher(processDescriptor: descriptor) }) else { return false }
        receiveMessages(from: launcher)
        // Reaped here, for how it ended: killed from outside, or on its own. (Retired below, its
        // pidfd is closed on the next pass.) Before it said it was ready, it read no request.
        let ending = try? launcher.process.processDescriptor.waitForProcessExit(noHang: true)
        let killed = ending?.reason == .signaled(signal: SIGKILL, coreDumped: false)
        let wasReady = state.withLock { $0.ready.contains(launcher.serial) }
        // No answer yet, and none will come.
        let (unanswered, spareLost, requests) = state.withLock { state in
            if state.idle == launcher { state.idle = nil }
            let requests = Array(state.busy.filter { $0.value == launcher }.keys)
            var spareLost = false
            var unanswered: [(request: UInt32, continuation: CheckedContinuation<SpawnedProcess, any Error>)] = []
            for request in requests {
                state.busy[request] = nil
                if state.spareRequest == request {
                    state.spareRequest = nil
                    state.spareFailed = true
                    spareLost = true
                }
                if let continuation = state.pending.removeValue(forKey: request) { unanswered.append((request, continuation)) }
            }
            return (unanswered, spareLost, requests)
        }
        // Each launch learns whether the launcher had forked its worker (so whether it may try
        // another launcher) from the fork record, final now that the launcher has ended.
        let causes = unanswered.map {
            ($0.continuation, LauncherLost.ended(launcher, request: $0.request, wasReady: wasReady, killed: killed))
        }
        for request in requests { reapLostChild(of: launcher, request: request) }
        // Retired before its pidfd is handled again, on the next pass: then it is reaped.
        if state.withLock({ $0.retired[descriptor] == nil }) { retire(launcher) }
        for (continuation, cause) in causes { continuation.resume(throwing: cause) }
        if spareLost || !unanswered.isEmpty { resumeSettledWaiters() }
        return true
    }

    /// The child `launcher` forked for `request` before it died without answering, if it forked
    /// one: the kernel recorded its pid (`ForkRecord`). It is this process's child, which no one
    /// else would reap; it is killed and reaped on the loop thread. A pid that is not this
    /// process's child (the host application reaped every child, and the pid was reused) is left
    /// alone: waitid on it fails with ECHILD.
    func reapLostChild(of launcher: LauncherProcess, request: UInt32) {
        guard let pid = launcher.forkRecord?.recordedChild(of: request),
            let child = try? FileDescriptor.processDescriptor(for: pid)
        else { return }
        do throws(SystemError) {
            if try child.waitForProcessExit(noHang: true) != nil {
                child.close()
                return
            }
        } catch {
            child.close()
            return
        }
        try? child.sendSignal(SignalNumber.kill)
        StartedWorker.reapLater(child, loop: loop)
    }

    /// The host's mounts changed: the spares' copies of its tree are out of date, so they are
    /// replaced (a plugin or grant on a new mount would otherwise not be found, or be found as
    /// the directory the mount covers), and so is the primed worker, which built its view then.
    /// Whether the host's mounts changed since the mount table was last asked (by the loop's
    /// wait or by this), without waiting. On the loop thread.
    func mountTableChanged() -> Bool {
        guard let mountTable else { return false }
        var entry = pollfd(fd: mountTable.rawValue, events: Int16(POLLPRI), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLPRI) != 0
    }

    func mountsChanged() {
        var outdated = state.withLock { state -> SpareSlots in
            state.mountGeneration += 1
            var taken = SpareSlots()
            swap(&taken, &state.spares)
            return taken
        }
        discardPrimed()
        var any = false
        outdated.removeAll { spare in
            any = true
            spare.end(loop: loop)
        }
        if any { replenish(options: WorkerLauncher.isolatingOptions()) }
    }
}
