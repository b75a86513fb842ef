import CPlugindShims
import PlugindSystem
import PlugindWire

/// One message from a launcher: `requestID: UInt32, result: Int32`, with the spare's socket for a
/// spare; request 0 with result 0 says the launcher is ready.
struct LauncherMessage {
    /// Nil when the message was malformed, or the socket failed or ended.
    var request: UInt32?
    var value: Int32?
    var passed: FileDescriptor?

    var isReadiness: Bool { request == 0 && value == 0 && passed == nil }

    /// The next message without waiting; nil when there is none yet. A failed or ended socket
    /// gives a message with neither request nor value.
    static func receive(from socket: FileDescriptor) -> LauncherMessage? {
        var message = [UInt8](repeating: 0, count: 16)
        var passed = [CInt](repeating: -1, count: 1)
        var length = 0
        var count: CInt = 0
        let result = message.withUnsafeMutableBytes { bytes in
            plugind_shim_receive_descriptors(socket.rawValue, bytes.baseAddress!, bytes.count, &length, &passed, 1, &count)
        }
        if Errno(rawValue: result) == .wouldBlock { return nil }
        let descriptor = result == 0 && count == 1 ? FileDescriptor(rawValue: passed[0]) : nil
        var reader = PayloadReader(Array(message.prefix(length)))
        guard result == 0, length == 8, let request = try? reader.readUInt32(), let value = try? reader.readInt32() else {
            return LauncherMessage(request: nil, value: nil, passed: descriptor)
        }
        return LauncherMessage(request: request, value: value, passed: descriptor)
    }
}
