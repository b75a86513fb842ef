import Glibc
import PlugindEngine
import PlugindSystem

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

    /// Sends `signal` to the idle launcher of `executable`'s pool, once settled with one; its pid.
    /// For the reason above the launcher found may have forked a spare, ended and been reaped
    /// before the signal (ESRCH): then its successor is the one signalled. Any other failure
    /// throws; the caller's deadline is the backstop.
    package static func signalIdleLauncherWhenSettled(executable: String, _ signal: Int32) async throws -> Int32 {
        while true {
            let pid = try await idleLauncherWhenSettled(executable: executable)
            if kill(pid, signal) == 0 { return pid }
            let error = Errno.current
            if error != .noSuchProcess { throw SystemError("kill", error) }
        }
    }
}
