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
        LaunchTrace.note("launcher started, pid \(launcher.process.processIdentifier)")
        state.withLock { state in
            state.launchers[launcher.serial] = launcher
            state.machine.launcherStarted(launcher.serial, pid: launcher.process.processIdentifier)
        }
        return launcher
    }

    /// The launcher for the next request, on the loop thread: the idle one, or one made now. With
    /// `Forks.one` the next idle one is made a moment later, so that its exec does not compete
    /// with the launch.
    func takeLauncher() throws(SystemError) -> LauncherProcess {
        let (taken, effects) = state.withLock { state -> (LauncherProcess?, [Effect]) in
            let (taken, effects) = state.machine.takeLauncher()
            return (taken.flatMap { state.launchers[$0] }, effects)
        }
        perform(effects)
        if let taken { return taken }
        let made = try startLauncher()
        guard forks == .many else { return made }
        // The pool may have stopped meanwhile: then the launcher is ended, not kept.
        let (kept, offered) = state.withLock { state -> (LauncherProcess?, [Effect]) in
            let (idle, effects) = state.machine.offerIdle(made.serial)
            return (idle.flatMap { state.launchers[$0] }, effects)
        }
        perform(offered)
        guard let kept else { throw SystemError("launcher", .noSuchProcess) }
        return kept
    }

    func makeIdleLauncherLater() {
        perform(state.withLock { $0.machine.makeIdleLauncherLater() })
    }

    func makeIdleLauncher() {
        // A pool stopped meanwhile (a private one, after its one launch) needs none.
        guard state.withLock({ $0.machine.startingIdleLauncher() }) else { return }
        let made = try? startLauncher()
        perform(state.withLock { $0.machine.idleLauncherMade(made?.serial) })
    }

    /// After a launcher's request, answered or not: one that forks a single child is let go. On
    /// the loop thread.
    func finished(with launcher: LauncherProcess) {
        perform(state.withLock { $0.machine.finished(with: launcher.serial) })
    }

    /// Sends request `id` to `launcher` and records it, so that the answer (or the launcher's
    /// end) is matched to it; the error when it could not be sent or the pool stopped
    /// (`LauncherLost` when the launcher had gone: the request never reached it). Whoever waits
    /// for a request to that launcher (`awaitRequest`) hears of it. `recorded` says it was
    /// recorded already (a spare's request, `askingForSpare`). An error leaves the request
    /// recorded: the caller says `requestNotSent`.
    func ask(
        _ launcher: LauncherProcess, request id: UInt32, options: SpawnRequest.Options, descriptors: [CInt], cgroupFiles: [String],
        recorded: Bool = false
    ) -> (any Error)? {
        guard recorded || state.withLock({ $0.machine.asking(launcher.serial, request: id) }) else {
            return SystemError("launcher", .noSuchProcess)
        }
        guard let error = launcher.send(id, options: options, descriptors: descriptors, cgroupFiles: cgroupFiles) else {
            perform(state.withLock { $0.machine.requestSent(toLauncher: launcher.process.processIdentifier) })
            return nil
        }
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
                let startTime = ContinuousClock.now - launcher.started
                perform(state.withLock { $0.machine.launcherSaidReady(launcher.serial, startTime: startTime) })
                continue
            }
            guard let request = message.request, let value = message.value,
                let effects = state.withLock({ $0.machine.launcherAnswered(launcher.serial, request: request, value: value) })
            else {
                // Ended, failed, or an answer to nothing asked.
                message.passed?.close()
                if message.request == nil { loop.deregister(launcher.socket) }
                return
            }
            // A spare's socket is adopted; anything else passed is closed.
            perform(effects, spareSocket: message.passed)
            if forks == .one { return }
        }
    }

    /// A launcher's pidfd became readable: it ended. A let-go one is reaped; one that ended
    /// while idle or asked has its answers read first (it may have answered before it died), and
    /// what it did not answer fails, saying so. False when `descriptor` is no launcher's the pool
    /// watches.
    func launcherExited(processDescriptor descriptor: Int32) -> Bool {
        let found = state.withLock { state -> (LauncherProcess, LaunchPoolState.LauncherExit)? in
            guard let launcher = state.launcher(processDescriptor: descriptor) else { return nil }
            return (launcher, state.machine.launcherProcessExited(launcher.serial))
        }
        guard let (launcher, exit) = found else { return false }
        switch exit {
        case .notWatched:
            return false
        case .reaped(let effects):
            perform(effects)
            return true
        case .running:
            break
        }
        receiveMessages(from: launcher)
        // Reaped here, for how it ended: killed from outside, or on its own. (Let go, its pidfd
        // is closed on the next pass.) Before it said it was ready, it read no request.
        let ending = try? launcher.process.processDescriptor.waitForProcessExit(noHang: true)
        let killed = ending?.reason == .signaled(signal: SIGKILL, coreDumped: false)
        perform(state.withLock { $0.machine.launcherEnded(launcher.serial, killed: killed) })
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

    /// Whether the host's mounts changed since the mount table was last asked (by the loop's
    /// wait or by this), without waiting. On the loop thread.
    func mountTableChanged() -> Bool {
        guard let mountTable else { return false }
        var entry = pollfd(fd: mountTable.rawValue, events: Int16(POLLPRI), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLPRI) != 0
    }

    /// The host's mounts changed: the spares' copies of its tree are out of date, so they are
    /// replaced (a plugin or grant on a new mount would otherwise not be found, or be found as
    /// the directory the mount covers), and so is the primed worker, which built its view then.
    func mountsChanged() {
        perform(state.withLock { $0.machine.mountsChanged() })
    }
}
