import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import PlugindWire
import Synchronization

/// The host's side of the pre-forked launcher (`plugind-worker --launcher`): one per worker
/// executable, started on first use, it hands out workers it forked ahead of time (spares), so a
/// launch skips fork, exec and dynamic linking. The multi-threaded host never forks without exec
/// itself; the launcher is single-threaded. Workers and spares are children of the host
/// (CLONE_PARENT): the host holds a pidfd for each spare from the moment the launcher announces
/// it, and reaps it whether it becomes a worker or dies unused.
final class PreforkedLauncher: EventLoopHandler {
    private struct State {
        var pending: [UInt32: CheckedContinuation<SpawnedProcess, any Error>] = [:]
        var nextRequestID: UInt32 = 1
        var stopped = false
        /// Spares announced by the launcher and not handed out yet, with their pidfds.
        var spares: [Int32: FileDescriptor] = [:]
    }

    private let executable: String
    private let socket: FileDescriptor
    private let process: SpawnedProcess
    private let loop: WorkerEventLoop
    private let state = Mutex(State())

    private static let launchers = Mutex<[String: PreforkedLauncher]>([:])

    /// The running launcher for `executable`, started if there is none (or it died).
    static func shared(executable: String, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
        if let running = launchers.withLock({ $0[executable] }), !running.isStopped { return running }
        let started = try await start(executable: executable, loop: loop)
        return launchers.withLock { launchers in
            if let running = launchers[executable], !running.isStopped {
                started.stop()
                return running
            }
            launchers[executable] = started
            return started
        }
    }

    private static func start(executable: String, loop: WorkerEventLoop) async throws -> PreforkedLauncher {
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
            environment: WorkerLauncher.environment(),
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
        let started = PreforkedLauncher(executable: executable, socket: host, process: process, loop: loop)
        do {
            try host.setNonBlocking()
            try loop.register(host, events: Epoll.readable, handler: started)
            try loop.register(process.processDescriptor, events: Epoll.readable, handler: started)
        } catch {
            started.stop()
            throw error
        }
        return started
    }

    private init(executable: String, socket: FileDescriptor, process: SpawnedProcess, loop: WorkerEventLoop) {
        self.executable = executable
        self.socket = socket
        self.process = process
        self.loop = loop
    }

    var isStopped: Bool {
        state.withLock { $0.stopped }
    }

    /// Starts a worker with `descriptors` (output, protocol in, protocol out) and `options`;
    /// returns its pid and pidfd. The worker is a child of this process.
    func fork(descriptors: [FileDescriptor], options: SpawnRequest.Options) async throws -> SpawnedProcess {
        try await withCheckedThrowingContinuation { continuation in
            let sent: SystemError? = state.withLock { state in
                guard !state.stopped else { return SystemError("launcher", .noSuchProcess) }
                let id = state.nextRequestID
                state.nextRequestID &+= 1
                var message = PayloadWriter(capacity: 8)
                message.write(id)
                message.write(options.rawValue)
                let raw = descriptors.map(\.rawValue)
                let result = message.bytes.withUnsafeBytes { bytes in
                    raw.withUnsafeBufferPointer { fds in
                        plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
                    }
                }
                guard result == 0 else { return SystemError("sendmsg to the launcher", Errno(rawValue: result)) }
                state.pending[id] = continuation
                return nil
            }
            if let sent { continuation.resume(throwing: sent) }
        }
    }

    func handleEvent(descriptor: Int32, events: UInt32) {
        if descriptor == process.processDescriptor.rawValue {
            stop()
            return
        }
        if descriptor != socket.rawValue {
            spareExited(descriptor)
            return
        }
        var message = [UInt8](repeating: 0, count: 16)
        var descriptors = [CInt](repeating: -1, count: 1)
        while true {
            var length = 0
            var count: CInt = 0
            let result = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &descriptors, 1, &count)
            }
            if result == EAGAIN { return }
            guard result == 0, length == 8 else {
                stop()
                return
            }
            var reader = PayloadReader(Array(message.prefix(8)))
            guard let id = try? reader.readUInt32(), let value = try? reader.readInt32() else { continue }
            if id == 0 {
                spareAnnounced(value)
                continue
            }
            let continuation = state.withLock { $0.pending.removeValue(forKey: id) }
            guard value > 0 else {
                continuation?.resume(throwing: SystemError("fork (pre-forked launcher)", Errno(rawValue: -value)))
                continue
            }
            // A spare brings its pidfd; a worker forked on the spot gets one now. Either way the
            // pid cannot be reused before this process reaps it.
            let spare = state.withLock { $0.spares.removeValue(forKey: value) }
            if let spare { loop.deregister(spare) }
            do {
                let processDescriptor = try spare ?? FileDescriptor.processDescriptor(for: value)
                continuation?.resume(returning: SpawnedProcess(processIdentifier: value, processDescriptor: processDescriptor))
            } catch {
                continuation?.resume(throwing: error)
            }
        }
    }

    private func spareAnnounced(_ pid: Int32) {
        guard pid > 0, let processDescriptor = try? FileDescriptor.processDescriptor(for: pid) else { return }
        state.withLock { $0.spares[pid] = processDescriptor }
        if (try? loop.register(processDescriptor, events: Epoll.readable, handler: self)) == nil {
            state.withLock { _ = $0.spares.removeValue(forKey: pid) }
            processDescriptor.close()
        }
    }

    /// A spare died before it was handed out: reap it.
    private func spareExited(_ descriptor: Int32) {
        let spare = state.withLock { state -> FileDescriptor? in
            guard let pid = state.spares.first(where: { $0.value.rawValue == descriptor })?.key else { return nil }
            return state.spares.removeValue(forKey: pid)
        }
        guard let spare else { return }
        loop.deregister(spare)
        _ = try? spare.waitForProcessExit()
        spare.close()
    }

    /// Stops the launcher: pending forks fail, the process is killed and reaped on the loop thread.
    func stop() {
        let stopped: (pending: [CheckedContinuation<SpawnedProcess, any Error>], spares: [FileDescriptor])? = state.withLock { state in
            guard !state.stopped else { return nil }
            state.stopped = true
            defer {
                state.pending.removeAll()
                state.spares.removeAll()
            }
            return (Array(state.pending.values), Array(state.spares.values))
        }
        guard let stopped else { return }
        for continuation in stopped.pending { continuation.resume(throwing: SystemError("launcher", .noSuchProcess)) }
        let (socket, process, loop) = (socket, process, loop)
        loop.execute {
            loop.deregister(socket)
            socket.close()
            for child in [process.processDescriptor] + stopped.spares {
                loop.deregister(child)
                try? child.sendSignal(SIGKILL)
                _ = try? child.waitForProcessExit()
                child.close()
            }
        }
    }
}
