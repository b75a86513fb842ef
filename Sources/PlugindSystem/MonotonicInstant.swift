import Glibc

/// A point on the system's monotonic clock (`CLOCK_MONOTONIC`), for the deadlines of code the
/// worker executable links. `ContinuousClock` would serve as well, but it lives in the Swift
/// concurrency runtime: one reference to it links that runtime and libdispatch into every
/// statically linked worker (about 1,000 symbols, and their relocated data in every worker's
/// unique memory).
package struct MonotonicInstant: Comparable, Sendable {
    /// Nanoseconds since an arbitrary moment (the machine's boot, on Linux).
    package let nanoseconds: Int64

    package init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    package static var now: MonotonicInstant {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return MonotonicInstant(nanoseconds: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec))
    }

    /// `duration` from now; a duration that does not fit saturates.
    package static func after(_ duration: Duration) -> MonotonicInstant {
        now + duration
    }

    package static func + (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        let (seconds, attoseconds) = duration.components
        let (wholeSeconds, overflowed) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, overflowedAgain) = instant.nanoseconds.addingReportingOverflow(wholeSeconds &+ attoseconds / 1_000_000_000)
        guard !overflowed, !overflowedAgain else { return MonotonicInstant(nanoseconds: seconds < 0 ? .min : .max) }
        return MonotonicInstant(nanoseconds: sum)
    }

    /// The time from this instant to `other` (negative when `other` is earlier).
    package func duration(to other: MonotonicInstant) -> Duration {
        .nanoseconds(other.nanoseconds &- nanoseconds)
    }

    package static func < (left: MonotonicInstant, right: MonotonicInstant) -> Bool {
        left.nanoseconds < right.nanoseconds
    }
}
