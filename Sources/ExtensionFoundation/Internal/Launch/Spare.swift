import CPlugindShims
import PlugindSystem

/// A worker process forked ahead by a launcher, confined but holding no plugin yet, waiting on its
/// socket for a launch's descriptors. Non-copyable, so that every spare ends exactly once and in
/// one of two ways: it becomes a worker (`hand`), or it is ended (`end`). A spare dropped any other
/// way is killed and reaped by its `deinit`, which blocks for the reap: no path leaks one.
///
/// While it waits in the pool, its pidfd is watched (a spare that dies unused is reaped) and, until
/// it says it is ready, its socket; the methods below forget both.
struct Spare: ~Copyable {
    /// How far the spare is in getting ready.
    enum Readiness: Equatable {
        /// Still setting itself up: its socket is watched for the ready byte.
        case preparing
        /// Ready, with its detached copy of the host's tree, if it sent one (see
        /// `StartedWorker.hostTree`).
        case prepared(hostTree: FileDescriptor?)
    }

    let process: SpawnedProcess
    let socket: FileDescriptor
    var readiness: Readiness
    /// The order spares arrived in (the pool numbers them): the oldest is the likeliest to be
    /// ready soonest.
    var arrival: UInt64 = 0

    init(process: SpawnedProcess, socket: FileDescriptor, readiness: Readiness) {
        self.process = process
        self.socket = socket
        self.readiness = readiness
    }

    var isPrepared: Bool {
        if case .prepared = readiness { return true }
        return false
    }

    /// Whether its socket is still watched for the ready byte.
    private var socketWatched: Bool { !isPrepared }

    private var hostTree: FileDescriptor? {
        if case .prepared(let hostTree) = readiness { return hostTree }
        return nil
    }

    /// Sends a worker's descriptors (`SpareMessage.work`), and the spare becomes that worker. Nil
    /// when it is unusable (dead, or its socket failed): it is ended then.
    consuming func hand(_ descriptors: [CInt], loop: WorkerEventLoop) -> StartedWorker? {
        let marker: [UInt8] = [SpareMessage.work]
        // The output pipe twice: the spare receives them as its descriptors 1, 2, 3, ….
        let sent = marker.withUnsafeBytes { bytes in
            ([descriptors[0]] + descriptors).withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        // A spare not known to be ready may be just now: its ready byte is read (never waiting),
        // since a socket closed with unread data would make the spare's next read fail once.
        let started = leavePool(loop: loop, readingReadiness: true)
        if sent == 0 { return started }
        started.end(loop: loop)
        return nil
    }

    /// Ends the spare: killed (if it has not died already), and reaped on the loop thread once it
    /// has exited.
    consuming func end(loop: WorkerEventLoop) {
        leavePool(loop: loop, readingReadiness: false).end(loop: loop)
    }

    /// The process, no longer a spare: its socket closed, nothing of it watched any more.
    private consuming func leavePool(loop: WorkerEventLoop, readingReadiness: Bool) -> StartedWorker {
        if socketWatched { loop.deregister(socket) }
        let tree = isPrepared || !readingReadiness ? hostTree : Self.receiveReadiness(socket)
        socket.close()
        loop.deregister(process.processDescriptor)
        let started = StartedWorker(process: process, hostTree: tree)
        discard self
        return started
    }

    deinit {
        // Not reached on any path of the pool (each ends the spare with one of the methods
        // above); a spare dropped by mistake is still ended, not leaked.
        socket.close()
        hostTree?.close()
        process.processDescriptor.killAndReap()
    }

    /// Reads a spare's ready byte, without waiting, and the copy of the host's tree it may hand
    /// over with it.
    static func receiveReadiness(_ socket: FileDescriptor) -> FileDescriptor? {
        var byte: UInt8 = 0
        var length = 0
        var passed: CInt = -1
        var count: CInt = 0
        let result = plugind_shim_receive_descriptors(socket.rawValue, &byte, 1, &length, &passed, 1, &count)
        return result == 0 && count == 1 ? FileDescriptor(rawValue: passed) : nil
    }
}

/// A worker a launcher started: from a spare, or forked on the spot.
struct StartedWorker: Sendable {
    let process: SpawnedProcess
    /// A spare settles its view ahead and binds the plugin's files from a detached copy of the
    /// host's tree, which it closes before plugin code runs. Closing the last reference to such a
    /// tree waits for the kernel (tens of microseconds), so the spare hands the host a reference:
    /// the worker's close is then cheap, and this one is closed once the worker has completed its
    /// view (`LaunchPool.launchFinished`), off the launch's path.
    let hostTree: FileDescriptor?

    /// Ends a worker that will not be used: killed, reaped on the loop thread, its copy of the
    /// host's tree dropped.
    func end(loop: WorkerEventLoop) {
        hostTree?.close()
        try? process.processDescriptor.sendSignal(SignalNumber.kill)
        Self.reapLater(process.processDescriptor, loop: loop)
    }

    /// Ends it and waits until it is reaped: on the loop's thread, or for tests that count this
    /// process's children.
    func endNow(loop: WorkerEventLoop) {
        hostTree?.close()
        loop.deregister(process.processDescriptor)
        process.processDescriptor.killAndReap()
    }

    /// Reaps a process once it has exited, on the loop thread: a wait that can block never runs on
    /// the caller's task.
    static func reapLater(_ descriptor: FileDescriptor, loop: WorkerEventLoop) {
        do {
            try loop.register(descriptor, events: Epoll.readable, handler: ReapOnExit(loop: loop, processDescriptor: descriptor))
        } catch {
            // Without the loop, kill it so that the wait is short.
            descriptor.killAndReap()
        }
    }
}

/// The pool's spares. Non-copyable each, so kept in a fixed number of slots rather than an array.
struct SpareSlots: ~Copyable {
    private var slots: InlineArray<2, Spare?> = [nil, nil]

    /// How many spares the pool keeps: two, so that back-to-back launches find one that has
    /// finished warming up while the next one is still being made.
    static var capacity: Int { 2 }

    init() {}

    var count: Int {
        var count = 0
        for index in slots.indices where holds(index, { _ in true }) { count += 1 }
        return count
    }

    var isFull: Bool { count >= Self.capacity }

    /// The pids of the spares held.
    var processIdentifiers: [Int32] {
        var pids: [Int32] = []
        for index in slots.indices {
            switch slots[index] {
            case .some(let spare): pids.append(spare.process.processIdentifier)
            case .none: break
            }
        }
        return pids
    }

    var allPrepared: Bool {
        for index in slots.indices where holds(index, { !$0.isPrepared }) { return false }
        return true
    }

    /// Whether slot `index` holds a spare that `matches` picks.
    private func holds(_ index: Int, _ matches: (borrowing Spare) -> Bool) -> Bool {
        switch slots[index] {
        case .some(let spare): matches(spare)
        case .none: false
        }
    }

    /// Keeps `spare`; gives it back when every slot is taken.
    mutating func insert(_ spare: consuming Spare) -> Spare? {
        var free: Int?
        for index in slots.indices where free == nil && !holds(index, { _ in true }) { free = index }
        guard let free else { return .some(spare) }
        slots[free] = .some(spare)
        return nil
    }

    /// The spare for a launch: the first that is ready, else the oldest (the likeliest to be
    /// ready by the time it reads).
    mutating func takeForLaunch() -> Spare? {
        if let prepared = takePrepared() { return prepared }
        var oldest: (index: Int, arrival: UInt64)?
        for index in slots.indices {
            switch slots[index] {
            case .some(let spare) where oldest.map({ spare.arrival < $0.arrival }) ?? true: oldest = (index, spare.arrival)
            default: break
            }
        }
        guard let oldest else { return nil }
        return slots[oldest.index].take()
    }

    mutating func takePrepared() -> Spare? {
        take { $0.isPrepared }
    }

    /// The first spare `matches` picks, taken out of its slot.
    mutating func take(where matches: (borrowing Spare) -> Bool) -> Spare? {
        for index in slots.indices where holds(index, matches) {
            return slots[index].take()
        }
        return nil
    }

    /// Takes every spare out, each passed to `body`.
    mutating func removeAll(_ body: (consuming Spare) -> Void) {
        for index in slots.indices {
            if let spare = slots[index].take() { body(spare) }
        }
    }
}
