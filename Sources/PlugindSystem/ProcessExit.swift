import CPlugindShims
import Glibc

/// How a reaped process ended and what it used.
package struct ProcessExit: Sendable, Hashable {
    package enum Reason: Sendable, Hashable {
        case exited(status: CInt)
        case signaled(signal: CInt, coreDumped: Bool)
    }

    package var reason: Reason
    /// CPU time in user and kernel mode, in microseconds.
    package var cpuMicroseconds: UInt64
    package var maxResidentBytes: UInt64

    package init(reason: Reason, cpuMicroseconds: UInt64 = 0, maxResidentBytes: UInt64 = 0) {
        self.reason = reason
        self.cpuMicroseconds = cpuMicroseconds
        self.maxResidentBytes = maxResidentBytes
    }
}

extension FileDescriptor {
    /// Reaps the process this pidfd refers to. Returns nil with `noHang` while it still runs.
    /// Wraps `waitid(P_PIDFD)` with resource usage.
    package func waitForProcessExit(noHang: Bool = false) throws(SystemError) -> ProcessExit? {
        var info = plugind_shim_exit_info()
        try checkShim("waitid", plugind_shim_pidfd_wait(rawValue, noHang ? 1 : 0, &info))
        let reason: ProcessExit.Reason
        switch info.state {
        case 0: return nil
        case 1: reason = .exited(status: info.value)
        default: reason = .signaled(signal: info.value, coreDumped: info.state == 3)
        }
        return ProcessExit(
            reason: reason,
            cpuMicroseconds: info.user_microseconds + info.system_microseconds,
            maxResidentBytes: info.max_resident_kilobytes * 1024
        )
    }

    /// Sends `signal` to the process this pidfd refers to. Wraps `pidfd_send_signal(2)`.
    package func sendSignal(_ signal: CInt) throws(SystemError) {
        try checkShim("pidfd_send_signal", plugind_shim_pidfd_send_signal(rawValue, signal))
    }

    /// Kills the process (this is its pidfd), waits until it is reaped and closes the
    /// descriptor: for a child that must be gone before the caller goes on.
    package func killAndReap() {
        try? sendSignal(SIGKILL)
        _ = try? waitForProcessExit()
        close()
    }

    /// Opens a pidfd for `pid`. Wraps `pidfd_open(2)`.
    package static func processDescriptor(for pid: Int32) throws(SystemError) -> FileDescriptor {
        var fd: CInt = -1
        try checkShim("pidfd_open", plugind_shim_pidfd_open(pid, &fd))
        return FileDescriptor(rawValue: fd)
    }
}

/// "SIGSEGV" for 11; "signal 99" when the number has no name.
package func signalName(_ signal: CInt) -> String {
    guard let abbreviation = plugind_shim_signal_abbreviation(signal) else { return "signal \(signal)" }
    return "SIG" + String(cString: abbreviation)
}

/// The signal numbers plugind reasons about, named for what they mean to it.
package enum SignalNumber {
    package static let kill = SIGKILL
    /// A polite request to stop, which a program may catch to clean up first.
    package static let terminate = SIGTERM
    /// The kernel's answer to a process over its CPU-time limit (`RLIMIT_CPU`).
    package static let cpuTimeLimit = SIGXCPU

    /// A crash of the process's own making (a bad access, instruction or arithmetic), as opposed
    /// to a signal sent from outside.
    package static func isFault(_ signal: CInt) -> Bool {
        signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE
    }
}
