import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import PlugindWire

/// The host's side of the pre-forked launchers (`plugind-worker --launcher`): one pool per worker
/// executable, started on first use. A launcher forks *spares* ahead of time and hands their
/// sockets to this side; a launch sends the worker's descriptors straight to a spare, so fork,
/// exec, dynamic linking and even the launcher are off its path. Without a spare, a launcher
/// forks a worker on the spot. The multi-threaded host never forks without exec itself; a
/// launcher is single-threaded. Workers and spares are children of the host (CLONE_PARENT): the
/// host holds a pidfd for each spare from the moment it learns of it, and reaps it whether it
/// becomes a worker or dies unused.
///
/// Each launcher forks exactly one child and is then let go (`LauncherProcess`): a forked child
/// shares its parent's address-space layout, stack canary and hash seed, so one launcher forking
/// every worker would show each plugin where everything of every other plugin's worker lives.
/// The next launcher is exec'd ahead, off the launch's path, from an execute-only copy of the
/// worker executable, which keeps it undumpable from its first instruction.
///
/// Longer than a file should be: spares, reservations and launcher processes are one pool here.
/// Dividing it (a pool type owning them, a spare's states as an enum) is the renovation's next
/// step.
package final class PreforkedLauncher: EventLoopHandler {
    fileprivate struct Spare {
        var process: SpawnedProcess
        var socket: FileDescriptor
        /// The spare said it finished getting ready (one byte on its socket); until then its
        /// socket is watched.
        var isPrepared = false
        /// The spare's detached copy of the host's tree, handed over with its ready byte (see
        /// `StartedWorker.hostTree`).
        var hostTree: FileDescriptor?
        /// Its ready byte is known but the copy that comes with it not yet received: until then
        /// the pool is not settled (this process's descriptors are about to change).
        var receivingHostTree = false
    }

    /// A worker the launcher started.
    struct StartedWorker {
        let process: SpawnedProcess
        /// A spare settles its view ahead and binds the plugin's files from a detached copy of
        /// the host's tree, which it closes before plugin code runs. Closing the last reference
        /// to such a tree waits for the kernel (tens of microseconds), so the spare hands this
        /// side a reference: the worker's close is then cheap, and this one is closed once the
        /// worker has completed its view (`launchFinished`), off the launch's path.
        let hostTree: FileDescriptor?
    }

    /// A launcher process, for one child.
    fileprivate struct LauncherProcess: Sendable {
        let socket: FileDescriptor
        let process: SpawnedProcess
    }

    private struct State {
        var pending: [UInt32: CheckedContinuation<SpawnedProcess, any Error>] = [:]
        /// The launcher the next request goes to, exec'd ahead (nil while one is being made, or
        /// when making one failed: the next request makes one then).
        var idle: LauncherProcess?
        /// The idle launcher said it is ready (loaded and warmed up): until then its start-up
        /// competes with whatever the host does.
        var idleReady = false
        /// A job that makes the idle launcher is scheduled.
        var makingIdle = false
        /// The launcher each request in flight went to.
        var busy: [UInt32: LauncherProcess] = [:]
        /// Launchers that answered and were let go (their socket closed, which ends them), by
        /// pidfd, until they are reaped.
        var retired: [CInt: LauncherProcess] = [:]
        /// Never 0, which a launcher's readiness uses.
        var nextRequestID: UInt32 = 1
        var stopped = false
        /// Spares not handed out yet.
        var spares: [Spare] = []
        /// The request for a spare in flight, if any.
        var spareRequest: UInt32?
        /// Changes of the host's mounts seen, and how many had been seen when the spare in
        /// flight was asked for: one asked for before a change may copy the tree before it.
        var mountGeneration = 0
        var spareRequestGeneration = 0
        /// A new request's id.
        mutating func takeRequestID() -> UInt32 {
            defer { nextRequestID = nextRequestID == .max ? 1 : nextRequestID + 1 }
            return nextRequestID
        }

        /// The launcher whose socket, or pidfd, is `descriptor`, if it is not retired.
        func launcher(socket descriptor: CInt) -> LauncherProcess? {
            idle?.socket.rawValue == descriptor ? idle : busy.values.first { $0.socket.rawValue == descriptor }
        }

        func launcher(processDescriptor descriptor: CInt) -> LauncherProcess? {
            idle?.process.processDescriptor.rawValue == descriptor
                ? idle : busy.values.first { $0.process.processDescriptor.rawValue == descriptor }
        }

        /// Callers of `settled()` waiting for the spare count to be reached.
        var settleWaiters: [CheckedContinuation<Void, Never>] = []
        /// The last spare could not be forked: no more are asked for until the next launch, so
        /// that a launcher that cannot fork is not asked again and again.
        var spareFailed = false

        var isSettled: Bool {
            stopped
                || (spareRequest == nil && (spares.count >= PreforkedLauncher.spareCount || spareFailed)
                    && spares.allSatisfy { $0.isPrepared && !$0.receivingHostTree } && busy.isEmpty && retired.isEmpty && !makingIdle
                    && (idle == nil || idleReady))
        }

        /// The spare to hand out: the first one that is ready, else the oldest (the likeliest to
        /// be ready by the time it reads).
        mutating func takeSpare() -> Spare? {
            guard !spares.isEmpty else { return nil }
            return spares.remove(at: spares.firstIndex(where: \.isPrepared) ?? 0)
        }

        mutating func takePreparedSpare() -> Spare? {
            spares.firstIndex(where: \.isPrepared).map { spares.remove(at: $0) }
        }
    }

    /// How many children each launcher forks.
    enum Forks: Sendable {
        /// One: every worker has an address-space layout, stack canary and hash seed of its own,
        /// and unique memory of its own (about 1 MiB); each costs the exec of a launcher, ahead.
        case one
        /// Any number: the workers of one host share the launcher's layout, canary and hash seed
        /// and most of its memory (about 350 KiB each), and launches in quick succession do not
        /// wait for launchers to start.
        case many
    }

    let executable: String
    let forks: Forks
    /// The execute-only copy launchers are exec'd from (nil if it could not be made: then they are
    /// exec'd from `executable`, dumpable until their first instruction that says otherwise).
    private let image: FileDescriptor?
    /// The launchers' environment. Binding every symbol at exec spares the child the lazy
    /// binding of its own.
    private let environment = WorkerLauncher.environment() + ["LD_BIND_NOW=1"]
    private let loop: WorkerEventLoop
    /// The host's mount table, watched: spares copy the host's tree when they get ready (see
    /// `StartedWorker.hostTree`), so a change of mounts replaces them. Nil where it cannot be
    /// watched.
    private let mountTable: FileDescriptor?
    private let state = Locked(State())

    /// Running pools, by executable and how many children their launchers fork.
    private static let launchers = Locked<[String: PreforkedLauncher]>([:])

    private static func key(_ executable: String, _ forks: Forks) -> String { "\(forks) \(executable)" }

    /// Execute-only copies of worker executables, made once per executable and kept for the life
    /// of the process: every pool of it, private ones included, execs its launchers from the same.
    private static let images = Locked<[String: FileDescriptor]>([:])

    private static func image(of executable: String) -> FileDescriptor? {
        if let made = images.withLock({ $0[executable] }) { return made }
        // Copied outside the lock; of two copies made at once, one is kept.
        guard let copy = try? SealedFile.executableCopy(of: executable) else { return nil }
        let kept = images.withLock { images in
            if let made = images[executable] { return made }
            images[executable] = copy
            return copy
        }
        if kept != copy { copy.close() }
        return kept
    }

    /// The running pool for `executable`, if there is one.
    static func running(executable: String, forks: Forks) -> PreforkedLauncher? {
        launchers.withLock { $0[key(executable, forks)] }.flatMap { $0.isStopped ? nil : $0 }
    }

    /// The running pool for `executable`, started if there is none (or it stopped).
    static func shared(executable: String, forks: Forks, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
        let key = key(executable, forks)
        if let running = launchers.withLock({ $0[key] }), !running.isStopped { return running }
        let started = try await startPrivate(executable: executable, forks: forks, loop: loop)
        return launchers.withLock { launchers in
            if let running = launchers[key], !running.isStopped {
                started.stop()
                return running
            }
            launchers[key] = started
            return started
        }
    }

    /// A pool of the caller's own, not shared: it forks no spares unless asked to (`replenish`),
    /// and the caller stops it.
    static func startPrivate(executable: String, forks: Forks = .one, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
        let mountTable = try? FileDescriptor.open("/proc/self/mountinfo", O_RDONLY)
        let started = PreforkedLauncher(
            executable: executable, forks: forks, image: image(of: executable), loop: loop, mountTable: mountTable)
        do {
            if let mountTable { try loop.register(mountTable, events: Epoll.priority, handler: started) }
            // The first launcher now, so that a launcher that cannot start fails here.
            let first: Result<LauncherProcess, SystemError> = try await loop.run {
                do throws(SystemError) { return .success(try started.makeLauncher()) } catch { return .failure(error) }
            }
            let launcher = try first.get()
            if !started.state.withLock({ state in
                guard !state.stopped else { return false }
                state.idle = launcher
                return true
            }) {
                loop.execute { started.retire(launcher) }
            }
        } catch {
            started.stop()
            throw error
        }
        return started
    }

    private init(executable: String, forks: Forks, image: FileDescriptor?, loop: WorkerEventLoop, mountTable: FileDescriptor?) {
        self.executable = executable
        self.forks = forks
        self.image = image
        self.loop = loop
        self.mountTable = mountTable
    }

    /// Starts a launcher process, watched by this pool. On the loop thread: a launcher's
    /// parent-death signal, and so its children's, follows the thread that started it.
    private func makeLauncher() throws(SystemError) -> LauncherProcess {
        var hostEnd: CInt = -1
        var launcherEnd: CInt = -1
        try checkShim("socketpair", plugind_shim_socket_pair(&hostEnd, &launcherEnd))
        let host = FileDescriptor(rawValue: hostEnd)
        let launcher = FileDescriptor(rawValue: launcherEnd)
        defer { launcher.close() }
        do throws(SystemError) {
            let null = try FileDescriptor.open("/dev/null", O_RDWR)
            defer { null.close() }
            var request = SpawnRequest(
                executablePath: executable,
                arguments: [executable, "--launcher"],
                environment: environment,
                descriptors: [null, null, null, launcher],
                options: [.dieWithParentThread]
            )
            request.executableDescriptor = image
            let process = try spawnProcess(request)
            do throws(SystemError) {
                try host.setNonBlocking()
                try loop.register(process.processDescriptor, events: Epoll.readable, handler: self)
                try loop.register(host, events: Epoll.readable, handler: self)
            } catch {
                // Forgetting what was not registered is a no-op.
                loop.deregister(process.processDescriptor)
                process.processDescriptor.killAndReap()
                throw error
            }
            return LauncherProcess(socket: host, process: process)
        } catch {
            host.close()
            throw error
        }
    }

    /// The launcher for the next request, on the loop thread: the idle one, or one made now. The
    /// next idle one is made a moment later, so that its exec does not compete with the launch.
    private func takeLauncher() throws(SystemError) -> LauncherProcess {
        if forks == .many {
            if let idle = state.withLock({ $0.idle }) { return idle }
            let made = try makeLauncher()
            // The pool may have stopped meanwhile: then the launcher is ended, not kept.
            let kept = state.withLock { state -> LauncherProcess? in
                guard !state.stopped else { return nil }
                state.idle = state.idle ?? made
                return state.idle
            }
            if kept?.socket != made.socket { retire(made) }
            guard let kept else { throw SystemError("launcher", .noSuchProcess) }
            return kept
        }
        let idle = state.withLock { state -> LauncherProcess? in
            defer {
                state.idle = nil
                state.idleReady = false
            }
            return state.idle
        }
        defer { makeIdleLauncherLater() }
        if let idle { return idle }
        return try makeLauncher()
    }

    private func makeIdleLauncherLater() {
        let scheduled = state.withLock { state -> Bool in
            guard !state.stopped, state.idle == nil, !state.makingIdle else { return false }
            state.makingIdle = true
            return true
        }
        guard scheduled else { return }
        _ = loop.schedule(after: Self.replenishDelay) { [weak self] in self?.makeIdleLauncher() }
    }

    private func makeIdleLauncher() {
        // A pool stopped meanwhile (a private one, after its one launch) needs none.
        guard !isStopped else {
            state.withLock { $0.makingIdle = false }
            return
        }
        let made = try? makeLauncher()
        let unneeded = state.withLock { state -> LauncherProcess? in
            state.makingIdle = false
            guard let made, !state.stopped, state.idle == nil else { return made }
            state.idle = made
            state.idleReady = false
            return nil
        }
        if let unneeded { retire(unneeded) }
        resumeSettledWaiters()
    }

    /// After a launcher's request, answered or not: one that forks a single child is let go.
    private func finished(with launcher: LauncherProcess) {
        if forks == .one { retire(launcher) }
    }

    /// Lets a launcher go: its socket closed, it ends; its pidfd stays watched until it is reaped.
    /// On the loop thread.
    private func retire(_ launcher: LauncherProcess) {
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

    var isStopped: Bool {
        state.withLock { $0.stopped }
    }

    /// Starts a worker with `descriptors` (output, protocol in, protocol out, the shared memory or
    /// /dev/null, then the sealed files) and `options`: a spare when there is one, else one forked
    /// on the spot. Returns its pid and pidfd; the worker is a child of this process.
    /// With `cgroup`, the worker joins that control group before it runs any code of its own.
    func start(
        descriptors: [FileDescriptor], options: SpawnRequest.Options, cgroup: WorkerCgroup? = nil, reservation: SpareReservation? = nil
    ) async throws -> StartedWorker {
        let raw = descriptors.map(\.rawValue)
        // Spares restricted themselves ahead, for launches with every layer on, and wait in a
        // network namespace of their own, for launches without the network.
        let spareUsable = !options.contains(.noAdvanceRestrictions) && options.contains(.newNetworkNamespace)
        // A spare reserved by another launcher (one that has since stopped) is given back.
        if let reservation, reservation.launcher !== self || !spareUsable { reservation.release() }
        var reserved = reservation?.take()
        while spareUsable, var spare = reserved ?? state.withLock({ $0.takeSpare() }) {
            reserved = nil
            if !spare.isPrepared { loop.deregister(spare.socket) }
            // A spare runs only plugind's code until it has its descriptors.
            if let cgroup, (try? cgroup.add(spare.process.processIdentifier)) == nil {
                discard(spare)
                continue
            }
            if let started = hand(raw, to: &spare) { return started }
        }
        let taken: Result<LauncherProcess, SystemError> = try await loop.run {
            do throws(SystemError) { return .success(try self.takeLauncher()) } catch { return .failure(error) }
        }
        let launcher = try taken.get()
        let process = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SpawnedProcess, any Error>) in
            // Known before it is sent: the answer is read on the loop thread.
            let id = state.withLock { state -> UInt32? in
                guard !state.stopped else { return nil }
                let id = state.takeRequestID()
                state.pending[id] = continuation
                state.busy[id] = launcher
                return id
            }
            guard let id else {
                loop.execute { self.finished(with: launcher) }
                continuation.resume(throwing: SystemError("launcher", .noSuchProcess))
                return
            }
            if let error = send(id, to: launcher, options: options, descriptors: raw, cgroupFiles: cgroup?.processFiles ?? []) {
                let unanswered = state.withLock { state in
                    state.busy[id] = nil
                    return state.pending.removeValue(forKey: id)
                }
                loop.execute { self.finished(with: launcher) }
                unanswered?.resume(throwing: error)
            }
        }
        return StartedWorker(process: process, hostTree: nil)
    }

    /// Sends a worker's descriptors to `spare`, which becomes that worker. Nil when the spare is
    /// unusable (dead, or its socket failed): it is killed and reaped on the loop thread.
    private func hand(_ descriptors: [CInt], to spare: inout Spare) -> StartedWorker? {
        let marker: [UInt8] = [SpareMessage.work]
        // The output pipe twice: the spare receives them as its descriptors 1, 2, 3, ….
        let sent = marker.withUnsafeBytes { bytes in
            ([descriptors[0]] + descriptors).withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(spare.socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        if !spare.isPrepared { spare.hostTree = Self.receiveReadiness(spare.socket) }
        spare.socket.close()
        loop.deregister(spare.process.processDescriptor)
        let started = StartedWorker(process: spare.process, hostTree: spare.hostTree)
        if sent == 0 { return started }
        discard(started)
        return nil
    }

    /// Starts a worker on a ready spare, without waiting: nil when there is none (or it failed).
    func startOnReadySpare(descriptors: [FileDescriptor]) -> StartedWorker? {
        guard var spare = state.withLock({ $0.stopped ? nil : $0.takePreparedSpare() }) else { return nil }
        let started = hand(descriptors.map(\.rawValue), to: &spare)
        replenish(options: WorkerLauncher.isolatingOptions())
        return started
    }

    /// Ends a worker this launcher started that will not be used: killed, reaped on the loop
    /// thread, its copy of the host's tree dropped.
    func discard(_ started: StartedWorker) {
        Self.dropHostTree(started.hostTree)
        try? started.process.processDescriptor.sendSignal(SIGKILL)
        reapLater(started.process)
    }

    /// Takes a ready spare for a launch that will hand it its work in a moment, and wakes it now
    /// (`SpareMessage.wake`). Nil when no spare is ready. Until `start` takes it (or the
    /// reservation is released) nothing watches it: a spare that dies meanwhile is found out
    /// when its work is sent.
    func reserveSpare() -> SpareReservation? {
        guard let spare = state.withLock({ $0.stopped ? nil : $0.takePreparedSpare() }) else { return nil }
        loop.deregister(spare.process.processDescriptor)
        var wake = SpareMessage.wake
        _ = Glibc.send(spare.socket.rawValue, &wake, 1, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        return SpareReservation(spare, launcher: self)
    }

    /// Gives back a spare that was reserved and not used.
    fileprivate func putBack(_ spare: Spare) {
        guard watch(spare.process) else {
            discard(spare)
            return
        }
        let kept = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.spares.insert(spare, at: 0)
            return true
        }
        if !kept {
            loop.deregister(spare.process.processDescriptor)
            discard(spare)
        }
        resumeSettledWaiters()
    }

    /// Watches a spare's process again, so that its death is noticed and reaped.
    private func watch(_ process: SpawnedProcess) -> Bool {
        (try? loop.register(process.processDescriptor, events: Epoll.readable, handler: self)) != nil
    }

    /// After a launch that `start` began, once the worker answered or failed: releases the
    /// spare's copy of the host's tree and asks for the next spare, so that the fork does not
    /// compete with the worker that just started.
    func launchFinished(_ started: StartedWorker, options: SpawnRequest.Options) {
        Self.dropHostTree(started.hostTree)
        _ = loop.schedule(after: Self.replenishDelay) { [weak self] in self?.replenish(options: options) }
    }

    /// How long after a launch the next spare is asked for. Making one costs the kernel a few
    /// hundred microseconds of a processor (its network namespace above all); right after a
    /// launch that competes with the first request the host sends the new worker (measured: 200
    /// µs more for it on this 2-core machine), a few milliseconds later it does not.
    static let replenishDelay: Duration = .milliseconds(3)

    /// Closes a spare's copy of the host's tree. Closing the last reference costs tens of
    /// microseconds; it is done here, after the launch, rather than by the worker during it.
    private static func dropHostTree(_ hostTree: FileDescriptor?) {
        hostTree?.close()
    }

    /// How many spares to keep: two, so that back-to-back launches find one that has finished
    /// warming up while the next one is still being made.
    static let spareCount = 2

    /// Asks the launcher for a spare unless enough are ready or one is on its way. Call it after a
    /// launch, so that the fork does not compete with the worker that just started; each spare
    /// that arrives asks for the next until there are `spareCount`. After a spare could not be
    /// forked, only this call (one per launch) tries again.
    func replenish(options: SpawnRequest.Options) {
        replenish(options: options, retryingAfterFailure: true)
    }

    private func replenish(options: SpawnRequest.Options, retryingAfterFailure: Bool) {
        let id = state.withLock { state -> UInt32? in
            if retryingAfterFailure { state.spareFailed = false }
            guard !state.stopped, !state.spareFailed, state.spares.count < Self.spareCount, state.spareRequest == nil else { return nil }
            let id = state.takeRequestID()
            state.spareRequest = id
            state.spareRequestGeneration = state.mountGeneration
            return id
        }
        // Whatever the launch that asks: a spare serves launches with every layer on and
        // without the network.
        let spareOptions = options.union(.newNetworkNamespace).subtracting(.noAdvanceRestrictions)
        if let id { loop.execute { self.askForSpare(id, options: spareOptions) } }
    }

    /// Sends request `id` for a spare to a launcher of its own, on the loop thread; when that
    /// fails, no more spares are asked for until the next launch.
    private func askForSpare(_ id: UInt32, options: SpawnRequest.Options) {
        var failed = true
        if let launcher = try? takeLauncher() {
            let recorded = state.withLock { state -> Bool in
                guard !state.stopped, state.spareRequest == id else { return false }
                state.busy[id] = launcher
                return true
            }
            if recorded && send(id, to: launcher, options: options, descriptors: []) == nil {
                failed = false
            } else {
                state.withLock { $0.busy[id] = nil }
                finished(with: launcher)
            }
        }
        guard failed else { return }
        state.withLock { state in
            guard state.spareRequest == id else { return }
            state.spareRequest = nil
            state.spareFailed = true
        }
        resumeSettledWaiters()
    }

    private func send(
        _ id: UInt32, to launcher: LauncherProcess, options: SpawnRequest.Options, descriptors: [CInt], cgroupFiles: [String] = []
    ) -> SystemError? {
        var message = PayloadWriter(capacity: 64)
        message.write(id)
        message.write(options.rawValue)
        message.write(cgroupFiles)
        let result = message.bytes.withUnsafeBytes { bytes in
            descriptors.withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(launcher.socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        return result == 0 ? nil : SystemError("sendmsg to the launcher", Errno(rawValue: result))
    }

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
        if !sparePrepared(socket: descriptor) { spareExited(descriptor) }
    }

    /// Reads what a launcher sent, without waiting: that it is ready, and its answers. A launcher
    /// that forks one child is let go after its answer. At its end (which its pidfd reports) its
    /// socket is no longer watched.
    private func receiveMessages(from launcher: LauncherProcess) {
        while let message = LauncherMessage.receive(from: launcher.socket) {
            if message.isReadiness {
                state.withLock { state in
                    if state.idle?.socket == launcher.socket { state.idleReady = true }
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
    private func answered(_ request: UInt32, value: Int32, socket spareSocket: FileDescriptor?) {
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

    /// The answer to a request for a spare: the spare's pid (or minus an errno) and socket.
    private func receivedSpare(pid: Int32, socket spareSocket: FileDescriptor?, outdated: Bool) {
        if outdated {
            // Asked for before the mounts changed: its copy of the host's tree may miss them.
            spareSocket?.close()
            if pid > 0, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) {
                discard(StartedWorker(process: SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor), hostTree: nil))
            }
            replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
        } else if adoptSpare(pid: pid, socket: spareSocket) {
            replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
        } else {
            state.withLock { $0.spareFailed = true }
        }
        resumeSettledWaiters()
    }

    /// A launcher's pidfd became readable: it ended. A retired one is reaped; one that ended
    /// while asked has its answers read first (it may have answered before it died), and what it
    /// did not answer fails. False when `descriptor` is no launcher's.
    private func launcherExited(processDescriptor descriptor: Int32) -> Bool {
        if let retired = state.withLock({ $0.retired.removeValue(forKey: descriptor) }) {
            loop.deregister(retired.process.processDescriptor)
            retired.process.processDescriptor.killAndReap()
            resumeSettledWaiters()
            return true
        }
        guard let launcher = state.withLock({ $0.launcher(processDescriptor: descriptor) }) else { return false }
        receiveMessages(from: launcher)
        // No answer yet, and none will come.
        let (unanswered, spareLost) = state.withLock { state in
            if state.idle?.socket == launcher.socket { state.idle = nil }
            let requests = state.busy.filter { $0.value.socket == launcher.socket }.keys
            var spareLost = false
            var unanswered: [CheckedContinuation<SpawnedProcess, any Error>] = []
            for request in requests {
                state.busy[request] = nil
                if state.spareRequest == request {
                    state.spareRequest = nil
                    state.spareFailed = true
                    spareLost = true
                }
                if let continuation = state.pending.removeValue(forKey: request) { unanswered.append(continuation) }
            }
            return (unanswered, spareLost)
        }
        // Retired before its pidfd is handled again, on the next pass: then it is reaped.
        if state.withLock({ $0.retired[descriptor] == nil }) { retire(launcher) }
        for continuation in unanswered { continuation.resume(throwing: SystemError("launcher", .noSuchProcess)) }
        if spareLost || !unanswered.isEmpty { resumeSettledWaiters() }
        return true
    }

    /// Returns once every launcher holds its full count of spares (or has stopped), so that the
    /// descriptors this process holds are stable. For tests that count descriptors.
    package static func settleAll() async {
        let running = launchers.withLock { Array($0.values) }
        for launcher in running { await launcher.settled() }
    }

    func settled() async {
        // What the loop has been told already (a change of mounts) is handled first: jobs run
        // after the events of their pass.
        _ = try? await loop.run {}
        replenish(options: WorkerLauncher.isolatingOptions())
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.isSettled { return true }
                state.settleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func resumeSettledWaiters() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.isSettled else { return [] }
            defer { state.settleWaiters.removeAll() }
            return state.settleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Keeps a spare the launcher forked; false when it reported a failure instead.
    private func adoptSpare(pid: Int32, socket spareSocket: FileDescriptor?) -> Bool {
        guard pid > 0, let spareSocket else {
            spareSocket?.close()
            return false
        }
        // Never blocking: the ready byte is read at a launch that may come before it.
        guard (try? spareSocket.setNonBlocking()) != nil, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) else {
            spareSocket.close()
            return false
        }
        let spare = Spare(process: SpawnedProcess(processIdentifier: pid, processDescriptor: processDescriptor), socket: spareSocket)
        // Watched so that a spare that dies unused is reaped.
        guard (try? loop.register(processDescriptor, events: Epoll.readable, handler: self)) != nil else {
            spareSocket.close()
            processDescriptor.killAndReap()
            return false
        }
        // Watched until the spare says it is ready; a spare that cannot be watched is used anyway.
        let watched = (try? loop.register(spareSocket, events: Epoll.readable, handler: self)) != nil
        state.withLock { $0.spares.append(Spare(process: spare.process, socket: spareSocket, isPrepared: !watched)) }
        return true
    }

    /// The spare whose socket is `descriptor` has finished getting ready (or died, which its
    /// process descriptor reports). False when `descriptor` is no spare's socket.
    private func sparePrepared(socket descriptor: Int32) -> Bool {
        let found = state.withLock { state -> FileDescriptor? in
            guard let index = state.spares.firstIndex(where: { $0.socket.rawValue == descriptor && !$0.isPrepared }) else { return nil }
            state.spares[index].isPrepared = true
            state.spares[index].receivingHostTree = true
            return state.spares[index].socket
        }
        guard let found else { return false }
        loop.deregister(found)
        let hostTree = Self.receiveReadiness(found)
        // The spare may have been handed out meanwhile: then its launch is under way.
        let kept = state.withLock { state -> Bool in
            guard let index = state.spares.firstIndex(where: { $0.socket.rawValue == descriptor }) else { return false }
            state.spares[index].hostTree = hostTree
            state.spares[index].receivingHostTree = false
            return true
        }
        if !kept { Self.dropHostTree(hostTree) }
        resumeSettledWaiters()
        return true
    }

    /// Reads a spare's ready byte, without waiting, and the copy of the host's tree it may hand
    /// over with it. A socket closed with unread data would make the spare's next read fail once
    /// (it retries, but need not).
    private static func receiveReadiness(_ socket: FileDescriptor) -> FileDescriptor? {
        var byte: UInt8 = 0
        var length = 0
        var passed: CInt = -1
        var count: CInt = 0
        let result = plugind_shim_receive_descriptors(socket.rawValue, &byte, 1, &length, &passed, 1, &count)
        return result == 0 && count == 1 ? FileDescriptor(rawValue: passed) : nil
    }

    /// The host's mounts changed: the spares' copies of its tree are out of date, so they are
    /// replaced (a plugin or grant on a new mount would otherwise not be found, or be found as
    /// the directory the mount covers).
    private func mountsChanged() {
        let outdated = state.withLock { state -> [Spare] in
            state.mountGeneration += 1
            defer { state.spares.removeAll() }
            return state.spares
        }
        PrimedWorkers.discardAll()
        guard !outdated.isEmpty else { return }
        for spare in outdated { discard(spare) }
        replenish(options: WorkerLauncher.isolatingOptions())
    }

    /// Kills a spare that cannot be used and reaps it on the loop thread.
    private func discard(_ spare: Spare) {
        if !spare.isPrepared { loop.deregister(spare.socket) }
        spare.socket.close()
        loop.deregister(spare.process.processDescriptor)
        discard(StartedWorker(process: spare.process, hostTree: spare.hostTree))
    }

    /// Reaps `process` once it has exited, on the loop thread: a wait that can block never runs on
    /// the caller's task.
    private func reapLater(_ process: SpawnedProcess) {
        let descriptor = process.processDescriptor
        do {
            try loop.register(descriptor, events: Epoll.readable, handler: ReapOnExit(loop: loop, processDescriptor: descriptor))
        } catch {
            // Without the loop, kill it so that the wait is short.
            descriptor.killAndReap()
        }
    }

    /// A spare died before it was handed out: reap it.
    private func spareExited(_ descriptor: Int32) {
        let spare = state.withLock { state -> Spare? in
            guard let index = state.spares.firstIndex(where: { $0.process.processDescriptor.rawValue == descriptor }) else { return nil }
            return state.spares.remove(at: index)
        }
        guard let spare else { return }
        loop.deregister(spare.process.processDescriptor)
        if !spare.isPrepared { loop.deregister(spare.socket) }
        spare.socket.close()
        Self.dropHostTree(spare.hostTree)
        _ = try? spare.process.processDescriptor.waitForProcessExit()
        spare.process.processDescriptor.close()
    }

    /// The loop gave up: stop here and now, on its dying thread (no job runs there any more).
    func loopFailed(_ error: SystemError) {
        stop(onLoop: false)
    }

    /// Stops the pool: pending forks fail, its launchers and spares are killed and reaped on the loop
    /// thread.
    func stop() {
        stop(onLoop: true)
    }

    private func stop(onLoop: Bool) {
        typealias Stopped = (
            pending: [CheckedContinuation<SpawnedProcess, any Error>], spares: [Spare], launchers: [LauncherProcess],
            retired: [LauncherProcess]
        )
        let stopped: Stopped? = state.withLock { state -> Stopped? in
            guard !state.stopped else { return nil }
            state.stopped = true
            defer {
                state.pending.removeAll()
                state.spares.removeAll()
                state.idle = nil
                state.busy.removeAll()
                state.retired.removeAll()
            }
            // A launcher that forks many children is idle and busy at once.
            var launchers = state.idle.map { [$0] } ?? []
            for launcher in state.busy.values where !launchers.contains(where: { $0.socket == launcher.socket }) {
                launchers.append(launcher)
            }
            return (Array(state.pending.values), state.spares, launchers, Array(state.retired.values))
        }
        guard let stopped else { return }
        resumeSettledWaiters()
        for continuation in stopped.pending { continuation.resume(throwing: SystemError("launcher", .noSuchProcess)) }
        let (loop, mountTable) = (loop, mountTable)
        let end: @Sendable () -> Void = {
            for launcher in stopped.launchers {
                loop.deregister(launcher.socket)
                launcher.socket.close()
            }
            if let mountTable {
                loop.deregister(mountTable)
                mountTable.close()
            }
            for spare in stopped.spares {
                if !spare.isPrepared { loop.deregister(spare.socket) }
                spare.socket.close()
                spare.hostTree?.close()
            }
            let children =
                (stopped.launchers + stopped.retired).map(\.process.processDescriptor) + stopped.spares.map(\.process.processDescriptor)
            for child in children {
                loop.deregister(child)
                child.killAndReap()
            }
        }
        if onLoop { loop.execute(end) } else { end() }
    }
}

/// A ready spare set aside for one launch and woken ahead of its work. `start` takes it; a launch
/// that ends before then gives it back with `release()`.
final class SpareReservation: Sendable {
    let launcher: PreforkedLauncher
    private let spare: Locked<PreforkedLauncher.Spare?>

    fileprivate init(_ spare: PreforkedLauncher.Spare, launcher: PreforkedLauncher) {
        self.spare = Locked(spare)
        self.launcher = launcher
    }

    fileprivate func take() -> PreforkedLauncher.Spare? {
        spare.withLock { spare in
            defer { spare = nil }
            return spare
        }
    }

    /// Gives the spare back unless `start` took it.
    func release() {
        if let spare = take() { launcher.putBack(spare) }
    }
}
