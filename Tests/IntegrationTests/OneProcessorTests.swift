import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// A host confined to one processor (`taskset -c 0`, a container with one CPU): its callers do
/// not poll, they yield the processor to the worker that owes them an answer and read the answer
/// themselves (`BusyPolling.yieldsToPeer`).
@Suite("A host confined to one processor", .tags(.process), .timeLimit(.minutes(2)))
struct OneProcessorTests {
    /// Confines every thread of this process to the first processor it may use; what it starts
    /// from now on inherits that. False when that could not be done.
    static func confineToOneProcessor() -> Bool {
        let first = plugind_test_first_allowed_processor()
        guard first >= 0, let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
        return threads.compactMap { Int32($0) }.allSatisfy { plugind_test_confine_thread($0, first) == 0 }
    }

    @Test("every answer comes to its caller: those the worker gives at once, and those it gives after the caller stopped yielding")
    func callersYieldToTheWorker() async {
        // In a process of its own, confined before anything reads how many processors it has.
        // Exit statuses: 30 not confined, 31 the host would poll, 32 the worker not confined,
        // 33 a wrong answer.
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            guard Self.confineToOneProcessor() else { exit(30) }
            guard BusyPolling.yieldsToPeer, !BusyPolling.isWorthwhile else { exit(31) }
            let test = try TestHost()
            defer { test.remove() }
            try test.install(PluginFixture(library: "ConversationProbe"))
            let process = try await AppExtensionProcess(configuration: try test.configuration(ConnectionTests.probe))
            guard plugind_test_allowed_processors(process.processIdentifier) == 1 else { exit(32) }
            let connection = try await process.makeConnection()
            var counted = 0
            for index in 0..<1000 {
                // Every hundredth asks for 5 ms of the worker's processor, far beyond the caller's
                // window: the caller sleeps, and the loop's thread brings the answer. The others
                // count on the connection: each answer is the one its request asked for.
                let slow = index % 100 == 99
                if !slow { counted += 1 }
                let answer = try await connection.send(Array((slow ? "spin:5" : "count").utf8))
                let expected = slow ? "spun" : "\(counted)"
                guard String(decoding: answer, as: UTF8.self) == expected else {
                    FileHandle.standardError.write(Data("request \(index): \(String(decoding: answer, as: UTF8.self))\n".utf8))
                    exit(33)
                }
            }
            await process.invalidateAndWait()
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }
}
