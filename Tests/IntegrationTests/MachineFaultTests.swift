import ExtensionFoundation
import Foundation
import Glibc
import PlugindSystem
import TestSupport
import Testing

/// Faults of the machine around a running worker: a worker stopped by someone else mid-request.
/// Deadlines are kept on the monotonic clock, so a stopped (or starved) worker still meets its
/// request's deadline, and the host's own threads never wait on it.
@Suite("Faults of the machine around a worker", .timeLimit(.minutes(2)))
struct MachineFaultTests {
    /// The parent of `pid`, from /proc; nil once it is gone.
    static func parent(of pid: Int32) -> Int32? {
        ProcessInspection.readProcFile("/proc/\(pid)/status").split(separator: "\n")
            .first { $0.hasPrefix("PPid:") }.flatMap { Int32($0.dropFirst(5).trimmingCharacters(in: .whitespaces)) }
    }

    /// Writes `message` to standard error and exits with `status`: how the child of an exit test
    /// says which check failed.
    static func fail(_ status: Int32, _ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(status)
    }

    @Test("a worker stopped (SIGSTOP) mid-request: the deadline holds (timedOut), the stopped worker is killed and reaped")
    func stoppedWorker() async throws {
        // In a process of its own: the stop is a signal anyone may undo, and the host's reaping
        // must be this host's alone. Exit statuses 10–16 name the check that failed.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let test = try TestHost()
            defer { test.remove() }
            let process = try await test.launch(PluginFixture(library: "Countdown"))
            let pid = process.processIdentifier
            // Its launcher gone first, so that nothing but the host is left to act on the worker.
            let host = getpid()
            try await Deadline.wait("the worker's launcher to exit", seconds: 20) {
                while Self.parent(of: pid) != host { try await Task.sleep(for: .milliseconds(5)) }
            }
            let connection = try await process.makeConnection()
            let pending = await connection.sendInFlight(Array("100000".utf8), timeout: .milliseconds(400))
            guard kill(pid, SIGSTOP) == 0 else { Self.fail(10, "kill(SIGSTOP): \(Errno.current)") }
            let outcome = try await Deadline.wait("the request's deadline", seconds: 20) { await pending.result }
            guard case .failure(let failure) = outcome, let failure = failure as? AppExtensionError else {
                Self.fail(11, "the request did not fail: \(outcome)")
            }
            guard failure.code == .timedOut, failure.reason == "request did not finish within 400 ms" else {
                Self.fail(12, "the request failed otherwise: \(failure)")
            }
            // Stopped, it can neither answer the cancel nor report its stack: killed after the
            // grace period.
            guard
                let termination = try? await Deadline.wait("the stopped worker's end", seconds: 20, { await process.waitForTermination() })
            else {
                let status = ProcessInspection.readProcFile("/proc/\(pid)/status").split(separator: "\n")
                    .filter { line in ["State", "PPid", "SigPnd", "ShdPnd", "NSpgid", "NSsid"].contains(where: line.hasPrefix) }
                Self.fail(13, "the stopped worker did not end: \(status)")
            }
            guard termination == .signaled(signal: SIGKILL, name: "SIGKILL") else { Self.fail(14, "it ended otherwise: \(termination)") }
            guard await Deadline.reaped(pid, seconds: 20) else { Self.fail(15, "it was not reaped") }
            // The same plugin launches and answers again.
            let again = try await Deadline.wait("the next launch", seconds: 20) {
                try await test.launch(PluginFixture(library: "Countdown"))
            }
            let answer = try await Deadline.wait("the next answer", seconds: 20) { try await again.makeConnection().send(Array("1".utf8)) }
            guard String(decoding: answer, as: UTF8.self) == "counted down 1 steps\n" else { Self.fail(16, "the next answer: \(answer)") }
            await again.invalidateAndWait()
        }
        if let result, result.exitStatus != .exitCode(EXIT_SUCCESS) {
            Issue.record("child said: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test("requests to a stopped worker fill its pipe, which nobody reads: each still fails with timedOut at its own deadline")
    func pipeFilledNeverRead() async throws {
        // In a process of its own, like the test above. Exit statuses 20–23 name the check that failed.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let test = try TestHost()
            defer { test.remove() }
            let process = try await test.launch(PluginFixture(library: "Countdown"))
            let pid = process.processIdentifier
            let host = getpid()
            try await Deadline.wait("the worker's launcher to exit", seconds: 20) {
                while Self.parent(of: pid) != host { try await Task.sleep(for: .milliseconds(5)) }
            }
            let connection = try await process.makeConnection()
            guard kill(pid, SIGSTOP) == 0 else { Self.fail(20, "kill(SIGSTOP): \(Errno.current)") }
            // 1,000 requests of 256 bytes: four times what the pipe holds, so most wait in the
            // host's queue for room that never comes.
            let outcomes = try await Deadline.wait("every request's end", seconds: 30) {
                await withTaskGroup(of: Result<[UInt8], any Error>.self) { group in
                    for _ in 0..<1000 {
                        group.addTask {
                            do {
                                return .success(
                                    try await connection.send([UInt8](repeating: 0x31, count: 256), timeout: .milliseconds(300)))
                            } catch {
                                return .failure(error)
                            }
                        }
                    }
                    var outcomes: [Result<[UInt8], any Error>] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
            }
            var reasons: [String: Int] = [:]
            for outcome in outcomes {
                switch outcome {
                case .success: reasons["answered", default: 0] += 1
                case .failure(let error as AppExtensionError): reasons["\(error.code): \(error.reason)", default: 0] += 1
                case .failure(let error): reasons["\(error)", default: 0] += 1
                }
            }
            // Each timed out at its own deadline, whether it was in the pipe or still in the queue.
            guard reasons == ["timedOut: request did not finish within 300 ms": 1000] else {
                Self.fail(21, "the requests ended otherwise: \(reasons)")
            }
            let termination = try await Deadline.wait("the stopped worker's end", seconds: 20) { await process.waitForTermination() }
            guard termination == .signaled(signal: SIGKILL, name: "SIGKILL") else { Self.fail(22, "it ended otherwise: \(termination)") }
            guard await Deadline.reaped(pid, seconds: 20) else { Self.fail(23, "it was not reaped") }
        }
        if let result, result.exitStatus != .exitCode(EXIT_SUCCESS) {
            Issue.record("child said: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }
}
