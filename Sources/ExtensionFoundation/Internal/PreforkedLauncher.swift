import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import PlugindWire

/// The host's side of the pre-forked launcher (`plugind-worker --launcher`): one per worker
/// executable, started on first use. The launcher forks *spares* ahead of time and hands their
/// sockets to this side; a launch sends the worker's descriptors straight to a spare, so fork,
/// exec, dynamic linking and even the launcher are off its path. Without a spare, the launcher
/// forks a worker on the spot. The multi-threaded host never forks without exec itself; the
/// launcher is single-threaded. Workers and spares are children of the host (CLONE_PARENT): the
/// host holds a pidfd for each spare from the moment it learns of it, and reaps it whether it
/// becomes a worker or dies unused.
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

    private struct State {
        var pending: [UInt32: CheckedContinuation<SpawnedProcess, any Error>] = [:]
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
        /// Callers of `settled()` waiting for the spare count to be reached.
        var settleWaiters: [CheckedContinuation<Void, Never>] = []
        /// The last spare could not be forked: no more are asked for until the next launch, so
        /// that a launcher that cannot fork is not asked again and again.
        var spareFailed = false

        var isSettled: Bool {
            stopped
                || (spareRequest == nil && (spares.count >= PreforkedLauncher.spareCount || spareFailed)
                    && spares.allSatisfy { $0.isPrepared && !$0.receivingHostTree })
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

    let executable: String
    private let socket: FileDescriptor
    private let process: SpawnedProcess
    private let loop: WorkerEventLoop
    /// The host's mount table, watched: spares copy the host's tree when they get ready (see
    /// `StartedWorker.hostTree`), so a change of mounts replaces them. Nil where it cannot be
    /// watched.
    private let mountTable: FileDescriptor?
    private let state = Locked(State())

    private static let launchers = Locked<[String: PreforkedLauncher]>([:])

    /// The running launcher for `executable`, if there is one.
    static func running(executable: String) -> PreforkedLauncher? {
        launchers.withLock { $0[executable] }.flatMap { $0.isStopped ? nil : $0 }
    }

    /// The running launcher for `executable`, started if there is none (or it died).
    static func shared(executable: String, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
        if let running = launchers.withLock({ $0[executable] }), !running.isStopped { return running }
        let started = try await startPrivate(executable: executable, loop: loop)
        return launchers.withLock { launchers in
            if let running = launchers[executable], !running.isStopped {
                started.stop()
                return running
            }
            launchers[executable] = started
            return started
        }
    }

    /// A launcher of the caller's own, not shared: it forks no spares unless asked to
    /// (`replenish`), and the caller stops it.
    static func startPrivate(executable: String, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
        var hostEnd: CInt = -1
        var launcherEnd: CInt = -1
        try checkShim("socketpair", plugind_shim_socket_pair(&hostEnd, &launcherEnd))
        let host = FileDescriptor(rawValue: hostEnd)
        let launcher = FileDescriptor(rawValue: launcherEnd)
        defer { launcher.close() }
        let null: FileDescriptor
        do {
            null = try FileDescriptor.open("/dev/null", O_RDWR)
        } catch {
            host.close()
            throw error
        }
        defer { null.close() }
        let request = SpawnRequest(
            executablePath: executable,
            arguments: [executable, "--launcher"],
            // Binding every symbol now, once, spares each worker the lazy binding of its own.
            environment: WorkerLauncher.environment() + ["LD_BIND_NOW=1"],
            descriptors: [null, null, null, launcher],
            options: [.dieWithParentThread]
        )
        // From the loop thread: the launcher's parent-death signal, and so its workers', follows
        // the thread that started it.
        let spawned: Result<SpawnedProcess, SystemError> = try await loop.run {
            do throws(SystemError) {
                return .success(try spawnProcess(request))
            } catch {
                return .failure(error)
            }
        }
        let process: SpawnedProcess
        switch spawned {
        case .success(let started): process = started
        case .failure(let error):
            host.close()
            throw error
        }
        let mountTable = try? FileDescriptor.open("/proc/self/mountinfo", O_RDONLY)
        let started = PreforkedLauncher(executable: executable, socket: host, process: process, loop: loop, mountTable: mountTable)
        do {
            try host.setNonBlocking()
            try loop.register(host, events: Epoll.readable, handler: started)
            try loop.register(process.processDescriptor, events: Epoll.readable, handler: started)
            if let mountTable { try loop.register(mountTable, events: Epoll.priority, handler: started) }
        } catch {
            started.stop()
            throw error
        }
        return started
    }

    private init(executable: String, socket: FileDescriptor, process: SpawnedProcess, loop: WorkerEventLoop, mountTable: FileDescriptor?) {
        self.executable = executable
        self.socket = socket
        self.process = process
        self.loop = loop
        self.mountTable = mountTable
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
        let process = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SpawnedProcess, any Error>) in
            let failure: SystemError? = state.withLock { state in
                guard !state.stopped else { return SystemError("launcher", .noSuchProcess) }
                let id = state.nextRequestID
                state.nextRequestID &+= 1
                if let error = send(id, options: options, descriptors: raw, cgroupFiles: cgroup?.processFiles ?? []) { return error }
                state.pending[id] = continuation
                return nil
            }
            if let failure { continuation.resume(throwing: failure) }
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
        state.withLock { state in
            if retryingAfterFailure { state.spareFailed = false }
            guard !state.stopped, !state.spareFailed, state.spares.count < Self.spareCount, state.spareRequest == nil else { return }
            let id = state.nextRequestID
            state.nextRequestID &+= 1
            // Whatever the launch that asks: a spare serves launches with every layer on and
            // without the network.
            let spareOptions = options.union(.newNetworkNamespace).subtracting(.noAdvanceRestrictions)
            if send(id, options: spareOptions, descriptors: []) == nil {
                state.spareRequest = id
                state.spareRequestGeneration = state.mountGeneration
            }
        }
    }

    private func send(_ id: UInt32, options: SpawnRequest.Options, descriptors: [CInt], cgroupFiles: [String] = []) -> SystemError? {
        var message = PayloadWriter(capacity: 64)
        message.write(id)
        message.write(options.rawValue)
        message.write(cgroupFiles)
        let result = message.bytes.withUnsafeBytes { bytes in
            descriptors.withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        return result == 0 ? nil : SystemError("sendmsg to the launcher", Errno(rawValue: result))
    }

    func handleEvent(descriptor: Int32, events: UInt32) {
        if descriptor == process.processDescriptor.rawValue {
            stop()
            return
        }
        if descriptor == mountTable?.rawValue {
            mountsChanged()
            return
        }
        if descriptor != socket.rawValue {
            if !sparePrepared(socket: descriptor) { spareExited(descriptor) }
            return
        }
        var message = [UInt8](repeating: 0, count: 16)
        var passed = [CInt](repeating: -1, count: 1)
        while true {
            var length = 0
            var count: CInt = 0
            let result = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &passed, 1, &count)
            }
            if result == EAGAIN { return }
            guard result == 0, length == 8 else {
                stop()
                return
            }
            var reader = PayloadReader(Array(message.prefix(8)))
            let spareSocket = count == 1 ? FileDescriptor(rawValue: passed[0]) : nil
            guard let id = try? reader.readUInt32(), let value = try? reader.readInt32() else {
                spareSocket?.close()
                continue
            }
            let (continuation, isSpare, outdated) = state.withLock { state in
                if state.spareRequest == id {
                    state.spareRequest = nil
                    return (
                        nil as CheckedContinuation<SpawnedProcess, any Error>?, true, state.spareRequestGeneration != state.mountGeneration
                    )
                }
                return (state.pending.removeValue(forKey: id), false, false)
            }
            if isSpare && outdated {
                // Asked for before the mounts changed: its copy of the host's tree may miss them.
                spareSocket?.close()
                if value > 0, let processDescriptor = try? FileDescriptor.processDescriptor(for: value) {
                    discard(
                        StartedWorker(
                            process: SpawnedProcess(processIdentifier: value, processDescriptor: processDescriptor), hostTree: nil))
                }
                replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
                resumeSettledWaiters()
                continue
            }
            if isSpare {
                if adoptSpare(pid: value, socket: spareSocket) {
                    replenish(options: WorkerLauncher.isolatingOptions(), retryingAfterFailure: false)
                } else {
                    state.withLock { $0.spareFailed = true }
                }
                resumeSettledWaiters()
                continue
            }
            spareSocket?.close()
            guard value > 0 else {
                continuation?.resume(throwing: SystemError("fork (pre-forked launcher)", Errno(rawValue: -value)))
                continue
            }
            // The pid cannot be reused before this process, its parent, reaps it.
            do {
                let processDescriptor = try FileDescriptor.processDescriptor(for: value)
                continuation?.resume(returning: SpawnedProcess(processIdentifier: value, processDescriptor: processDescriptor))
            } catch {
                continuation?.resume(throwing: error)
            }
        }
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

    /// Stops the launcher: pending forks fail, the process is killed and reaped on the loop thread.
    func stop() {
        stop(onLoop: true)
    }

    private func stop(onLoop: Bool) {
        typealias Stopped = (pending: [CheckedContinuation<SpawnedProcess, any Error>], spares: [Spare])
        let stopped: Stopped? = state.withLock { state -> Stopped? in
            guard !state.stopped else { return nil }
            state.stopped = true
            defer {
                state.pending.removeAll()
                state.spares.removeAll()
            }
            return (Array(state.pending.values), state.spares)
        }
        guard let stopped else { return }
        resumeSettledWaiters()
        for continuation in stopped.pending { continuation.resume(throwing: SystemError("launcher", .noSuchProcess)) }
        let (socket, process, loop, mountTable) = (socket, process, loop, mountTable)
        let end: @Sendable () -> Void = {
            loop.deregister(socket)
            socket.close()
            if let mountTable {
                loop.deregister(mountTable)
                mountTable.close()
            }
            for spare in stopped.spares {
                if !spare.isPrepared { loop.deregister(spare.socket) }
                spare.socket.close()
                spare.hostTree?.close()
            }
            for child in [process.processDescriptor] + stopped.spares.map(\.process.processDescriptor) {
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

/// Reaps a process whose pidfd became readable (it exited), then forgets it.
private final class ReapOnExit: EventLoopHandler {
    let loop: WorkerEventLoop
    let processDescriptor: FileDescriptor

    init(loop: WorkerEventLoop, processDescriptor: FileDescriptor) {
        self.loop = loop
        self.processDescriptor = processDescriptor
    }

    func handleEvent(descriptor: Int32, events: UInt32) {
        loop.deregister(processDescriptor)
        _ = try? processDescriptor.waitForProcessExit(noHang: true)
        processDescriptor.close()
    }

    /// Without the loop, the process is killed and reaped here.
    func loopFailed(_ error: SystemError) {
        processDescriptor.killAndReap()
    }
}
