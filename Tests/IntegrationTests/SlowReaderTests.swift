import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

@Suite("A host that reads messages slowly holds a bounded amount", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct SlowReaderTests {
    @Test("256 events of 1 MiB to a reader that reads nothing until the end: at most the budget is kept")
    func slowReader() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe", extra: ["limits": ["maxMessageBytes": 2 << 20]]))
        let connection = try await process.makeConnection()
        let messages = connection.messages()
        // 256 MiB through the channel: minutes on a loaded machine, and the deadline a backstop.
        let answer = try await connection.send(Array("post-events 256 1048576".utf8), timeout: TestHost.requestBackstop)
        #expect(String(decoding: answer, as: UTF8.self) == "done 256")
        await process.invalidateAndWait()
        var dropped = 0
        var kept = 0
        for await message in messages {
            switch message {
            case .dropped(let count): dropped += count
            case .event(_, let bytes): kept += bytes.count
            default: break
            }
        }
        #expect(kept <= AppExtensionMessages.bufferedBytes)
        #expect(dropped >= 256 - AppExtensionMessages.bufferedBytes / (1 << 20))
        #expect(dropped + kept / (1 << 20) == 256)
    }

    /// The host's resident memory now and its peak since the last reset, from /proc, in bytes.
    static func residentBytes() -> (now: Int, peak: Int) {
        let status = ProcessInspection.readProcFile("/proc/self/status")
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) * 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// Resets the peak that `residentBytes` reports (writing 5 to clear_refs).
    static func resetPeak() {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return }
        _ = write(fd, "5", 1)
        close(fd)
    }

    @Test("a worker that stops reading and floods the host with asks costs the host at most its frame budget, and is stopped")
    func unreadFrames() async {
        // In a process of its own, so that its memory is all the host's. Exit statuses: 40 the
        // host grew too much, 41 the worker was not stopped as it should be.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            // Over the pipes: through the rings, frames written to the pipe are refused at once
            // (`pipeFramesAfterTheSwitch`), and the worker cannot stop reading the ring.
            setenv("PLUGIND_SHARED_RINGS", "0", 1)
            var test = try TestHost()
            defer { test.remove() }
            // How long the host waits for the worker to read before stopping it: what this test
            // checks, and its message names.
            test.host.cancellationGracePeriod = .milliseconds(500)
            let interruptions = InterruptionCounter()
            let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe"), onInterruption: interruptions.handler)
            let connection = try await process.makeConnection()
            SlowReaderTests.resetPeak()
            let before = SlowReaderTests.residentBytes()
            // 2,000,000 frames of 24 bytes: each makes the host queue an answer of about as many.
            let flood = Task { try await connection.send(Array("flood-asks 2000000".utf8), timeout: TestHost.requestBackstop) }
            try await Deadline.wait("the worker to be stopped") { await interruptions.firstCall() }
            do {
                _ = try await flood.value
                exit(41)
            } catch let error as AppExtensionError {
                guard error.code == .timedOut, error.reason.contains("the host sent unread for 500 ms") else {
                    FileHandle.standardError.write(Data("\(error)\n".utf8))
                    exit(41)
                }
            }
            let after = SlowReaderTests.residentBytes()
            let grown = max(after.now, after.peak) - before.now
            FileHandle.standardError.write(Data("the host grew by \(grown >> 20) MiB\n".utf8))
            if grown >= 48 << 20 { exit(40) }
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("once the worker switched to the rings, a request it writes to the pipe is a protocol violation that stops it")
    func pipeFramesAfterTheSwitch() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let interruptions = InterruptionCounter()
        let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe"), onInterruption: interruptions.handler)
        let connection = try await process.makeConnection()
        // Its answer may come through the ring before the host reads the pipe: the violation
        // then stops the worker after it, and every later request learns the cause.
        _ = try? await connection.send(Array("flood-asks 10".utf8), timeout: TestHost.requestBackstop)
        try await Deadline.wait("the worker to be stopped") { await interruptions.firstCall() }
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await connection.send(Array("flood-asks 10".utf8), timeout: TestHost.requestBackstop)
        }
        #expect(error?.code == .protocolViolation)
        #expect(error?.reason.contains("frame on the pipe after the worker switched to the ring") == true, "\(error?.reason ?? "")")
    }

    @Test(
        "messages nobody reads, or a reader that takes one at a time, cost the host at most the budget in memory (RSS from /proc), not what the plugin sent"
    )
    func droppedMessagesReleaseMemory() async {
        // Each in a process of its own, so that its memory is all the host's; exit status 40: the
        // host grew by more than the margin.
        for keepsUp in [false, true] {
            let report = ExitTestReport()
            let result = await #expect(processExitsWith: .success) { [path = report.path as String, keepsUp = keepsUp as Bool] in
                ExitTestReport.redirectStandardError(to: path)
                try await SlowReaderTests.postEventsMeasuringMemory(readerKeepsUp: keepsUp)
            }
            let said = report.take()
            if result == nil { Issue.record("reader keeps up \(keepsUp), child said: \(said)") }
        }
    }

    /// 400 events of 1 MiB to a reader that reads nothing, or one at a time; exits with 40 when
    /// the host grew by more than 128 MiB (the budget is 16 MiB).
    static func postEventsMeasuringMemory(readerKeepsUp: Bool) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe", extra: ["limits": ["maxMessageBytes": 2 << 20]]))
        let connection = try await process.makeConnection()
        let messages = connection.messages()
        let reader = Task {
            var taken = 0
            guard readerKeepsUp else { return taken }
            for await _ in messages {
                taken += 1
                try? await Task.sleep(for: .milliseconds(5))
            }
            return taken
        }
        resetPeak()
        let before = residentBytes()
        let answer = try await connection.send(Array("post-events 400 1048576".utf8), timeout: TestHost.requestBackstop)
        let after = residentBytes()
        await process.invalidateAndWait()
        reader.cancel()
        _ = await reader.value
        guard String(decoding: answer, as: UTF8.self) == "done 400" else { exit(41) }
        let grown = max(after.now, after.peak) - before.now
        FileHandle.standardError.write(Data("the host grew by \(grown >> 20) MiB\n".utf8))
        if grown >= 128 << 20 { exit(40) }
    }

}
