import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// Typed calls with out and inout pointers, buffers, NULL and errno, in the confined worker,
/// against libraries no one here wrote (zlib, libm, libc, each by soname) and a library of the
/// suite's own whose hostile functions report lengths beyond the capacity they were given. Every
/// result is compared with an independent implementation: Python's zlib, or the same C function
/// called in this process.
@Suite("Typed calls with pointers and buffers", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct TypedCallBufferTests {
    /// zlib's return codes.
    static let zOK: Int32 = 0
    static let zBufError: Int32 = -5

    /// Writes a function-only bundle (a manifest naming `library`) into the host's bundled root.
    static func installFunctionBundle(
        _ identifier: String, library: String, functions: [[String: Any]], in test: TestHost
    ) throws {
        let bundle = test.bundledRoot + "/\(identifier).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": identifier, "version": "1",
            "extensionPoint": "org.plugind.tests.functions", "library": library, "functions": functions,
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
    }

    /// The zlib example bundle, as it ships (ExamplePlugins/Zlib), launched.
    static func launchZlib(in test: TestHost) async throws -> AppExtensionProcess {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json"
        let bundle = test.bundledRoot + "/zlib.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: bundle + "/manifest.json")
        return try await AppExtensionProcess(configuration: try test.configuration("org.plugind.examples.zlib"))
    }

    /// Bytes no compressor shrinks, the same for every run of a size.
    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count {
            // SplitMix64.
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            mixed ^= mixed >> 31
            withUnsafeBytes(of: mixed.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    /// Runs a one-line Python program over `input` (stdin to stdout, bytes).
    static func python(_ program: String, input: [UInt8]) async throws -> [UInt8] {
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["python3", "-c", program], environment: ProcessInfo.processInfo.environment, input: input)
        try #require(result.status == 0, "python3 failed: \(result.stderr)")
        return result.standardOutput
    }

    static func bytes(_ value: FunctionValue?) -> [UInt8]? {
        guard case .bytes(let bytes)? = value else { return nil }
        return bytes
    }

    @Test(
        "random data from 0 B to 4 MiB through the worker's compress and uncompress, checked by Python's zlib both ways",
        arguments: [0, 1, 1000, 64 << 10, 4 << 20])
    func zlibRoundTrip(size: Int) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchZlib(in: test)
        let connection = try await process.makeConnection()
        let data = Self.randomBytes(size, seed: UInt64(size))

        guard case .uint64(let bound) = try await connection.call("compressBound", arguments: [.uint64(UInt64(size))]) else {
            Issue.record("compressBound did not return a uint64")
            return
        }
        let sharedBefore = process.sharedMemoryTransfers.responses
        let compressed = try await connection.callWithOutputs("compress", arguments: [.uint64(bound), .bytes(data)])
        #expect(compressed.value == .int32(Self.zOK))
        // A result with 16 KiB of out buffers or more comes through the shared region in one copy.
        let sharedAfter = process.sharedMemoryTransfers.responses
        #expect(sharedAfter == sharedBefore + (bound >= 16 << 10 ? 1 : 0), "\(size) bytes: \(sharedBefore) → \(sharedAfter)")
        let dest = try #require(Self.bytes(compressed[output: "dest"]))
        #expect(compressed[output: "destLen"] == .uint64(UInt64(dest.count)))
        #expect(UInt64(dest.count) <= bound)
        #expect(compressed.outputs.map(\.name) == ["dest", "destLen"])
        // Python's zlib inflates what the worker's zlib deflated…
        let inflatedByPython = try await Self.python(
            "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))", input: dest)
        #expect(inflatedByPython == data, "Python could not get the \(size) bytes back from compress's output")

        // … and the worker's uncompress inflates what Python deflated, at level 9 (not compress's).
        let deflatedByPython = try await Self.python(
            "import sys, zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read(), 9))", input: data)
        let uncompressed = try await connection.callWithOutputs(
            "uncompress", arguments: [.uint64(UInt64(size)), .bytes(deflatedByPython)])
        #expect(uncompressed.value == .int32(Self.zOK))
        #expect(Self.bytes(uncompressed[output: "dest"]) == data)
        #expect(uncompressed[output: "destLen"] == .uint64(UInt64(size)))
        await process.invalidateAndWait()
    }

    @Test("a capacity too small is zlib's Z_BUF_ERROR, a result like any other, and the lengths stay within it")
    func capacityTooSmall() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchZlib(in: test)
        let connection = try await process.makeConnection()
        let text = Array(String(repeating: "plugind sandboxes zlib. ", count: 40).utf8)

        let small = try await connection.callWithOutputs("compress", arguments: [.uint64(4), .bytes(text)])
        #expect(small.value == .int32(Self.zBufError))
        let smallLength = try #require(small[output: "destLen"]?.asCount)
        #expect(smallLength <= 4)
        #expect(Self.bytes(small[output: "dest"])?.count == Int(smallLength))

        let whole = try await connection.callWithOutputs("compress2", arguments: [.uint64(1024), .bytes(text), .int32(9)])
        #expect(whole.value == .int32(Self.zOK))
        let compressed = try #require(Self.bytes(whole[output: "dest"]))
        #expect(compressed.count < text.count)
        let short = try await connection.callWithOutputs("uncompress", arguments: [.uint64(10), .bytes(compressed)])
        #expect(short.value == .int32(Self.zBufError))
        #expect(try #require(short[output: "destLen"]?.asCount) <= 10)
        // A capacity of 0: zlib inflates into a byte of its own and says the data does not fit
        // (Z_DATA_ERROR, as Python's ctypes sees it too); nothing comes back.
        let none = try await connection.callWithOutputs("uncompress", arguments: [.uint64(0), .bytes(compressed)])
        #expect(none.value == .int32(-3))
        #expect(Self.bytes(none[output: "dest"]) == [])
        #expect(none[output: "destLen"] == .uint64(0))
        // The string-typed declarations of the same bundle still work beside them.
        #expect(try await connection.call("crc32", arguments: [.uint64(0), .string("hello"), .uint32(5)]) == .uint64(907_060_870))
        await process.invalidateAndWait()
    }

    @Test("libm's frexp (an out int) and libc's rand_r (an inout unsigned), strtol (NULL, errno) match the same calls in this process")
    func libcAndLibm() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try Self.installFunctionBundle(
            "org.plugind.tests.libm-out", library: "libm.so.6",
            functions: [
                [
                    "name": "frexp", "returns": "double",
                    "arguments": ["double", ["name": "exponent", "type": "pointer", "to": "int32", "direction": "out"]],
                ],
                [
                    "name": "modf", "returns": "double",
                    "arguments": ["double", ["name": "integral", "type": "pointer", "to": "double", "direction": "out"]],
                ],
            ], in: test)
        try Self.installFunctionBundle(
            "org.plugind.tests.libc-out", library: "libc.so.6",
            functions: [
                [
                    "name": "rand_r", "returns": "int32",
                    "arguments": [["name": "seed", "type": "pointer", "to": "uint32", "direction": "inout"]],
                ],
                ["name": "strtol", "returns": "int64", "arguments": ["string", "null", "int32"], "errno": true],
            ], in: test)
        let libm = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.libm-out"))
        let libmCalls = try await libm.makeConnection()
        for value in [
            0, 1, 8, -3.5, 0.1, 1e300, -Double.leastNormalMagnitude / 3, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude,
        ] {
            var exponent: Int32 = 0
            let mantissa = Glibc.frexp(value, &exponent)
            let result = try await libmCalls.callWithOutputs("frexp", arguments: [.double(value)])
            #expect(result.value == .double(mantissa), "frexp(\(value))")
            #expect(result[output: "exponent"] == .int32(exponent), "frexp(\(value))")
            #expect(result.errorNumber == nil)

            var integral = 0.0
            let fraction = Glibc.modf(value, &integral)
            let split = try await libmCalls.callWithOutputs("modf", arguments: [.double(value)])
            #expect(split.value == .double(fraction))
            #expect(split[output: "integral"] == .double(integral))
        }
        await libm.invalidateAndWait()

        let libc = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.libc-out"))
        let libcCalls = try await libc.makeConnection()
        var seed: UInt32 = 2026
        for _ in 0..<5 {
            let given = seed
            let expected = Glibc.rand_r(&seed)
            let result = try await libcCalls.callWithOutputs("rand_r", arguments: [.uint32(given)])
            #expect(result.value == .int32(expected))
            #expect(result[output: "seed"] == .uint32(seed), "the seed the library left is the result's")
        }
        let parsed = try await libcCalls.callWithOutputs("strtol", arguments: [.string("-42"), .int32(10)])
        #expect(parsed.value == .int64(-42))
        #expect(parsed.errorNumber == 0, "errno is 0 before the call: a function that succeeds reports 0")
        let overflow = try await libcCalls.callWithOutputs("strtol", arguments: [.string("99999999999999999999"), .int32(10)])
        #expect(overflow.value == .int64(.max))
        #expect(overflow.errorNumber == ERANGE)
        let refused = await #expect(throws: AppExtensionError.self) {
            try await libcCalls.call("strtol", arguments: [.string("1"), .int32(10), .int32(0)])
        }
        #expect(refused?.reason == "strtol(string, NULL, int32) -> int64, errno takes 2 argument(s), got 3")
        await libc.invalidateAndWait()
    }

    /// The suite's own library (Tests/Fixtures/TypedBuffers/typed_buffers.c), compiled now,
    /// with its declarations.
    static func typedBuffersFixture(in test: TestHost) async throws -> PluginFixture {
        let library = test.directory.path + "/libTypedBuffers.so"
        let source = try String(
            contentsOfFile: BuiltProducts.packageRoot + "/Tests/Fixtures/TypedBuffers/typed_buffers.c", encoding: .utf8)
        try await CCompiler.sharedLibrary(source, output: library)
        func buffer(_ name: String, _ direction: String, _ count: Any, element: String? = nil) -> [String: Any] {
            var argument: [String: Any] = ["name": name, "type": "buffer", "direction": direction, "count": count]
            if let element { argument["element"] = element }
            return argument
        }
        func pointer(_ name: String, _ type: String, _ direction: String) -> [String: Any] {
            ["name": name, "type": "pointer", "to": type, "direction": direction]
        }
        let functions: [[String: Any]] = [
            [
                "name": "reverse_int32", "returns": "void",
                "arguments": [buffer("values", "inout", "count", element: "int32"), ["name": "count", "type": "uint64"]],
            ],
            [
                "name": "dot_int32", "returns": "int64",
                "arguments": [
                    buffer("left", "in", "count", element: "int32"), buffer("right", "in", "count", element: "int32"),
                    ["name": "count", "type": "uint32"],
                ],
            ],
            [
                "name": "squares", "returns": "int32",
                "arguments": [buffer("out", "out", "*len", element: "int32"), pointer("len", "uint32", "inout"), "uint32"],
            ],
            ["name": "fill16", "returns": "void", "arguments": [buffer("out", "out", 16), "uint8"]],
            ["name": "iota_bytes", "returns": "void", "arguments": [buffer("out", "out", "count"), ["name": "count", "type": "uint64"]]],
            [
                "name": "append_bang", "returns": "int32",
                "arguments": [buffer("text", "inout", "*len"), pointer("len", "uint64", "inout")],
            ],
            ["name": "fail_with", "returns": "int32", "arguments": ["int32"], "errno": true],
            ["name": "liar_length", "returns": "int32", "arguments": [buffer("dest", "out", "*len"), pointer("len", "uint64", "inout")]],
            [
                "name": "negative_length", "returns": "int32",
                "arguments": [buffer("dest", "out", "*len"), pointer("len", "int32", "inout")],
            ],
        ]
        return PluginFixture(
            library: "TypedBuffers", identifier: "org.plugind.tests.typed-buffers", extra: ["functions": functions],
            libraryPath: library)
    }

    static func int32Bytes(_ values: [Int32]) -> [UInt8] {
        values.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    }

    @Test("elements of a declared type, counts shared, derived and passed, constants, inout buffers counted by *len, errno")
    func bufferKinds() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(try await Self.typedBuffersFixture(in: test))
        let connection = try await process.makeConnection()

        let reversed = try await connection.callWithOutputs("reverse_int32", arguments: [.bytes(Self.int32Bytes([1, -2, 3, 4_000_000]))])
        #expect(reversed.value == .void)
        #expect(reversed[output: "values"] == .bytes(Self.int32Bytes([4_000_000, 3, -2, 1])))
        let empty = try await connection.callWithOutputs("reverse_int32", arguments: [.bytes([])])
        #expect(empty[output: "values"] == .bytes([]))

        let dot = try await connection.call(
            "dot_int32", arguments: [.bytes(Self.int32Bytes([1, 2, 3])), .bytes(Self.int32Bytes([4, 5, -6]))])
        #expect(dot == .int64(-4), "1·4 + 2·5 + 3·(-6)")
        let mismatch = await #expect(throws: AppExtensionError.self) {
            try await connection.call("dot_int32", arguments: [.bytes(Self.int32Bytes([1, 2])), .bytes(Self.int32Bytes([4, 5, 6]))])
        }
        #expect(mismatch?.code == .invalidArguments)
        #expect(mismatch?.reason == "'left' and 'right' of dot_int32 share the count 'count' but hold 2 and 3 elements")
        let ragged = await #expect(throws: AppExtensionError.self) {
            try await connection.call("dot_int32", arguments: [.bytes([1, 2, 3]), .bytes([4, 5, 6])])
        }
        #expect(ragged?.reason == "'left' of dot_int32 holds 3 bytes, not a whole number of int32 elements (4 bytes each)")

        let fitted = try await connection.callWithOutputs("squares", arguments: [.uint32(8), .uint32(5)])
        #expect(fitted.value == .int32(0))
        #expect(fitted[output: "out"] == .bytes(Self.int32Bytes([0, 1, 4, 9, 16])))
        #expect(fitted[output: "len"] == .uint32(5))
        let cut = try await connection.callWithOutputs("squares", arguments: [.uint32(3), .uint32(5)])
        #expect(cut.value == .int32(-1))
        #expect(cut[output: "out"] == .bytes(Self.int32Bytes([0, 1, 4])))

        let pattern: [UInt8] = (0..<16).map { UInt8((250 + $0) % 256) }
        let filled = try await connection.callWithOutputs("fill16", arguments: [.uint8(250)])
        #expect(filled[output: "out"] == .bytes(pattern))
        let iota = try await connection.callWithOutputs("iota_bytes", arguments: [.uint64(300)])
        #expect(iota[output: "out"] == .bytes((0..<300).map { UInt8(truncatingIfNeeded: $0) }))

        let bang = try await connection.callWithOutputs("append_bang", arguments: [.bytes(Array("hi".utf8)), .uint64(8)])
        #expect(bang.value == .int32(0))
        #expect(bang[output: "text"] == .bytes(Array("hi!".utf8)))
        #expect(bang[output: "len"] == .uint64(3))
        let tooLong = await #expect(throws: AppExtensionError.self) {
            try await connection.call("append_bang", arguments: [.bytes(Array("hello".utf8)), .uint64(4)])
        }
        #expect(tooLong?.reason == "'text' of append_bang holds 5 bytes, more than the capacity of 4 bytes 'len' gives")

        let failed = try await connection.callWithOutputs("fail_with", arguments: [.int32(EDOM)])
        #expect(failed.value == .int32(-1))
        #expect(failed.errorNumber == EDOM)
        #expect(failed.outputs.isEmpty)
        await process.invalidateAndWait()
    }

    @Test(
        "a library that reports a length beyond the capacity it was given: a typed error naming the function and argument; the worker is stopped, the host goes on",
        arguments: ["liar_length", "negative_length"])
    func lengthBeyondCapacity(function: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = try await Self.typedBuffersFixture(in: test)
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()
        let capacity: FunctionValue = function == "liar_length" ? .uint64(16) : .int32(16)
        let error = await #expect(throws: AppExtensionError.self) {
            try await connection.callWithOutputs(function, arguments: [capacity])
        }
        #expect(error?.code == .protocolViolation)
        let expected =
            function == "liar_length"
            ? "liar_length set 'len' to 4112, beyond the capacity of 16 uint8 elements given for 'dest'; the worker was stopped"
            : "negative_length set 'len' to -1, beyond the capacity of 16 uint8 elements given for 'dest'; the worker was stopped"
        #expect(error?.reason == expected)
        // The worker ends; the host, and a new worker of the same plugin, go on.
        _ = await process.waitForTermination()
        let again = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        let honest = try await again.makeConnection().callWithOutputs("squares", arguments: [.uint32(2), .uint32(2)])
        #expect(honest[output: "out"] == .bytes(Self.int32Bytes([0, 1])))
        await again.invalidateAndWait()
    }

    @Test("out buffers larger than the message limit are refused before anything is sent")
    func capacityBeyondMessageLimit() async throws {
        let test = try TestHost()
        defer { test.remove() }
        var fixture = try await Self.typedBuffersFixture(in: test)
        fixture.extra["limits"] = ["maxMessageBytes": 1 << 20]
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()
        let error = await #expect(throws: AppExtensionError.self) {
            try await connection.call("iota_bytes", arguments: [.uint64(2 << 20)])
        }
        #expect(error?.code == .invalidArguments)
        #expect(error?.reason == "the out buffers of iota_bytes would hold 2097152 bytes, more than the message limit of 1048576")
        #expect(try await connection.callWithOutputs("iota_bytes", arguments: [.uint64(1000)])[output: "out"] != nil)
        await process.invalidateAndWait()
    }
}
