import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Typed calls with callbacks, in the confined worker: libc's `qsort` with the host's comparator
/// (ExamplePlugins/Qsort), checked against Swift's own sort; handlers that call back into the
/// same process; and a library of the suite's own that uses every argument register, calls from
/// a thread of its own, passes a garbage pointer and keeps a callback past its call.
@Suite("Typed calls with callbacks", .tags(.process, .slow), .serialized, .timeLimit(.minutes(10)))
struct TypedCallCallbackTests {
    /// The qsort example bundle, as it ships, in the host's bundled root: its configuration.
    static func installQsort(in test: TestHost) throws -> AppExtensionProcess.Configuration {
        let bundle = test.bundledRoot + "/qsort.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: BuiltProducts.packageRoot + "/ExamplePlugins/Qsort/manifest.json", toPath: bundle + "/manifest.json")
        return try test.configuration("org.plugind.examples.qsort")
    }

    static func launchQsort(in test: TestHost) async throws -> AppExtensionProcess {
        try await AppExtensionProcess(configuration: try installQsort(in: test))
    }

    static func int64s(_ bytes: [UInt8]) -> [Int64] {
        stride(from: 0, to: bytes.count - bytes.count % 8, by: 8).map { offset in
            bytes[offset..<offset + 8].reversed().reduce(Int64(0)) { ($0 << 8) | Int64($1) }
        }
    }

    static func bytes(_ values: [Int64]) -> [UInt8] {
        values.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    }

    /// The comparator: the two elements the library passes, compared as int64.
    static let ascending: FunctionCallbackHandler = { arguments in
        guard arguments.count == 2, case .bytes(let a) = arguments[0], case .bytes(let b) = arguments[1] else { return .int32(0) }
        let (left, right) = (int64s(a).first ?? 0, int64s(b).first ?? 0)
        return .int32(left < right ? -1 : left > right ? 1 : 0)
    }

    /// 10,000 elements: about 120,000 callback round trips, half a minute in a debug build on a
    /// loaded two-processor machine. 100,000 (1.7 million round trips) is `plugind-bench
    /// qsort-100k`, which checks the order the same way, in a release build.
    @Test("10,000 int64s through the worker's qsort with the host's comparator: the order Swift's sort gives")
    func qsortLarge() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchQsort(in: test)
        let connection = try await process.makeConnection()
        var generator = SystemRandomNumberGenerator()
        let values = (0..<10_000).map { _ in Int64.random(in: .min ... .max, using: &generator) }
        let calls = Locked(0)
        let sorted = try await connection.callWithOutputs(
            "qsort", arguments: [.bytes(Self.bytes(values)), .uint64(8)],
            callbacks: [
                "compar": { arguments in
                    calls.withLock { $0 += 1 }
                    return try await Self.ascending(arguments)
                }
            ], timeout: .seconds(300))
        guard case .bytes(let base)? = sorted[output: "base"] else { throw TestFailure("qsort returned no base") }
        #expect(Self.int64s(base) == values.sorted())
        // glibc's qsort is a merge sort here: about n·log2(n) comparisons, each one the host's.
        #expect(calls.withLock { $0 } > 100_000)
        await process.invalidateAndWait()
    }

    @Test("a handler may call the same process while the library waits: by absolute value, through the worker's llabs")
    func nestedCalls() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchQsort(in: test)
        let connection = try await process.makeConnection()
        let values: [Int64] = [-9, 4, -1, 7, 0, -3, 12, -12, 5]
        let sorted = try await connection.callWithOutputs(
            "qsort", arguments: [.bytes(Self.bytes(values)), .uint64(8)],
            callbacks: [
                "compar": { arguments in
                    guard case .bytes(let a) = arguments[0], case .bytes(let b) = arguments[1] else { return .int32(0) }
                    guard case .int64(let left) = try await connection.call("llabs", arguments: [.int64(Self.int64s(a)[0])]),
                        case .int64(let right) = try await connection.call("llabs", arguments: [.int64(Self.int64s(b)[0])])
                    else { return .int32(0) }
                    return .int32(left < right ? -1 : left > right ? 1 : 0)
                }
            ])
        guard case .bytes(let base)? = sorted[output: "base"] else { throw TestFailure("qsort returned no base") }
        // glibc's merge sort is stable: equal magnitudes keep their order.
        #expect(Self.int64s(base) == [0, -1, -3, 4, 5, 7, -9, 12, -12])
        await process.invalidateAndWait()
    }

    @Test("a handler that throws, or answers another type, fails the call with callbackFailed; the next call works")
    func failingHandlers() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchQsort(in: test)
        let connection = try await process.makeConnection()
        struct Refusal: Error, CustomStringConvertible { var description: String { "the comparator refuses" } }
        let thrown = await #expect(throws: AppExtensionError.self) {
            try await connection.call(
                "qsort", arguments: [.bytes(Self.bytes([3, 1, 2])), .uint64(8)], callbacks: ["compar": { _ in throw Refusal() }])
        }
        #expect(thrown?.code == .callbackFailed)
        #expect(thrown?.reason == "callback 'compar' of qsort failed in the host's handler: the comparator refuses")
        let wrongType = await #expect(throws: AppExtensionError.self) {
            try await connection.call(
                "qsort", arguments: [.bytes(Self.bytes([3, 1, 2])), .uint64(8)], callbacks: ["compar": { _ in .string("less") }])
        }
        #expect(wrongType?.code == .callbackFailed)
        #expect(wrongType?.reason.contains("returned string, not the declared int32") == true, "\(wrongType?.reason ?? "")")
        let missing = await #expect(throws: AppExtensionError.self) {
            try await connection.call("qsort", arguments: [.bytes(Self.bytes([3, 1, 2])), .uint64(8)])
        }
        #expect(missing?.code == .invalidArguments)
        #expect(missing?.reason.hasPrefix("qsort needs a handler for its callback 'compar'") == true, "\(missing?.reason ?? "")")
        let unknown = await #expect(throws: AppExtensionError.self) {
            try await connection.call("llabs", arguments: [.int64(-2)], callbacks: ["compar": Self.ascending])
        }
        #expect(unknown?.reason == "llabs has no callback 'compar' to handle (it takes none)")
        let sorted = try await connection.callWithOutputs(
            "qsort", arguments: [.bytes(Self.bytes([3, 1, 2])), .uint64(8)], callbacks: ["compar": Self.ascending])
        #expect(sorted[output: "base"] == .bytes(Self.bytes([1, 2, 3])))
        await process.invalidateAndWait()
    }

    /// The suite's own library (Tests/Fixtures/Callbacks/callbacks.c), compiled now, declared.
    static func callbacksFixture(in test: TestHost) async throws -> PluginFixture {
        let library = test.directory.path + "/libCallbacks.so"
        let source = try String(contentsOfFile: BuiltProducts.packageRoot + "/Tests/Fixtures/Callbacks/callbacks.c", encoding: .utf8)
        try await CCompiler.sharedLibrary(source, output: library, flags: ["-pthread"])
        func callback(_ arguments: [Any], returns: String) -> [String: Any] {
            ["name": "f", "type": "callback", "arguments": arguments, "returns": returns]
        }
        let bytes: [Any] = [["name": "bytes", "type": "buffer", "count": "count"], ["name": "count", "type": "uint64"]]
        let functions: [[String: Any]] = [
            ["name": "apply_twice", "returns": "int64", "arguments": [callback(["int64"], returns: "int64"), "int64"]],
            [
                "name": "call_mixed", "returns": "double",
                "arguments": [callback(["int32", "double", "float", "int64"], returns: "double"), "int32", "double", "float", "int64"],
            ],
            ["name": "halve_with", "returns": "float", "arguments": [callback(["float"], returns: "float"), "float"]],
            ["name": "checksum_with", "returns": "int32", "arguments": [callback(bytes, returns: "int32"), "uint64"]],
            ["name": "checksum_garbage", "returns": "int32", "arguments": [callback(bytes, returns: "int32")]],
            ["name": "keep", "returns": "void", "arguments": [callback(["int32"], returns: "int32")]],
            ["name": "call_kept", "returns": "int32", "arguments": ["int32"]],
            ["name": "call_from_thread", "returns": "int32", "arguments": [callback(["int32"], returns: "int32"), "int32"]],
        ]
        return PluginFixture(
            library: "Callbacks", identifier: "org.plugind.tests.callbacks", extra: ["functions": functions], libraryPath: library)
    }

    @Test("every argument register: integers, doubles and a float interleaved, a float returned, a buffer, a library's own thread")
    func registers() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(try await Self.callbacksFixture(in: test))
        let connection = try await process.makeConnection()
        let twice = try await connection.call(
            "apply_twice", arguments: [.int64(5)],
            callbacks: [
                "f": { arguments in
                    guard case .int64(let x) = arguments[0] else { return .int64(0) }
                    return .int64(x * 3 - 1)
                }
            ])
        #expect(twice == .int64(41), "f(f(5)) with f(x) = 3x - 1")
        let mixed = try await connection.call(
            "call_mixed", arguments: [.int32(-7), .double(2.5), .float(0.25), .int64(1 << 40)],
            callbacks: [
                "f": { arguments in
                    guard case .int32(let a) = arguments[0], case .double(let b) = arguments[1], case .float(let c) = arguments[2],
                        case .int64(let d) = arguments[3]
                    else { return .double(.nan) }
                    return .double(Double(a) * b + Double(c) + Double(d))
                }
            ])
        #expect(mixed == .double(-17.5 + 0.25 + 1_099_511_627_776))
        let halved = try await connection.call(
            "halve_with", arguments: [.float(3)],
            callbacks: [
                "f": { arguments in
                    guard case .float(let x) = arguments[0] else { return .float(0) }
                    return .float(x + 0.5)
                }
            ])
        #expect(halved == .float(1.75))
        let checksum = try await connection.call(
            "checksum_with", arguments: [.uint64(100)],
            callbacks: [
                "f": { arguments in
                    guard case .bytes(let bytes) = arguments[0], case .uint64(let count) = arguments[1] else { return .int32(-1) }
                    return .int32(Int32(bytes.count) * 1000 + Int32(count) + Int32(bytes.reduce(0) { ($0 &+ Int($1)) % 65_536 }))
                }
            ])
        let expectedSum = (0..<100).reduce(0) { ($0 + Int(UInt8(truncatingIfNeeded: $1 * 7))) % 65_536 }
        #expect(checksum == .int32(Int32(100 * 1000 + 100 + expectedSum)))
        let threaded = try await connection.call(
            "call_from_thread", arguments: [.int32(20)],
            callbacks: [
                "f": { arguments in
                    guard case .int32(let x) = arguments[0] else { return .int32(0) }
                    return .int32(x + 22)
                }
            ])
        #expect(threaded == .int32(42))
        // The callbacks were compiled stubs: after all of them, no mapping of the worker is both
        // writable and executable (libffi's closures would have made one). Root reads any
        // process's maps; an ordinary user's worker is another user's in its namespace.
        if getuid() == 0 {
            let pid = process.processIdentifier
            let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
            let writableAndExecutable = maps.split(separator: "\n").filter { line in
                let permissions = line.split(separator: " ").dropFirst().first ?? ""
                return permissions.contains("w") && permissions.contains("x")
            }
            #expect(writableAndExecutable.isEmpty, "\(writableAndExecutable)")
            #expect(maps.contains("r-xp"), "the maps were read")
        }
        await process.invalidateAndWait()
    }

    @Test("a library that passes a callback a garbage pointer crashes its worker, not the host; the next worker works")
    func garbagePointer() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = try await Self.callbacksFixture(in: test)
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()
        let handled = Locked(0)
        let crashed = await #expect(throws: AppExtensionError.self) {
            try await connection.call(
                "checksum_garbage", arguments: [],
                callbacks: [
                    "f": { _ in
                        handled.withLock { $0 += 1 }
                        return .int32(0)
                    }
                ])
        }
        #expect(crashed?.code == .workerCrashed)
        #expect(handled.withLock { $0 } == 0, "the handler never saw the garbage")
        let again = try await test.launch(fixture)
        #expect(
            try await again.makeConnection().call("apply_twice", arguments: [.int64(1)], callbacks: ["f": { $0[0] }]) == .int64(1))
        await again.invalidateAndWait()
    }

    @Test("a library that calls a callback after its call returned: the worker ends, the host goes on")
    func keptCallback() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = try await Self.callbacksFixture(in: test)
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()
        _ = try await connection.call("keep", arguments: [], callbacks: ["f": { $0[0] }])
        let late = await #expect(throws: AppExtensionError.self) {
            try await connection.call("call_kept", arguments: [.int32(3)])
        }
        #expect(late?.code == .workerExited, "\(late?.description ?? "")")
        #expect(
            late?.standardErrorTail.contains("the library called callback stub") == true,
            "the worker says why it ended: \(late?.standardErrorTail ?? "")")
        await process.invalidateAndWait()
    }
}

extension TypedCallCallbackTests {
    @Test("a function session carries callbacks; a handler that calls its own session is refused, not left waiting for itself")
    func sessions() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let session = AppExtensionFunctionSession(configuration: try Self.installQsort(in: test))
        let sorted = try await session.callWithOutputs(
            "qsort", arguments: [.bytes(Self.bytes([5, -1, 3])), .uint64(8)], callbacks: ["compar": Self.ascending])
        #expect(sorted[output: "base"] == .bytes(Self.bytes([-1, 3, 5])))
        let refused = await #expect(throws: AppExtensionError.self) {
            try await session.call(
                "qsort", arguments: [.bytes(Self.bytes([5, -1, 3])), .uint64(8)],
                callbacks: [
                    "compar": { arguments in
                        _ = try await session.call("llabs", arguments: [.int64(-1)])
                        return try await Self.ascending(arguments)
                    }
                ])
        }
        #expect(refused?.code == .callbackFailed)
        #expect(refused?.reason.contains("it would wait for itself") == true, "\(refused?.reason ?? "")")
        #expect(try await session.call("llabs", arguments: [.int64(-7)]) == .int64(7))
        await session.invalidateAndWait()
    }
}
