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
    /// The pool's number for it (`LaunchPoolState`), in the order spares arrived.
    let id: UInt64

    init(process: SpawnedProcess, socket: FileDescriptor, readiness: Readiness, id: UInt64) {
        self.process = process
        self.socket = socket
        self.readiness = readiness
        self.id = id
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

/// The spares a pool holds, by id (`LaunchPoolState` numbers them): those in its slots, and for a
/// moment one on its way to the effect that ends it. Non-copyable each, so kept in a fixed number
/// of places rather than a dictionary; the state machine decides which spare is taken, this only
/// holds them.
struct SpareSlots: ~Copyable {
    private var slots: InlineArray<4, Spare?> = [nil, nil, nil, nil]

    init() {}

    /// The pids of the spares `ids` names, in that order.
    func processIdentifiers(of ids: [UInt64]) -> [Int32] {
        ids.compactMap { id in
            for index in slots.indices {
                switch slots[index] {
                case .some(let spare) where spare.id == id: return spare.process.processIdentifier
                default: continue
                }
            }
            return nil
        }
    }

    /// The id of the first spare `matches` picks.
    func id(where matches: (borrowing Spare) -> Bool) -> UInt64? {
        for index in slots.indices {
            switch slots[index] {
            case .some(let spare) where matches(spare): return spare.id
            default: continue
            }
        }
        return nil
    }

    /// Keeps `spare`; gives it back when every place is taken (the caller ends it then).
    mutating func insert(_ spare: consuming Spare) -> Spare? {
        var free: Int?
        for index in slots.indices where free == nil {
            switch slots[index] {
            case .some: continue
            case .none: free = index
            }
        }
        guard let free else { return .some(spare) }
        slots[free] = .some(spare)
        return nil
    }

    /// Spare `id`, taken out.
    mutating func take(_ id: UInt64) -> Spare? {
        var found: Int?
        for index in slots.indices where found == nil {
            switch slots[index] {
            case .some(let spare) where spare.id == id: found = index
            default: continue
            }
        }
        guard let found else { return nil }
        return slots[found].take()
    }
}
