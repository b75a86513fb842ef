import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@Suite("Requests through real workers", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct RequestTests {
    @Test("the C and the Swift text filters answer the same")
    func textFilters() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let input = Array("Hello, wörld! 123 abc".utf8)
        var answers: [[UInt8]] = []
        for library in ["CTextFilter", "SwiftTextFilter"] {
            let process = try await test.launch(PluginFixture(library: library))
            answers.append(try await process.makeConnection().send(input))
            await process.invalidateAndWait()
        }
        #expect(answers[0] == Array("HELLO, WöRLD! 123 ABC".utf8))
        #expect(answers[1] == answers[0])
    }

    @Test("1 MiB of random bytes comes back from the echo plugin byte for byte")
    func largeEcho() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        var generator = SystemRandomNumberGenerator()
        var payload: [UInt8] = []
        payload.reserveCapacity(1 << 20)
        for _ in 0..<(1 << 17) {
            withUnsafeBytes(of: generator.next() as UInt64) { payload.append(contentsOf: $0) }
        }
        let answer = try await process.makeConnection().send(payload)
        // Compare to a Bool: a failed #expect on two 1 MiB arrays would compute their diff.
        let identical = answer == payload
        #expect(identical, "\(answer.count) bytes came back for \(payload.count)")
        let empty = try await process.makeConnection().send([])
        #expect(empty.isEmpty)
        await process.invalidateAndWait()
    }

    @Test("100 concurrent requests on one connection each get their own answer")
    func concurrentRequests() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let connection = try await process.makeConnection()
        let answers = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for index in 0..<100 {
                group.addTask {
                    let request = Array("request \(index) ".utf8) + [UInt8](repeating: UInt8(index), count: index * 997)
                    return (index, try await connection.send(request))
                }
            }
            var answers: [Int: [UInt8]] = [:]
            for try await (index, answer) in group { answers[index] = answer }
            return answers
        }
        #expect(answers.count == 100)
        for index in 0..<100 {
            let expected = Array("request \(index) ".utf8) + [UInt8](repeating: UInt8(index), count: index * 997)
            #expect(answers[index] == expected, "request \(index) got someone else's answer")
        }
        await process.invalidateAndWait()
    }

    @Test("a task preferring the process's task executor resumes on the I/O thread and gets its answers")
    func taskExecutor() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let connection = try await process.makeConnection()
        let threads = try await withTaskExecutorPreference(process.taskExecutor) {
            var threads: Set<String> = []
            for index in 0..<50 {
                let answer = try await connection.send([UInt8(index)])
                guard answer == [UInt8(index)] else { throw CancellationError() }
                threads.insert(Self.currentThreadName())
            }
            return threads
        }
        #expect(threads == ["plugind-events"])
        await process.invalidateAndWait()
    }

    /// The name the kernel knows the current thread by.
    static func currentThreadName() -> String {
        ProcessInspection.readProcFile("/proc/thread-self/comm").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a plugin's error comes back as pluginError with its message")
    func pluginError() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyDescriptorHog", extra: ["limits": ["openFiles": 32]]))
        let error = await #expect(throws: AppExtensionError.self) { try await process.makeConnection().send([]) }
        #expect(error?.code == .pluginError)
        #expect(error?.pluginErrorCode == 1)
        #expect(error?.reason.contains("Too many open files") == true)
        #expect(error?.reason.contains("open files limit 32 reached") == true)
        await process.invalidateAndWait()
    }

    @Test("Codable requests round-trip through the echo plugin")
    func codableConvenience() async throws {
        struct Point: Codable, Equatable {
            var x: Int
            var label: String
        }
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let point = Point(x: 3, label: "three")
        let echoed = try await process.makeConnection().send(point, expecting: Point.self)
        #expect(echoed == point)
        await process.invalidateAndWait()
    }

    @Test("a plugin flooding stdout and stderr neither corrupts nor stalls the protocol")
    func flood() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyFlood"))
        let connection = try await process.makeConnection()
        let answer = try await connection.send(Array("100".utf8), timeout: TestHost.requestBackstop)
        #expect(String(decoding: answer, as: UTF8.self) == "flooded 100 MiB")
        // The channel still works afterwards.
        #expect(try await connection.send(Array("0".utf8)) == Array("flooded 0 MiB".utf8))
        await process.invalidateAndWait()
    }

    @Test("progress reports arrive on the message stream")
    func progressMessages() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Countdown"))
        let connection = try await process.makeConnection()
        let messages = connection.messages()
        let answer = try await connection.send(Array("4".utf8))
        #expect(String(decoding: answer, as: UTF8.self) == "counted down 4 steps\n")
        await process.invalidateAndWait()
        var progress: [UInt64] = []
        for await message in messages {
            if case .progress(_, let completed, let total) = message {
                #expect(total == 4)
                progress.append(completed)
            }
        }
        #expect(progress == [0, 1, 2, 3, 4])
    }

    @Test("the host process never maps the plugin's library")
    func libraryNotMappedInHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try test.install(PluginFixture(library: "SwiftTextFilter"))
        let process = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.swifttextfilter"))
        _ = try await process.makeConnection().send(Array("x".utf8))
        let library = bundle + "/libSwiftTextFilter.so"
        #expect(!ProcessInspection.mapsFile(library))
        #expect(!ProcessInspection.mapsFile("libSwiftTextFilter.so"))
        await process.invalidateAndWait()
        // A worker does map it (its sealed copy): the check would see it if it were there. Read
        // from a worker left dumpable, whose maps an ordinary user may read too.
        var unconfined = test
        unconfined.host.confinement = .disabled
        let visible = try await AppExtensionProcess(configuration: try unconfined.configuration("org.plugind.tests.swifttextfilter"))
        _ = try await visible.makeConnection().send(Array("x".utf8))
        #expect(ProcessInspection.mapsFile("libSwiftTextFilter.so", pid: visible.processIdentifier))
        await visible.invalidateAndWait()
    }
}
