import Glibc

extension FileDescriptor {
    /// The bit of `awaitReadable`'s result that means data (or the end) is there.
    package static let readableEvent = Int16(POLLIN)

    /// Waits until this descriptor is readable (or at its end): until `spinUntil` by polling
    /// without sleeping, yielding the processor to anything else runnable, then asleep in
    /// `poll` until `sleepUntil`. On a small virtual machine a sleeping thread takes tens of
    /// microseconds to wake; a short spin spares that where the answer is expected at once.
    /// Returns the events `poll` reported, or nil at the deadline or on an error other than EINTR.
    package func awaitReadable(spinUntil: MonotonicInstant, sleepUntil: MonotonicInstant) -> Int16? {
        var watched = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
        var spinUntil = spinUntil
        while true {
            let now = MonotonicInstant.now
            let spinning = now < spinUntil
            let remaining = now.duration(to: sleepUntil)
            guard spinning || remaining > .zero else { return nil }
            let (seconds, attoseconds) = remaining.components
            // Rounded up: a wait never ends before its deadline.
            let milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            let result = poll(&watched, 1, spinning ? 0 : max(milliseconds, 0))
            if result > 0 { return watched.revents }
            if result < 0 && errno != EINTR { return nil }
            // A processor wanted elsewhere ends the spin (`BusyPolling.yieldUncontended`).
            if spinning, !BusyPolling.yieldUncontended() { spinUntil = .now }
        }
    }
}
