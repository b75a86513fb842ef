import Glibc

extension SystemError {
    /// What this error says when it means the calling process (or the machine) ran out of a
    /// resource, naming the limit and its value; nil for any other error. A launch that fails this
    /// way is the host's limit, never the plugin's doing, and the owner can act on it.
    package var exhaustedHostResource: String? {
        switch errno.rawValue {
        case EMFILE:
            let value = Self.softLimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue)).map { " is \($0)" } ?? ""
            return
                "the host process is out of file descriptors (its open-files limit, RLIMIT_NOFILE,\(value)): close descriptors or raise the limit"
        case ENFILE:
            return "the system is out of file descriptors (fs.file-max)"
        case ENOMEM:
            return "the host is out of memory"
        case EAGAIN where ["fork", "clone", "spawn"].contains(where: function.containsBytes(of:)):
            let value = Self.softLimit(__rlimit_resource_t(__RLIMIT_NPROC.rawValue)).map { " is \($0)" } ?? ""
            return "the host's user is at its process limit (RLIMIT_NPROC\(value))"
        default:
            return nil
        }
    }

    private static func softLimit(_ resource: __rlimit_resource_t) -> rlim_t? {
        var limit = rlimit()
        return getrlimit(resource, &limit) == 0 ? limit.rlim_cur : nil
    }
}
