import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Plugin threads call the host's callbacks while a request runs and after it returned. Run under
/// ThreadSanitizer too (`swift test --sanitize=thread --filter ThreadedCallbacks`): the worker is
/// then built with it, and anything it reports is in the worker's output, which this checks.
@Suite("Callbacks from plugin threads", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct ThreadedCallbackTests {
    @Test(
        "four threads log, post and report at once, and one that init started logs while the worker answers ready: every event arrives, the worker reports no race"
    )
    func threadedCallbacks() async throws {
        var test = try TestHost()
        defer { test.remove() }
        // ThreadSanitizer reserves far more address space than a worker's default limit.
        test.host.limits.memoryBytes = .max
        #if PLUGIND_THREAD_SANITIZER
            // Workers are executed directly under it, without their sandbox.
            test.host.confinement = .disabled
        #endif
        for _ in 0..<10 {
            let process = try await test.launch(PluginFixture(library: "FaultyThreadedCallbacks"))
            let connection = try await process.makeConnection()
            let messages = connection.messages()
            #expect(try await connection.send([]) == Array("done".utf8))
            await process.invalidateAndWait()
            var events = 0
            for await message in messages {
                if case .event = message { events += 1 }
            }
            #expect(events >= 4 * 200)
            let termination = await process.waitForTermination()
            let output = await process.outputTail()
            #expect(termination == .exited(status: 0), "\(termination): \(output)")
            #expect(!output.contains("ThreadSanitizer"), "\(output)")
        }
    }
}
