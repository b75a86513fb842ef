package import CPlugindShims
import Glibc

/// An epoll instance. Wraps `epoll_create1(2)`, `epoll_ctl(2)` and `epoll_wait(2)`.
package struct Epoll: Sendable {
    package let descriptor: FileDescriptor

    package init() throws(SystemError) {
        let fd = try retryingInterrupts("epoll_create1") { epoll_create1(CInt(EPOLL_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    package static let readable = UInt32(EPOLLIN.rawValue)
    package static let writable = UInt32(EPOLLOUT.rawValue)
    package static let hangUp = UInt32(EPOLLHUP.rawValue)
    package static let error = UInt32(EPOLLERR.rawValue)
    /// For /proc/self/mountinfo: the mount table changed.
    package static let priority = UInt32(EPOLLPRI.rawValue)

    /// Watches `fd` for `events`, reporting `token` as the event's data: a registration's own
    /// number, so that an event still queued for a descriptor that was closed and reused cannot
    /// reach whoever holds the number now.
    package func add(_ fd: FileDescriptor, events: UInt32, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_ADD, fd, events: events, token: token)
    }

    package func modify(_ fd: FileDescriptor, events: UInt32, token: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_MOD, fd, events: events, token: token)
    }

    package func remove(_ fd: FileDescriptor) throws(SystemError) {
        try control(EPOLL_CTL_DEL, fd, events: 0, token: 0)
    }

    private func control(_ operation: CInt, _ fd: FileDescriptor, events: UInt32, token: UInt64) throws(SystemError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = token
        try retryingInterrupts("epoll_ctl") { epoll_ctl(descriptor.rawValue, operation, fd.rawValue, &event) }
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) and returns the ready descriptors with their
    /// events. An interrupted wait returns no events.
    package func wait(
        into events: UnsafeMutableBufferPointer<epoll_event>,
        timeoutMilliseconds: CInt
    ) throws(SystemError) -> Int {
        let count = epoll_wait(descriptor.rawValue, events.baseAddress, CInt(events.count), timeoutMilliseconds)
        if count < 0 {
            if errno == EINTR { return 0 }
            throw SystemError("epoll_wait", .current)
        }
        return Int(count)
    }
}

/// An eventfd used to wake a thread blocked in epoll. Wraps `eventfd(2)`.
package struct EventNotifier: Sendable {
    package let descriptor: FileDescriptor

    package init() throws(SystemError) {
        let fd = try retryingInterrupts("eventfd") { eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    package func signal() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { Glibc.write(descriptor.rawValue, $0.baseAddress, 8) }
    }

    package func drain() {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { Glibc.read(descriptor.rawValue, $0.baseAddress, 8) }
    }
}
