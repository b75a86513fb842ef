import PlugindEngine

extension LaunchPool {
    /// The pid of the idle launcher of the shared pool of `executable`, once the pools are settled
    /// with one. A settled pool can lose it at once: another test's settling asks it for a spare
    /// (a mount made elsewhere retired the pool's spares), and the next idle launcher is made a
    /// moment later. So this settles again until there is one; the caller's deadline is the
    /// backstop.
    package static func idleLauncherWhenSettled(executable: String) async throws -> Int32 {
        while true {
            try Task.checkCancellation()
            await settleAll()
            if let pid = idleLauncherProcessIdentifier(executable: executable) { return pid }
        }
    }
}
