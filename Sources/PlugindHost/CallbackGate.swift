import FoundationEssentials
import Glibc
import PlugindSystem

/// Keeps the promise libplugind's header makes about a handle's callbacks: once the function that
/// ends the handle returns (`plugind_connection_close`, `plugind_process_release`), none of its
/// callbacks runs or can start, so the host may free their context at once. Without it a callback
/// that plugind's thread had decided to call could start after the close returned, with a
/// context the host had freed — and a plugin chooses when its asks arrive.
///
/// A callback is *admitted* before it can run (an ask handler just before it is called; a send's
/// completion when the send is accepted, since it must run exactly once) and leaves when it
/// returns. `close()` refuses further admissions; `waitUntilIdle()` then returns once every
/// admitted callback has returned — except those running on the calling thread, so that a host
/// may close a connection from inside its own handler.
final class CallbackGate: @unchecked Sendable {
    // Every field below is read and written only with `condition` locked.
    private let condition = ThreadCondition()
    private var closed = false
    private var admitted = 0
    /// How many admitted callbacks each thread is inside now (nested calls count each).
    private var runningOnThread: [UInt: Int] = [:]

    /// Admits one callback to be run later with `runAdmitted`; false once the gate is closed.
    func admit() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { return false }
        admitted += 1
        return true
    }

    /// Runs a callback admitted before, and lets it go. Runs even after `close()`: an admitted
    /// callback is owed its call (a send's completion reports the closed connection).
    func runAdmitted(_ callback: () -> Void) {
        let thread = UInt(pthread_self())
        condition.lock()
        runningOnThread[thread, default: 0] += 1
        condition.unlock()
        callback()
        condition.lock()
        if let running = runningOnThread[thread], running > 1 {
            runningOnThread[thread] = running - 1
        } else {
            runningOnThread[thread] = nil
        }
        admitted -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Admits and runs `callback` now; false (and it is not called) once the gate is closed.
    func run(_ callback: () -> Void) -> Bool {
        guard admit() else { return false }
        runAdmitted(callback)
        return true
    }

    /// No callback is admitted from now on.
    func close() {
        condition.lock()
        closed = true
        condition.unlock()
    }

    /// Returns once every admitted callback has returned, but those the calling thread is inside.
    func waitUntilIdle() {
        let thread = UInt(pthread_self())
        condition.lock()
        while admitted - runningOnThread[thread, default: 0] > 0 { condition.wait() }
        condition.unlock()
    }
}
