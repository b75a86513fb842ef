import CPlugindConfinement
import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire

/// The pre-forked launcher (`plugind-worker --launcher`): started by the host ahead of need, with
/// the Swift runtime, libffi and the worker's code already loaded and warmed up. It stays
/// single-threaded, so forking without exec is safe. The host asks each launcher for one child
/// and then closes its socket (so that every worker has an address-space layout of its own, see
/// LaunchPool); the protocol below would serve more. It forks workers in two ways:
/// - *spares*, on the host's request, ahead of any launch: a spare waits on its own socket,
///   which the launcher hands to the host; a launch sends the worker's descriptors straight to
///   it, so neither fork, exec nor this process is on the launch's path;
/// - workers on the spot, when the host has no spare.
///
/// Protocol on descriptor 3 (a SOCK_SEQPACKET socket), all little-endian:
/// - host → launcher: `requestID: UInt32, options: Int32, cgroupFiles: [String]`, carrying either
///   the worker's output, protocol-in, protocol-out and shared-memory (or /dev/null) descriptors
///   followed by its sealed files (SCM_RIGHTS; fork a worker now, into the control group whose
///   cgroup.procs files are listed), or none (fork a spare);
/// - launcher → host: `requestID: UInt32, result: Int32`, the new process's pid or minus an
///   errno; for a spare it carries the spare's socket. Request 0 (result 0), sent first, says
///   the launcher is ready.
/// Workers and spares are the host's children (CLONE_PARENT), so the host reaps them; each fork
/// records its child's pid in the page on descriptor 4 (`ForkRecord`), so that the host finds
/// the child even if this process dies before it answers. End of file on the socket ends the
/// launcher.
enum Launcher {
    static let socket = FileDescriptor(rawValue: 3)
    static let recordDescriptor = FileDescriptor(rawValue: 4)

    private enum Forked {
        /// This is the launcher: the child's pid (or minus an errno), and the socket to pass on.
        case parent(Int32, FileDescriptor?)
        /// This is the child, which has done its work and exits with this status.
        case child(Int32)
    }

    static func run() -> Int32 {
        // Under memory pressure the kernel's OOM killer takes a worker (or a launcher, which the
        // host replaces) before the host: every spare and worker inherits this score. The host's
        // spawn raised it already; a launcher started otherwise raises it here, while still
        // dumpable (as root: an ordinary user's exec'd image finds the file root's). Best effort.
        _ = plugind_confinement_raise_oom_score(SpawnRequest.workerOOMScoreAdjustment)
        // Not dumpable, so that the owner's other processes cannot ptrace it, and every spare and
        // worker it forks is born the same (see `prepare_forked_process`).
        guard plugind_confinement_set_not_dumpable() == 0 else { return 2 }
        // Exec'd from a sealed copy, it would be named after the copy's descriptor.
        _ = plugind_shim_set_thread_name("plugind-worker")
        // Descriptor 4: the page where each fork records its child for the host (ForkRecord).
        // Mapped, it is closed; without it (or when it cannot be mapped) forks record nothing.
        let record = try? ForkRecord.mapInLauncher(recordDescriptor)
        if record == nil { recordDescriptor.close() }
        guard let null = try? FileDescriptor.open("/dev/null", O_RDWR) else { return 2 }
        Confinement.prepareForForks()
        // Ready: the host counts a launcher still starting as work in progress.
        guard reply(requestID: 0, result: 0, passing: nil) else { return 0 }
        var received = [CInt](repeating: -1, count: Int(PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS))
        while let (requestID, options, cgroupFiles, descriptors) = receiveRequest(into: &received) {
            // Forking without exec is only safe while no other thread can hold a lock: checked,
            // not assumed. The host then spawns instead.
            let forked: Forked
            if threadCount() != 1 {
                WorkerMain.report("launcher: more than one thread; refusing to fork")
                forked = .parent(-EDEADLK, nil)
            } else {
                let childPIDAddress = record?.childPIDAddress(for: requestID) ?? 0
                forked =
                    descriptors.isEmpty
                    ? forkSpare(options: options, childPIDAddress: childPIDAddress)
                    : forkDirectly(
                        descriptors, null: null, options: options, cgroupFiles: cgroupFiles, childPIDAddress: childPIDAddress)
            }
            switch forked {
            case .child(let status):
                return status
            case .parent(let result, let passed):
                for descriptor in descriptors { descriptor.close() }
                let sent = reply(requestID: requestID, result: result, passing: passed)
                passed?.close()
                if !sent { return 0 }
            }
        }
        return 0
    }

    /// The number of threads in this process (field 20 of /proc/self/stat), or 0 if unknown.
    private static func threadCount() -> Int {
        guard let stat = try? FileDescriptor.open("/proc/self/stat", O_RDONLY) else { return 0 }
        defer { stat.close() }
        guard let bytes = try? stat.readToEnd(limit: 4096), let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return 0 }
        // Fields after the command name, which may contain spaces, start with field 3.
        let fields = bytes[(close + 2)...].split(separator: UInt8(ascii: " "))
        return fields.count > 17 ? Int(String(decoding: fields[17], as: UTF8.self)) ?? 0 : 0
    }

    /// Reads one request; nil when the host closed the socket.
    private static func receiveRequest(into received: inout [CInt]) -> (UInt32, SpawnRequest.Options, [String], [FileDescriptor])? {
        while true {
            var message = [UInt8](repeating: 0, count: 8192)
            var length = 0
            var count: CInt = 0
            let status = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(
                    socket.rawValue, bytes.baseAddress!, bytes.count, &length, &received, CInt(received.count), &count)
            }
            if status != 0 || length == 0 { return nil }
            let descriptors = received.prefix(Int(count)).map(FileDescriptor.init(rawValue:))
            var reader = PayloadReader(Array(message.prefix(length)))
            guard descriptors.isEmpty || descriptors.count >= workerDescriptorCount,
                let requestID = try? reader.readUInt32(), let options = try? reader.readInt32(),
                let cgroupFiles = try? reader.readStrings(), reader.remaining == 0
            else {
                WorkerMain.report("launcher: malformed request (\(length) bytes, \(descriptors.count) descriptors)")
                for descriptor in descriptors { descriptor.close() }
                continue
            }
            return (requestID, SpawnRequest.Options(rawValue: options).union(.sibling), cgroupFiles, descriptors)
        }
    }

    /// The descriptors a launch passes before the sealed files: output, protocol in, protocol
    /// out, shared memory (or /dev/null).
    static let workerDescriptorCount = 4

    /// Forks a worker on the spot. In the child, builds its view and runs the worker.
    private static func forkDirectly(
        _ descriptors: [FileDescriptor], null: FileDescriptor, options: SpawnRequest.Options, cgroupFiles: [String],
        childPIDAddress: Int
    ) -> Forked {
        var request = SpawnRequest(
            executablePath: "",
            arguments: [],
            environment: [],
            descriptors: [null, descriptors[0], descriptors[0]] + descriptors[1...],
            options: options
        )
        request.cgroupFiles = cgroupFiles
        request.childPIDAddress = childPIDAddress
        // The host turns confinement (or a layer of it) off for this worker: nothing ahead.
        let restrictingAhead = !options.contains(.noAdvanceRestrictions)
        request.options.remove(.noAdvanceRestrictions)
        switch withNamespaceFallback(
            request.options,
            { options throws(SystemError) in
                var adjusted = request
                adjusted.options = options
                return try forkWorker(adjusted)
            })
        {
        case .success((nil, let effective)):
            let prepared = Confinement.prepare(
                hasNamespaces: effective.isSuperset(of: .namespaces), hasNetworkNamespace: effective.contains(.newNetworkNamespace),
                restrictingAhead: restrictingAhead)
            return .child(WorkerMain.run(prepared: prepared))
        case .success((let pid?, _)): return .parent(pid, nil)
        case .failure(let error): return .parent(-error.errno.rawValue, nil)
        }
    }

    /// Forks a spare; the launcher's end of its socket goes to the host.
    private static func forkSpare(options: SpawnRequest.Options, childPIDAddress: Int) -> Forked {
        var first: CInt = -1
        var second: CInt = -1
        let paired = plugind_shim_socket_pair(&first, &second)
        guard paired == 0 else { return .parent(-paired, nil) }
        let (hostEnd, spareEnd) = (FileDescriptor(rawValue: first), FileDescriptor(rawValue: second))
        switch withNamespaceFallback(
            options,
            { options throws(SystemError) in
                try PlugindSystem.forkSpare(options: options, keeping: spareEnd, childPIDAddress: childPIDAddress)
            })
        {
        case .success((nil, let effective)):
            return .child(
                serveAsSpare(
                    spareEnd, hasNamespaces: effective.isSuperset(of: .namespaces),
                    hasNetworkNamespace: effective.contains(.newNetworkNamespace)))
        case .success((let pid?, _)):
            spareEnd.close()
            return .parent(pid, hostEnd)
        case .failure(let error):
            hostEnd.close()
            spareEnd.close()
            return .parent(-error.errno.rawValue, nil)
        }
    }

    /// The spare: gets ready while it waits (its copy-on-write pages written, the view every
    /// plugin starts from built, the common Landlock rules made, the restrictions every plugin
    /// gets in force), then takes a worker's descriptors and serves the host. The host gives a
    /// spare only to launches with every layer on. Ends quietly when the host goes away.
    private static func serveAsSpare(_ socket: FileDescriptor, hasNamespaces: Bool, hasNetworkNamespace: Bool) -> Int32 {
        LauncherWarmUp.run()
        var prepared = Confinement.prepare(
            hasNamespaces: hasNamespaces, hasNetworkNamespace: hasNetworkNamespace, restrictingAhead: true, isSpare: true)
        // What the warm-up and the preparation freed goes back now, while the spare waits: the
        // worker's first allocations (its transport's buffer among them) would otherwise reuse
        // those pages whole, already written, and keep them as its own.
        plugind_shim_release_free_memory()
        // Ready: the host prefers a spare that says so, and waits for it when it settles. The host
        // may have handed this spare its work already (and closed its end): then the send fails
        // and the work is read all the same.
        // With it goes a reference to the view's copy of the host's tree, which the host closes
        // after the launch: the worker's own close is then cheap (see StartedWorker.hostTree).
        let ready: [UInt8] = [1]
        let hostTree = plugind_sandbox_host_tree()
        let handedOver = hostTree >= 0 ? [hostTree] : []
        _ = ready.withUnsafeBytes { bytes in
            handedOver.withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        let (socket, inPlace) = clearPlaceForWork(socket: socket, prepared: &prepared)
        var message = [UInt8](repeating: 0, count: 4)
        var received = [CInt](repeating: -1, count: Int(PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS))
        var length = 0
        var count: CInt = 0
        var status: CInt
        var woken = false
        repeat {
            // A host that closed its end before reading that byte leaves ECONNRESET, reported
            // once, ahead of the message it sent before closing.
            status = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(
                    socket.rawValue, bytes.baseAddress!, bytes.count, &length, &received, CInt(received.count), &count)
            }
            woken = status == 0 && length == 1 && count == 0 && message[0] == SpareMessage.wake
            // Whatever comes is read below; the spin only spares a wake-up.
            if woken {
                let deadline = MonotonicInstant.after(spinAfterWake)
                _ = socket.awaitReadable(spinUntil: deadline, sleepUntil: deadline)
            }
        } while status == ECONNRESET || woken
        // The host sends the output pipe twice, for descriptors 1 and 2.
        guard status == 0, length > 0, count > workerDescriptorCount else { return 0 }
        let passed = received.prefix(Int(count)).map(FileDescriptor.init(rawValue:))
        socket.close()
        if inPlace && passed.enumerated().allSatisfy({ $1.rawValue == CInt($0 + 1) }) {
            // Received in place: only standard output and error lose close-on-exec, for programs
            // a plugin may start.
            for descriptor: CInt in [1, 2] { _ = fcntl(descriptor, F_SETFD, 0) }
        } else if !installInPlace([.standardInput] + passed, prepared: &prepared) {
            return 127
        }
        return WorkerMain.run(prepared: prepared)
    }

    /// The lowest descriptor number a spare keeps its own descriptors at while it waits: above
    /// any a launch passes, so that the launch's arrive in place.
    private static let keptDescriptorFloor = CInt(PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS) + 8

    /// Moves what the spare keeps (its socket, the prepared rulesets, the view's copy of the
    /// host's tree) above `keptDescriptorFloor` and closes every descriptor from 1 below it, so
    /// that the launch's descriptors are received straight where the worker needs them (1, 2,
    /// 3, …; 0 is /dev/null already) with no copying afterwards. Returns the socket and whether
    /// the range is clear; when a move fails the layout stays as it was.
    private static func clearPlaceForWork(socket: FileDescriptor, prepared: inout Confinement.Prepared) -> (FileDescriptor, Bool) {
        func moveUp(_ descriptor: FileDescriptor) -> FileDescriptor? {
            guard let moved = try? descriptor.duplicate(minimum: keptDescriptorFloor) else { return nil }
            descriptor.close()
            return moved
        }
        guard let movedSocket = moveUp(socket) else { return (socket, false) }
        if let rulesets = prepared.rulesets {
            guard let withoutNetwork = moveUp(rulesets.withoutNetwork) else { return (movedSocket, false) }
            guard let withNetwork = moveUp(rulesets.withNetwork) else {
                prepared.rulesets = rulesets.moved(withoutNetwork: withoutNetwork, withNetwork: rulesets.withNetwork)
                return (movedSocket, false)
            }
            prepared.rulesets = rulesets.moved(withoutNetwork: withoutNetwork, withNetwork: withNetwork)
        }
        let hostTree = plugind_sandbox_host_tree()
        if hostTree >= 0 {
            guard let moved = moveUp(FileDescriptor(rawValue: hostTree)) else { return (movedSocket, false) }
            plugind_sandbox_set_host_tree(moved.rawValue)
        }
        return (movedSocket, plugind_shim_close_range(1, UInt32(keptDescriptorFloor - 1)) == 0)
    }

    /// Puts `mapping` (the worker's descriptors, from 0) in place, followed by the prepared
    /// rulesets and the view's copy of the host's tree, and closes everything else. False when
    /// that fails (reported).
    private static func installInPlace(_ mapping: [FileDescriptor], prepared: inout Confinement.Prepared) -> Bool {
        var mapping = mapping
        let rulesetDescriptors = prepared.rulesets.map { rulesets -> (FileDescriptor, FileDescriptor) in
            mapping += [rulesets.withoutNetwork, rulesets.withNetwork]
            return (FileDescriptor(rawValue: CInt(mapping.count - 2)), FileDescriptor(rawValue: CInt(mapping.count - 1)))
        }
        let hostTree = plugind_sandbox_host_tree()
        if hostTree >= 0 { mapping.append(FileDescriptor(rawValue: hostTree)) }
        do {
            try installDescriptors(mapping)
        } catch {
            WorkerMain.report("spare worker: \(error)")
            return false
        }
        // dup2 cleared close-on-exec; nothing the plugin starts may inherit these.
        if hostTree >= 0 {
            let moved = FileDescriptor(rawValue: CInt(mapping.count - 1))
            try? moved.setCloseOnExec()
            plugind_sandbox_set_host_tree(moved.rawValue)
        }
        if let (withoutNetwork, withNetwork) = rulesetDescriptors, let rulesets = prepared.rulesets {
            for descriptor in [withoutNetwork, withNetwork] { try? descriptor.setCloseOnExec() }
            prepared.rulesets = rulesets.moved(withoutNetwork: withoutNetwork, withNetwork: withNetwork)
        }
        return true
    }

    /// How long a woken spare waits for its work without sleeping; then it sleeps until the
    /// work (or the end of its host) comes.
    static let spinAfterWake: Duration = .microseconds(500)

    private static func reply(requestID: UInt32, result: Int32, passing descriptor: FileDescriptor?) -> Bool {
        var message = PayloadWriter(capacity: 8)
        message.write(requestID)
        message.write(result)
        let raw = descriptor.map { [$0.rawValue] } ?? []
        return message.bytes.withUnsafeBytes { bytes in
            raw.withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        } == 0
    }
}
