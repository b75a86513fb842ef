import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// `AppExtensionFunctionSession` against a decoder that crashes on purpose
/// (ExamplePlugins/Testing/HostileDecoder): a crash fails only the call that caused it, with one
/// typed error naming the function and the signal, and the next call works on a new worker with
/// the set-up calls replayed; handles of an earlier worker are refused; workers are recycled every
/// N calls. Every answer is compared with the checksum computed here.
@Suite("Function sessions (crash-transparent typed calls)", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct FunctionSessionTests {
    /// The manifest keys of the hostile decoder (its source lists the functions).
    static var manifest: [String: Any] {
        [
            "handles": ["decoder": ["release": "close_decoder"]],
            "functions": [
                ["name": "decode", "arguments": [["name": "input", "type": "bytes"]], "returns": "int32"],
                [
                    "name": "open_decoder", "arguments": [["name": "path", "type": "string"]],
                    "returns": ["type": "handle", "kind": "decoder"],
                ],
                [
                    "name": "decode_with",
                    "arguments": [["name": "decoder", "type": "handle", "kind": "decoder"], ["name": "input", "type": "bytes"]],
                    "returns": "int32",
                ],
                ["name": "close_decoder", "arguments": [["name": "decoder", "type": "handle", "kind": "decoder"]], "returns": "int32"],
                ["name": "spin", "arguments": [] as [Any], "returns": "int32"],
            ],
        ]
    }

    /// The decoder's checksum: FNV-1a from the seeded basis, its top bit cleared.
    static func checksum(_ bytes: [UInt8], seed: UInt32 = 0) -> Int32 {
        var hash: UInt32 = 2_166_136_261 ^ seed
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return Int32(bitPattern: hash & 0x7fff_ffff)
    }

    /// A test host whose quarantine never stops the crashes the tests cause on purpose, the
    /// decoder installed in it (allowed to read `readable`, when given).
    static func host(readable: String? = nil, limits: [String: Any]? = nil) throws -> (TestHost, PluginFixture) {
        var test = try TestHost()
        test.host.quarantine = .init(crashes: 1_000_000, window: .seconds(1))
        var extra = manifest
        if let readable { extra["permissions"] = ["read": [readable]] }
        if let limits { extra["limits"] = limits }
        let fixture = PluginFixture(library: "HostileDecoder", extra: extra)
        try test.install(fixture)
        return (test, fixture)
    }

    static func handle(_ value: FunctionValue?) throws -> FunctionHandle {
        guard case .handle(let handle)? = value else { throw Failure("expected a handle, got \(String(describing: value))") }
        return handle
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The error `body` fails with.
    static func failure(_ body: () async throws -> FunctionValue) async -> AppExtensionError? {
        do {
            let value = try await body()
            Issue.record("the call returned \(value)")
            return nil
        } catch let error as AppExtensionError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test("100 calls, every 10th crashing: exactly 10 typed errors naming decode and SIGSEGV, 90 right answers")
    func everyTenthCrashes() async throws {
        let (test, fixture) = try Self.host()
        defer { test.remove() }
        let session = AppExtensionFunctionSession(configuration: try test.configuration(fixture.identifier))
        var answers = 0
        var crashes: [AppExtensionError] = []
        for index in 0..<100 {
            let input = Array((index % 10 == 9 ? "CRASH at \(index)" : "input \(index) " + String(repeating: "x", count: index)).utf8)
            do {
                let value = try await session.call("decode", arguments: [.bytes(input)])
                #expect(value == .int32(Self.checksum(input)), "call \(index)")
                #expect(index % 10 != 9, "call \(index) should have crashed")
                answers += 1
            } catch let error as AppExtensionError {
                #expect(index % 10 == 9, "call \(index) failed: \(error)")
                crashes.append(error)
            }
        }
        #expect(answers == 90)
        #expect(crashes.count == 10)
        for error in crashes {
            #expect(error.code == .workerCrashed, "\(error)")
            #expect(error.termination == .signaled(signal: SIGSEGV, name: "SIGSEGV"), "\(error)")
            #expect(error.reason.hasPrefix("decode ended its worker: crashed with SIGSEGV"), "\(error.reason)")
            #expect(error.backtrace.contains { $0.function == "checksum" || $0.function == "decode" }, "\(error.backtrace)")
        }
        // A worker for the first call and one after each crash but the last.
        #expect(session.workersStarted == 10)
        #expect(session.processIdentifier == nil)
        await session.invalidateAndWait()
    }

    @Test("freshWorkerEvery: 5: a new worker, with a new pid, every 5 calls")
    func freshWorkerEveryFive() async throws {
        let (test, fixture) = try Self.host()
        defer { test.remove() }
        let session = AppExtensionFunctionSession(
            configuration: try test.configuration(fixture.identifier), options: .init(freshWorkerEvery: 5))
        var pids: [Int32] = []
        for index in 0..<20 {
            let input = Array("call \(index)".utf8)
            #expect(try await session.call("decode", arguments: [.bytes(input)]) == .int32(Self.checksum(input)))
            pids.append(try #require(session.processIdentifier))
        }
        let groups = stride(from: 0, to: 20, by: 5).map { Array(pids[$0..<$0 + 5]) }
        #expect(groups.allSatisfy { Set($0).count == 1 }, "\(pids)")
        #expect(Set(pids).count == 4, "\(pids)")
        #expect(session.workersStarted == 4)
        // invalidateAndWait waits for the recycled workers too: all of them are reaped.
        await session.invalidateAndWait()
        for pid in Set(pids) { #expect(!ProcessInspection.exists(pid), "worker \(pid) outlived its session") }
    }

    @Test("set-up replay: after a crash the next call gets a new worker with a fresh handle; the stale handle is refused")
    func setUpReplay() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let seedFile = try directory.publicFile("seed", contents: "7\n")
        let (test, fixture) = try Self.host(readable: directory.path)
        defer { test.remove() }
        let session = AppExtensionFunctionSession(
            configuration: try test.configuration(fixture.identifier),
            options: .init(setUp: [.init("open_decoder", arguments: [.string(seedFile)])]))
        let input = Array("hello".utf8)

        let first = try Self.handle(try await session.setUpResults.first?.value)
        #expect(first.kind == "decoder" && !first.isNull)
        let pid = session.processIdentifier
        #expect(try await session.call("decode_with", arguments: [.handle(first), .bytes(input)]) == .int32(Self.checksum(input, seed: 7)))

        let crash = await Self.failure { try await session.call("decode_with", arguments: [.handle(first), .bytes(Array("ABORT".utf8))]) }
        #expect(crash?.code == .workerCrashed)
        #expect(crash?.termination == .signaled(signal: SIGABRT, name: "SIGABRT"), "\(String(describing: crash))")
        #expect(crash?.reason.hasPrefix("decode_with ended its worker: crashed with SIGABRT") == true, "\(String(describing: crash))")
        #expect(session.processIdentifier == nil)

        // The old handle names nothing in the new worker: refused, naming the function and the argument.
        let stale = await Self.failure { try await session.call("decode_with", arguments: [.handle(first), .bytes(input)]) }
        #expect(stale?.code == .invalidArguments)
        #expect(
            stale?.reason.hasPrefix("argument 1 of decode_with is handle decoder#\(first.id), which an earlier worker of this session")
                == true,
            "\(String(describing: stale))")
        #expect(session.processIdentifier != nil && session.processIdentifier != pid)

        // The set-up call ran on the new worker: its handle works there.
        let second = try Self.handle(try await session.setUpResults.first?.value)
        #expect(!second.isNull && second !== first)
        #expect(
            try await session.call("decode_with", arguments: [.handle(second), .bytes(input)]) == .int32(Self.checksum(input, seed: 7)))
        #expect(try await session.call("close_decoder", arguments: [.handle(second)]) == .int32(0))
        #expect(session.workersStarted == 2)
        await session.invalidateAndWait()
    }

    @Test("a set-up call that fails on replay fails the next call with its reason; the one after tries again")
    func setUpFailsOnReplay() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let seedFile = try directory.publicFile("seed", contents: "11\n")
        let (test, fixture) = try Self.host(readable: directory.path)
        defer { test.remove() }
        let session = AppExtensionFunctionSession(configuration: try test.configuration(fixture.identifier))
        session.addSetUpCall(.init("open_decoder", arguments: [.string(seedFile)]))
        #expect(session.options.setUp.map(\.function) == ["open_decoder"])
        let input = Array("payload".utf8)
        try await session.start()
        #expect(session.workersStarted == 1)
        #expect(try await session.call("decode", arguments: [.bytes(input)]) == .int32(Self.checksum(input)))

        try FileManager.default.removeItem(atPath: seedFile)
        let crash = await Self.failure { try await session.call("decode", arguments: [.bytes(Array("CRASH".utf8))]) }
        #expect(crash?.code == .workerCrashed)
        for attempt in 0..<2 {
            let failed = await Self.failure { try await session.call("decode", arguments: [.bytes(input)]) }
            #expect(failed?.code == .pluginError, "attempt \(attempt)")
            #expect(
                failed?.reason.hasPrefix("set-up call 1 of 1 (open_decoder) failed: its value is decoder#null") == true,
                "\(String(describing: failed))")
            #expect(session.processIdentifier == nil)
        }
        #expect(session.workersStarted == 3)

        _ = try directory.publicFile("seed", contents: "12\n")
        #expect(try await session.call("decode", arguments: [.bytes(input)]) == .int32(Self.checksum(input)))
        let decoder = try Self.handle(try await session.setUpResults.first?.value)
        #expect(
            try await session.call("decode_with", arguments: [.handle(decoder), .bytes(input)]) == .int32(Self.checksum(input, seed: 12)))
        #expect(session.workersStarted == 4)
        await session.invalidateAndWait()
    }

    @Test("killed by its CPU limit: limitExceeded naming spin and the limit; the next call works")
    func limit() async throws {
        let (test, fixture) = try Self.host(limits: ["cpuSeconds": 1])
        defer { test.remove() }
        let session = AppExtensionFunctionSession(configuration: try test.configuration(fixture.identifier))
        let error = await Self.failure { try await session.call("spin", timeout: TestHost.requestBackstop) }
        #expect(error?.code == .limitExceeded, "\(String(describing: error))")
        #expect(error?.exceededLimit == AppExtensionError.ExceededLimit(kind: .cpu, value: 1))
        #expect(error?.reason.hasPrefix("spin ended its worker: exceeded its CPU limit 1 s") == true, "\(String(describing: error))")
        let input = Array("after the limit".utf8)
        #expect(try await session.call("decode", arguments: [.bytes(input)]) == .int32(Self.checksum(input)))
        await session.invalidateAndWait()
    }

    @Test("calls from many tasks at once run one at a time: one crash among them fails only its own call")
    func concurrentCalls() async throws {
        let (test, fixture) = try Self.host()
        defer { test.remove() }
        let session = AppExtensionFunctionSession(configuration: try test.configuration(fixture.identifier))
        let outcomes = await withTaskGroup(of: (Int, Result<FunctionValue, AppExtensionError>).self) { group in
            for index in 0..<12 {
                group.addTask {
                    let input = Array((index == 5 ? "CRASH" : "task \(index)").utf8)
                    do {
                        return (index, .success(try await session.call("decode", arguments: [.bytes(input)])))
                    } catch let error as AppExtensionError {
                        return (index, .failure(error))
                    } catch {
                        return (index, .failure(AppExtensionError(.cancelled, plugin: nil, "\(error)")))
                    }
                }
            }
            var outcomes: [Int: Result<FunctionValue, AppExtensionError>] = [:]
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        for (index, outcome) in outcomes {
            switch outcome {
            case .success(let value):
                #expect(index != 5)
                #expect(value == .int32(Self.checksum(Array("task \(index)".utf8))))
            case .failure(let error):
                #expect(index == 5, "\(error)")
                #expect(error.code == .workerCrashed && error.reason.hasPrefix("decode ended its worker"), "\(error)")
            }
        }
        #expect(outcomes.count == 12)
        await session.invalidateAndWait()
        await #expect(throws: AppExtensionError.self) { try await session.call("decode", arguments: [.bytes([])]) }
    }
}
