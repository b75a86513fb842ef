import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire

/// The pre-forked launcher (`plugind-worker --launcher`): started once per host, with the Swift
/// runtime, libffi and the worker's code already loaded and warmed up. It keeps one *spare*
/// worker forked ahead of time, waiting for its descriptors; a launch hands them to the spare and
/// forks the next spare afterwards, so neither fork nor exec is on a launch's path. It stays
/// single-threaded, so forking without exec is safe.
///
/// Protocol on descriptor 3 (a SOCK_SEQPACKET socket), all little-endian:
/// - host → launcher: `requestID: UInt32, options: Int32` with the worker's output, protocol-in
///   and protocol-out descriptors (SCM_RIGHTS);
/// - launcher → host: `requestID: UInt32, result: Int32`, the worker's pid or minus an errno.
///   Request 0 is the launcher's own notice that it forked a spare with that pid.
/// Workers and spares are the host's children (CLONE_PARENT), so the host reaps them; end of
/// file on the socket ends the launcher, and its spare with it.
enum Launcher {
    static let socket = FileDescriptor(rawValue: 3)

    private struct Spare {
        var pid: Int32
        var socket: FileDescriptor
    }

    private enum DirectFork {
        /// This is the parent: the child's pid, or minus an errno.
        case forked(Int32)
        /// This is the worker, which has finished with this exit status.
        case becameWorker(Int32)
    }

    static func run() -> Int32 {
        guard let null = try? FileDescriptor.open("/dev/null", O_RDWR) else { return 2 }
        Confinement.prepareForForks()
        var spare: Spare?
        var spareOptions: SpawnRequest.Options?
        var received = [CInt](repeating: -1, count: Int(PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS))
        while true {
            // Keep a spare ready for the next launch (after the first request tells the options).
            if spare == nil, let options = spareOptions {
                switch makeSpare(options: options) {
                case .child(let socket):
                    return serveAsSpare(socket)
                case .parent(let made):
                    spare = made
                    if let made { notify(requestID: 0, result: made.pid) }
                }
            }
            guard let (requestID, options, descriptors) = receiveRequest(into: &received) else { return 0 }
            spareOptions = options
            let result: Int32
            if let ready = spare, handOver(descriptors, to: ready) {
                result = ready.pid
            } else {
                switch forkDirectly(descriptors, null: null, options: options) {
                case .becameWorker(let status): return status
                case .forked(let pidOrError): result = pidOrError
                }
            }
            if let used = spare {
                used.socket.close()
                spare = nil
            }
            descriptors.forEach { $0.close() }
            if !notify(requestID: requestID, result: result) { return 0 }
        }
    }

    /// Reads one request; nil when the host closed the socket.
    private static func receiveRequest(into received: inout [CInt]) -> (UInt32, SpawnRequest.Options, [FileDescriptor])? {
        while true {
            var message = [UInt8](repeating: 0, count: 16)
            var length = 0
            var count: CInt = 0
            let status = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &received, CInt(received.count), &count)
            }
            if status != 0 || length == 0 { return nil }
            let descriptors = received.prefix(Int(count)).map(FileDescriptor.init(rawValue:))
            guard length == 8, descriptors.count == 3 else {
                WorkerMain.report("launcher: malformed request (\(length) bytes, \(descriptors.count) descriptors)")
                descriptors.forEach { $0.close() }
                continue
            }
            var reader = PayloadReader(Array(message.prefix(8)))
            guard let requestID = try? reader.readUInt32(), let options = try? reader.readInt32() else { continue }
            return (requestID, SpawnRequest.Options(rawValue: options).union(.sibling), descriptors)
        }
    }

    /// Passes the worker's descriptors to the spare; false if the spare is gone.
    private static func handOver(_ descriptors: [FileDescriptor], to spare: Spare) -> Bool {
        let raw = descriptors.map(\.rawValue)
        let marker: [UInt8] = [1]
        let sent = marker.withUnsafeBytes { bytes in
            raw.withUnsafeBufferPointer { fds in
                plugind_shim_send_descriptors(spare.socket.rawValue, bytes.baseAddress!, bytes.count, fds.baseAddress, CInt(fds.count))
            }
        }
        return sent == 0
    }

    /// Forks a worker on the spot (no spare was ready). In the child, runs the worker.
    private static func forkDirectly(_ descriptors: [FileDescriptor], null: FileDescriptor, options: SpawnRequest.Options) -> DirectFork {
        let request = SpawnRequest(
            executablePath: "",
            arguments: [],
            environment: [],
            descriptors: [null, descriptors[0], descriptors[0], descriptors[1], descriptors[2]],
            options: options
        )
        switch withNamespaceFallback(options, { options throws(SystemError) in
            var adjusted = request
            adjusted.options = options
            return try forkWorker(adjusted)
        }) {
        case .success(nil):
            return .becameWorker(WorkerMain.run())
        case .success(let pid?):
            return .forked(pid)
        case .failure(let error):
            return .forked(-error.errno.rawValue)
        }
    }

    private enum SpareFork {
        case child(FileDescriptor)
        case parent(Spare?)
    }

    private static func makeSpare(options: SpawnRequest.Options) -> SpareFork {
        var first: CInt = -1
        var second: CInt = -1
        guard plugind_shim_socket_pair(&first, &second) == 0 else { return .parent(nil) }
        let (launcherEnd, spareEnd) = (FileDescriptor(rawValue: first), FileDescriptor(rawValue: second))
        switch withNamespaceFallback(options, { options throws(SystemError) in try forkSpare(options: options, keeping: spareEnd) }) {
        case .success(nil):
            return .child(spareEnd)
        case .success(let pid?):
            spareEnd.close()
            return .parent(Spare(pid: pid, socket: launcherEnd))
        case .failure:
            launcherEnd.close()
            spareEnd.close()
            return .parent(nil)
        }
    }

    /// The spare: warms its own copy of the runtime's caches, then waits for a worker's
    /// descriptors, installs them and serves the host. Ends quietly when the launcher goes away.
    private static func serveAsSpare(_ socket: FileDescriptor) -> Int32 {
        LauncherWarmUp.run()
        var message = [UInt8](repeating: 0, count: 4)
        var received = [CInt](repeating: -1, count: 4)
        var length = 0
        var count: CInt = 0
        let status = message.withUnsafeMutableBytes { bytes in
            plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &received, CInt(received.count), &count)
        }
        guard status == 0, length > 0, count == 3, let null = try? FileDescriptor.open("/dev/null", O_RDONLY) else { return 0 }
        let output = FileDescriptor(rawValue: received[0])
        do {
            try installDescriptors([null, output, output, FileDescriptor(rawValue: received[1]), FileDescriptor(rawValue: received[2])])
        } catch {
            WorkerMain.report("spare worker: \(error)")
            return 127
        }
        return WorkerMain.run()
    }

    @discardableResult
    private static func notify(requestID: UInt32, result: Int32) -> Bool {
        var reply = PayloadWriter(capacity: 8)
        reply.write(requestID)
        reply.write(result)
        return reply.bytes.withUnsafeBytes { bytes in
            plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, nil, 0)
        } == 0
    }
}
