import Glibc
import PlugindSystem

/// With `PLUGIND_TRACE` set (to anything but empty or 0), one line on stderr for each step of a
/// launch that starts a process or ends one (`plugind trace: +12.345 ms launcher started, pid
/// 1234`), timed from the first line: what a launch costs and in which order, without a tracer
/// that slows every system call, and what the tests count the launchers of a command by.
package enum LaunchTrace {
    private static let start: ContinuousClock.Instant? = {
        guard let value = ProcessEnvironment.value("PLUGIND_TRACE"), !value.isEmpty, value != "0" else { return nil }
        return .now
    }()

    /// Whether lines are written.
    package static var isOn: Bool { start != nil }

    /// Writes `event`, if tracing is on.
    package static func note(_ event: @autoclosure () -> String) {
        guard let start else { return }
        let elapsed = start.duration(to: .now)
        let milliseconds = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) * 1e-15
        let line = Array("plugind trace: +\(DecimalText.fixed(milliseconds, digits: 3)) ms \(event())\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
