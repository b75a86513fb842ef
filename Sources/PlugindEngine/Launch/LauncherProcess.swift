import CPlugindShims
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

/// A launcher process (`plugind-worker --launcher`) and the host's end of its socket. The pool
/// asks it for children; see `LaunchPool` for how many it forks. Two values are the same launcher
/// when their serials are equal: a let-go launcher's socket number is reused by the next one made,
/// so comparing sockets would take the idle launcher for one that had just died.
struct LauncherProcess: Sendable, Equatable {
    let socket: FileDescriptor
    let process: SpawnedProcess
    /// Unique in this process, unlike descriptor numbers and (once reaped) pids: what the pool
    /// tells launchers apart by when it lets one go.
    let serial: UInt64
    /// Where the launcher's forks record their children (nil if the page could not be made:
    /// then a launcher killed between a fork and its answer leaves that child unreaped).
    let forkRecord: ForkRecord?
    /// When it was spawned: how long it took to say it is ready is kept by its pool.
    let started: ContinuousClock.Instant

    private static let serials = Locked<UInt64>(0)

    static func == (left: LauncherProcess, right: LauncherProcess) -> Bool { left.serial == right.serial }

    /// Starts a launcher from `image` (an execute-only copy of `executable`, when there is one),
    /// its pidfd and socket watched by `handler`. On the loop thread: a launcher's parent-death
    /// signal, and so its children's, follows the thread that started it.
    static func start(
        executable: String, image: FileDescriptor?, environment: [String], loop: WorkerEventLoop, handler: any EventLoopHandler
    ) throws(SystemError) -> LauncherProcess {
        let started = ContinuousClock.now
        var hostEnd: CInt = -1
        var launcherEnd: CInt = -1
        try checkShim("socketpair", plugind_shim_socket_pair(&hostEnd, &launcherEnd))
        let host = FileDescriptor(rawValue: hostEnd)
        let launcher = FileDescriptor(rawValue: launcherEnd)
        defer { launcher.close() }
        do throws(SystemError) {
            let null = try FileDescriptor.openNullDevice(writable: true)
            defer { null.close() }
            let record = try? ForkRecord.create()
            defer { record?.1.close() }
            var request = SpawnRequest(
                executablePath: executable,
                arguments: [executable, "--launcher"],
                environment: environment,
                descriptors: [null, null, null, launcher] + (record.map { [$0.1] } ?? []),
                options: [.dieWithParentThread, .raiseOOMScore]
            )
            // Raised before the exec: the launcher, exec'd not dumpable, cannot raise its own
            // unless the host is root; every spare and worker it forks inherits it.
            request.oomScoreAdjustment = SpawnRequest.workerOOMScoreAdjustment
            let process: SpawnedProcess
            if let image {
                process = try spawn(request, from: image)
            } else {
                process = try spawnProcess(request)
            }
            do throws(SystemError) {
                try host.setNonBlocking()
                try loop.register(process.processDescriptor, events: Epoll.readable, handler: handler)
                try loop.register(host, events: Epoll.readable, handler: handler)
            } catch {
                // Forgetting what was not registered is a no-op.
                loop.deregister(process.processDescriptor)
                process.processDescriptor.killAndReap()
                throw error
            }
            let serial = serials.withLock { serial in
                serial += 1
                return serial
            }
            return LauncherProcess(socket: host, process: process, serial: serial, forkRecord: record?.0, started: started)
        } catch {
            host.close()
            throw error
        }
    }

    /// Spawns `request` from `image`. A worker of an ordinary user's host runs as the image's
    /// owner and reaches it through /proc/self/exe, so it can change its mode: execute-only again
    /// before each exec (a readable image makes the launcher dumpable until it says otherwise),
    /// and by the path when the exec is refused all the same (the worker cleared the execute bits
    /// again in between): no worker can make its host's later launches fail.
    private static func spawn(_ request: SpawnRequest, from image: FileDescriptor) throws(SystemError) -> SpawnedProcess {
        _ = plugind_shim_sealed_file_restrict_to_execution(image.rawValue)
        var fromImage = request
        fromImage.executableDescriptor = image
        do throws(SystemError) {
            return try spawnProcess(fromImage)
        } catch {
            guard error.errno == .permissionDenied else { throw error }
            return try spawnProcess(request)
        }
    }

    /// Asks for a child: request `id`, how to fork it, the control group files it joins, and the
    /// descriptors it gets (none for a spare). Never under a lock: `sendmsg` may wait for room.
    func send(_ id: UInt32, options: SpawnRequest.Options, descriptors: [CInt], cgroupFiles: [String] = []) -> SystemError? {
        forkRecord?.expect(request: id)
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
}

/// What launchers are exec'd from, decided once per worker executable and kept for the life of
/// the process: every pool of it, private ones included, execs its launchers the same way. A
/// launcher must be undumpable from its first instruction and run bytes nobody else can change.
/// An execute-only sealed copy (`SealedFile.executableCopy`) gives both, at the cost of copying
/// the executable once per process (most of a one-shot `plugind run`'s time); the executable
/// itself gives both when root owns it and every directory on the way, nobody else may write
/// them, and the host either is root (no other user may trace root's processes, and root reads
/// any copy anyway) or may not read the file (the kernel then makes the launcher undumpable at
/// its exec, as it does for the copy).
package enum LauncherImages {
    private static let images = Locked<[String: FileDescriptor?]>([:])

    /// The copy of `executable`; nil when launchers are exec'd from the executable itself: it
    /// needs no copy (`needsNoCopy`), or none could be made (then they are dumpable until their
    /// first instruction that says otherwise).
    static func image(of executable: String) -> FileDescriptor? {
        if let decided = images.withLock({ $0[executable] }) { return decided }
        // Copied outside the lock; of two copies made at once, one is kept.
        let copy = needsNoCopy(executable) ? nil : try? SealedFile.executableCopy(of: executable)
        let kept = images.withLock { images in
            if let decided = images[executable] { return decided }
            images[executable] = copy
            return copy
        }
        if let copy, kept != copy { copy.close() }
        return kept
    }

    /// Whether a launcher exec'd from `executable` itself is undumpable from its first
    /// instruction and runs bytes only root can change (see the type).
    package static func needsNoCopy(_ executable: String) -> Bool {
        guard case .success(let resolution) = TrustedLibraryPath.resolve(executable, rule: .installedProgram) else { return false }
        // As the kernel asks at exec: with the effective ids, which `access` would not use.
        return geteuid() == 0 || faccessat(AT_FDCWD, resolution.canonicalPath, R_OK, AT_EACCESS) != 0
    }
}
