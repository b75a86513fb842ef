import Glibc

/// Says whether the plugin has used up its descriptor limit, so that a failure caused by it
/// names the limit ("open files limit 64 reached") rather than leaving the plugin's message alone.
enum DescriptorLimitNote {
    static func current(limit: UInt64) -> String? {
        guard limit > 0 else { return nil }
        let probe = fcntl(0, F_DUPFD_CLOEXEC, 0)
        if probe >= 0 {
            close(probe)
            return nil
        }
        return errno == EMFILE ? "open files limit \(limit) reached" : nil
    }
}
