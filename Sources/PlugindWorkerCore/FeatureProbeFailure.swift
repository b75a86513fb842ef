import Glibc

/// Why the probe of a kernel feature failed, told from the errno of its system call. A kernel
/// without the feature answers ENOSYS (it has no such call) or EOPNOTSUPP (built in, not enabled
/// at boot); a seccomp filter around the process (systemd-nspawn's default, a Docker or Podman
/// profile, a service's `SystemCallFilter`) answers what it was written to, most often EPERM,
/// which the kernel itself never answers to the probes plugind makes
/// (`landlock_create_ruleset`'s version query, installing a seccomp filter). Podman's profiles
/// answer ENOSYS for the calls they do not know, so an ENOSYS under a filter the process did not
/// install itself says less.
package enum FeatureProbeFailure: Equatable, Sendable {
    /// ENOSYS: no such system call.
    case notInKernel
    /// EOPNOTSUPP: built in, but not enabled at boot (Landlock missing from `lsm=`, say).
    case notEnabled
    /// EPERM: a seccomp filter refuses the call.
    case refusedByFilter
    /// Any other errno.
    case failed(CInt)

    package init(errno: CInt) {
        switch errno {
        case ENOSYS: self = .notInKernel
        case EOPNOTSUPP: self = .notEnabled
        case EPERM: self = .refusedByFilter
        default: self = .failed(errno)
        }
    }

    /// The reason a layer's report gives. `feature` names what was probed ("Landlock"), `call`
    /// the system call ("landlock_create_ruleset"); `underInheritedFilter`: the process already
    /// ran under a seccomp filter it did not install when it probed (`Seccomp: 2` before its own).
    package func reason(feature: String, call: String, underInheritedFilter: Bool) -> String {
        switch self {
        case .notInKernel where underInheritedFilter:
            "the kernel does not offer \(feature) (ENOSYS), or the seccomp filter this process was started under hides \(call)"
        case .notInKernel:
            "the kernel does not offer \(feature) (ENOSYS)"
        case .notEnabled:
            "the kernel does not offer \(feature): built in but not enabled at boot (EOPNOTSUPP)"
        case .refusedByFilter:
            "a seccomp filter of this container or service refuses \(call) (EPERM); the kernel may support \(feature)"
        case .failed(let code):
            "\(call) failed: \(Self.describe(code))"
        }
    }

    /// The message `strerror_r` gives for `code`.
    private static func describe(_ code: CInt) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buffer in
            guard let base = buffer.baseAddress, strerror_r(code, base, buffer.count) == 0 else { return "errno \(code)" }
            return String(cString: base)
        }
    }
}
