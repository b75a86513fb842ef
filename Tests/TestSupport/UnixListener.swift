import Foundation
import Glibc

/// A unix socket of the owner's, listening (stream) or bound (datagram), for checking that a
/// plugin cannot reach it: `receivedAnything` says whether a connection or a datagram arrived.
/// Nothing ever blocks: the socket is non-blocking.
package final class UnixListener: Sendable {
    package enum Kind: Sendable {
        case stream
        case datagram
        /// A stream socket in the abstract namespace (no file).
        case abstractStream
    }

    package let address: String
    private let descriptor: Int32
    private let kind: Kind

    package init(address: String, kind: Kind) throws {
        let type = kind == .datagram ? SOCK_DGRAM : SOCK_STREAM
        let descriptor = socket(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LoopbackListener.POSIXFailure(call: "socket") }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(address.utf8)
        let offset = kind == .abstractStream ? 1 : 0
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
            for (index, byte) in bytes.enumerated() where index + offset < path.count - 1 { path[index + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + offset)
        let bound = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0, kind == .datagram || listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw LoopbackListener.POSIXFailure(call: "bind/listen \(address)")
        }
        self.address = address
        self.descriptor = descriptor
        self.kind = kind
    }

    deinit {
        close(descriptor)
        if kind != .abstractStream { unlink(address) }
    }

    /// Whether a connection is waiting or a datagram arrived.
    package var receivedAnything: Bool {
        if kind == .datagram {
            var byte: UInt8 = 0
            return recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT)) >= 0
        }
        let connection = accept(descriptor, nil, nil)
        if connection >= 0 {
            close(connection)
            return true
        }
        return false
    }
}
