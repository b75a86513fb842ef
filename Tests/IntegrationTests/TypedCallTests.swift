import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

@Suite("Typed calls through libffi", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct TypedCallTests {
    static func manifestFunctions() throws -> [[String: Any]] {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/FunctionLibrary/manifest.json"
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        return manifest?["functions"] as? [[String: Any]] ?? []
    }

    func withLibrary(_ body: (AppExtensionConnection) async throws -> Void) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FunctionLibrary", extra: ["functions": try Self.manifestFunctions()])
        let process = try await test.launch(fixture)
        #expect(!process.acceptsRequests)
        try await body(try await process.makeConnection())
        await process.invalidateAndWait()
    }

    static let boundaryValues: [FunctionValue] = [
        .bool(true), .bool(false),
        .int8(.min), .int8(.max), .uint8(.max), .int16(.min), .int16(.max), .uint16(.max),
        .int32(.min), .int32(.max), .uint32(.max), .int64(.min), .int64(.max), .uint64(.max), .uint64(0),
        .float(.greatestFiniteMagnitude), .float(-.leastNonzeroMagnitude), .float(.infinity),
        .double(-.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude), .double(-0.0), .double(-.infinity),
        .string(""), .string("héllo, wörld ✓"), .string(String(repeating: "x", count: 100_000)),
    ]

    @Test("every type round-trips through an identity function, boundary values included")
    func identities() async throws {
        try await withLibrary { (connection: AppExtensionConnection) async throws in
            for value in Self.boundaryValues {
                let result = try await connection.call("identity_\(value.type.rawValue)", arguments: [value])
                #expect(result == value, "identity_\(value.type) changed \(value)")
                if case .double(let double) = value, double == 0 {
                    guard case .double(let returned) = result else { continue }
                    #expect(returned.sign == .minus, "-0.0 lost its sign")
                }
            }
            // NaN is not equal to itself; check it by kind.
            guard case .double(let double) = try await connection.call("identity_double", arguments: [.double(.nan)]) else {
                Issue.record("identity_double did not return a double")
                return
            }
            #expect(double.isNaN)
            guard case .float(let float) = try await connection.call("identity_float", arguments: [.float(.nan)]) else {
                Issue.record("identity_float did not return a float")
                return
            }
            #expect(float.isNaN)
        }
    }

    @Test("functions that compute: arithmetic, strings, byte buffers (empty and 1 MiB), void")
    func computations() async throws {
        try await withLibrary { (connection: AppExtensionConnection) async throws in
            #expect(try await connection.call("add_int64", arguments: [.int64(.min), .int64(1)]) == .int64(.min + 1))
            #expect(try await connection.call("hypotenuse", arguments: [.double(3), .double(4)]) == .double(5))
            #expect(try await connection.call("string_length", arguments: [.string("")]) == .uint64(0))
            #expect(try await connection.call("reverse_string", arguments: [.string("plugind")]) == .string("dnigulp"))
            #expect(try await connection.call("bytes_length", arguments: [.bytes([])]) == .uint64(0))
            let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            #expect(try await connection.call("bytes_length", arguments: [.bytes(large)]) == .uint64(1 << 20))
            #expect(try await connection.call("checksum", arguments: [.bytes(large)]) == .uint32(Self.adler32(large)))
            #expect(try await connection.call("checksum", arguments: [.bytes([])]) == .uint32(1))
            #expect(try await connection.call("count_call") == .void)
            #expect(try await connection.call("count_call") == .void)
            #expect(try await connection.call("call_count_value") == .int32(2))
        }
    }

    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    @Test("wrong function, count or type is refused before anything is called")
    func refusals() async throws {
        try await withLibrary { (connection: AppExtensionConnection) async throws in
            let unknown = await #expect(throws: AppExtensionError.self) { try await connection.call("no_such_function") }
            #expect(unknown?.code == .unknownFunction)
            #expect(unknown?.reason.contains("has no function 'no_such_function'") == true)
            let count = await #expect(throws: AppExtensionError.self) { try await connection.call("add_int64", arguments: [.int64(1)]) }
            #expect(count?.code == .invalidArguments)
            #expect(count?.reason == "add_int64(int64, int64) -> int64 takes 2 argument(s), got 1")
            let type = await #expect(throws: AppExtensionError.self) {
                try await connection.call("add_int64", arguments: [.int64(1), .int32(2)])
            }
            #expect(type?.reason == "argument 2 of add_int64(int64, int64) -> int64 must be int64, got int32")
            let nul = await #expect(throws: AppExtensionError.self) {
                try await connection.call("string_length", arguments: [.string("a\0b")])
            }
            #expect(nul?.reason.contains("contains a NUL byte") == true)
            // None of those reached the function: its call counter is untouched.
            #expect(try await connection.call("call_count_value") == .int32(0))
            let null = await #expect(throws: AppExtensionError.self) { try await connection.call("null_string") }
            #expect(null?.reason == "null_string returned a NULL string")
            let request = await #expect(throws: AppExtensionError.self) { try await connection.send([1]) }
            #expect(request?.code == .unsupported)
        }
    }

    @Test("a crash inside a called function is handled like any other crash")
    func crashInFunction() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let interruptions = InterruptionCounter()
        let fixture = PluginFixture(library: "FunctionLibrary", extra: ["functions": try Self.manifestFunctions()])
        let process = try await test.launch(fixture, onInterruption: interruptions.handler)
        let error = await #expect(throws: AppExtensionError.self) {
            try await process.makeConnection().call("crash", arguments: [.int32(7)])
        }
        #expect(error?.code == .workerCrashed)
        #expect(error?.termination == .signaled(signal: SIGSEGV, name: "SIGSEGV"))
        try await Deadline.wait("onInterruption") { await interruptions.firstCall() }
    }

    @Test("a declared function missing from the library is a load error naming it")
    func missingSymbol() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(
            library: "FunctionLibrary",
            extra: ["functions": [["name": "not_exported_anywhere", "arguments": [], "returns": "void"]]]
        )
        try test.install(fixture)
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .symbolMissing)
        #expect(error?.reason.contains("function 'not_exported_anywhere' declared in the manifest is not exported") == true)
    }
}
