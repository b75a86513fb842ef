import CPlugindShims
import Glibc
import PlugindSystem
import PlugindWire

/// The pre-forked launcher (`plugind-worker --launcher`): started once per host, with the Swift
/// runtime, libffi and the worker's code already loaded, it forks a worker for each request and
/// the child goes straight to `WorkerMain.run()`, skipping exec and dynamic linking. It stays
/// single-threaded, so forking without exec is safe.
///
/// Protocol on descriptor 3 (a SOCK_SEQPACKET socket): a request is a datagram of
/// `requestID: UInt32, options: Int32` (little-endian) carrying the worker's output, protocol-in
/// and protocol-out descriptors (SCM_RIGHTS); the answer is `requestID: UInt32, result: Int32`,
/// the worker's pid, or minus an errno. The worker becomes the host's child (CLONE_PARENT), so the
/// host reaps it; end of file on the socket ends the launcher.
enum Launcher {
    static let socket = FileDescriptor(rawValue: 3)

    static func run() -> Int32 {
        guard let null = try? FileDescriptor.open("/dev/null", O_RDWR) else { return 2 }
        Confinement.prepareForForks()
        var message = [UInt8](repeating: 0, count: 16)
        var received = [CInt](repeating: -1, count: Int(PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS))
        while true {
            var length = 0
            var count: CInt = 0
            let status = message.withUnsafeMutableBytes { bytes in
                plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &received, CInt(received.count), &count)
            }
            if status != 0 || length == 0 { return 0 }
            let descriptors = received.prefix(Int(count)).map(FileDescriptor.init(rawValue:))
            guard length == 8, descriptors.count == 3 else {
                WorkerMain.report("launcher: malformed request (\(length) bytes, \(descriptors.count) descriptors)")
                descriptors.forEach { $0.close() }
                continue
            }
            let requestID = message.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            let options = message.withUnsafeBytes { Int32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: Int32.self)) }
            let request = SpawnRequest(
                executablePath: "",
                arguments: [],
                environment: [],
                descriptors: [null, descriptors[0], descriptors[0], descriptors[1], descriptors[2]],
                options: SpawnRequest.Options(rawValue: options).union(.sibling)
            )
            let result: Int32
            switch withNamespaceFallback(request.options, { options throws(SystemError) in
                var adjusted = request
                adjusted.options = options
                return try forkWorker(adjusted)
            }) {
            case .success(nil):
                // The child: the descriptors are in place (and the received copies closed);
                // serve the host as a worker.
                return WorkerMain.run()
            case .success(let pid?):
                result = pid
            case .failure(let error):
                result = -error.errno.rawValue
            }
            descriptors.forEach { $0.close() }
            var reply = PayloadWriter(capacity: 8)
            reply.write(requestID)
            reply.write(result)
            let sent = reply.bytes.withUnsafeBytes { bytes in
                plugind_shim_send_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, nil, 0)
            }
            if sent != 0 { return 0 }
        }
    }
}
