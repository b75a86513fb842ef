import Glibc

/// The one-byte messages a host sends a spare worker on the spare's socket (see
/// `plugind-worker`'s `Launcher`).
package enum SpareMessage {
    /// Comes with the launch's descriptors: the spare becomes that worker.
    package static let work: UInt8 = 1
    /// The host has chosen this spare for a launch whose descriptors follow shortly: a sleeping
    /// process takes tens of microseconds to wake on a small virtual machine, which the host's
    /// remaining preparation then hides. The spare waits for its work without sleeping for a
    /// moment.
    package static let wake: UInt8 = 2
}

extension FileDescriptor {
    /// Sends one of `SpareMessage`'s bytes on a spare's socket without waiting; a spare that is
    /// gone (or a full socket) is found out when its work is sent, so the result is not needed.
    /// Wraps `send(2)` with `MSG_NOSIGNAL`.
    package func sendWithoutWaiting(_ message: UInt8) {
        var byte = message
        _ = Glibc.send(rawValue, &byte, 1, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
    }
}
