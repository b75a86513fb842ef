import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

/// Typed calls with declared structs, in the confined worker: zlib's deflate and inflate streams
/// on a `z_stream` that stays in the worker between calls (ExamplePlugins/Zlib), checked by
/// Python's zlib both ways; libc's `timegm` on a `struct tm` made for one call, checked by
/// Python's calendar; and a library of the suite's own that claims more room than it was given.
@Suite("Typed calls with structs", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct TypedCallStructTests {
    static let zNoFlush: Int32 = 0
    static let zFinish: Int32 = 4
    static let zStreamEnd: Int32 = 1
    static let zBufError: Int32 = -5
    /// `sizeof(z_stream)` on x86-64, as `deflateInit_` wants it.
    static let zStreamSize: Int32 = 112

    static func count(_ value: FunctionValue?) -> Int {
        value?.asCount.map { Int($0) } ?? -1
    }

    /// Deflates `data` through one `deflate_stream`, `chunk` bytes of input and `room` bytes of
    /// output a call, resending what the library has not consumed.
    static func deflate(_ data: [UInt8], chunk: Int, room: UInt32, on connection: AppExtensionConnection) async throws -> [UInt8] {
        guard case .string(let version) = try await connection.call("zlibVersion") else { throw TestFailure("zlibVersion") }
        let made = try await connection.callWithOutputs(
            "deflateInit_", arguments: [.int32(6), .string(version), .int32(Self.zStreamSize)])
        #expect(made.value == .int32(0))
        guard case .handle(let stream)? = made[output: "strm"] else { throw TestFailure("deflateInit_ gave no stream") }
        #expect(stream.kind == "deflate_stream")
        var output: [UInt8] = []
        var offset = 0
        var consumed = 0
        while true {
            let end = min(offset + chunk, data.count)
            let flush = end == data.count ? Self.zFinish : Self.zNoFlush
            let given = Array(data[offset..<end])
            let result = try await connection.callWithOutputs(
                "deflate", arguments: [.handle(stream), .bytes(given), .uint32(room), .int32(flush)])
            guard case .int32(let status) = result.value, status >= 0 || status == Self.zBufError else {
                throw TestFailure("deflate returned \(result.value), msg \(result[output: "strm.msg"] ?? .void)")
            }
            guard case .bytes(let produced)? = result[output: "strm.next_out"] else { throw TestFailure("no next_out") }
            #expect(produced.count == Int(room) - Self.count(result[output: "strm.avail_out"]))
            output += produced
            let left = Self.count(result[output: "strm.avail_in"])
            consumed += given.count - left
            offset = end - left
            #expect(Self.count(result[output: "strm.total_in"]) == consumed, "total_in counts what the library took")
            #expect(Self.count(result[output: "strm.total_out"]) == output.count)
            if status == Self.zStreamEnd { break }
        }
        #expect(consumed == data.count)
        let ended = try await connection.call("deflateEnd", arguments: [.handle(stream)])
        #expect(ended == .int32(0))
        return output
    }

    /// Inflates `compressed` through one `inflate_stream`.
    static func inflate(_ compressed: [UInt8], chunk: Int, room: UInt32, on connection: AppExtensionConnection) async throws -> [UInt8] {
        guard case .string(let version) = try await connection.call("zlibVersion") else { throw TestFailure("zlibVersion") }
        let made = try await connection.callWithOutputs("inflateInit_", arguments: [.string(version), .int32(Self.zStreamSize)])
        #expect(made.value == .int32(0))
        guard case .handle(let stream)? = made[output: "strm"] else { throw TestFailure("inflateInit_ gave no stream") }
        var output: [UInt8] = []
        var offset = 0
        while true {
            let end = min(offset + chunk, compressed.count)
            let result = try await connection.callWithOutputs(
                "inflate", arguments: [.handle(stream), .bytes(Array(compressed[offset..<end])), .uint32(room), .int32(Self.zNoFlush)])
            guard case .int32(let status) = result.value, status >= 0 || status == Self.zBufError else {
                throw TestFailure("inflate returned \(result.value), msg \(result[output: "strm.msg"] ?? .void)")
            }
            guard case .bytes(let produced)? = result[output: "strm.next_out"] else { throw TestFailure("no next_out") }
            output += produced
            offset = end - Self.count(result[output: "strm.avail_in"])
            if status == Self.zStreamEnd { break }
            if status == Self.zBufError && offset == compressed.count { throw TestFailure("the stream ended early") }
        }
        #expect(try await connection.call("inflateEnd", arguments: [.handle(stream)]) == .int32(0))
        return output
    }

    @Test(
        "random data from 0 B to 4 MiB through the worker's deflate and inflate streams in chunks, checked by Python's zlib both ways",
        arguments: [0, 1, 1000, (64 << 10) + 3, 4 << 20])
    func zlibStreams(size: Int) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await TypedCallBufferTests.launchZlib(in: test)
        let connection = try await process.makeConnection()
        let data = TypedCallBufferTests.randomBytes(size, seed: UInt64(size) &+ 7)
        let deflated = try await Self.deflate(data, chunk: 100_000, room: 16_384, on: connection)
        let inflatedByPython = try await TypedCallBufferTests.python(
            "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))", input: deflated)
        #expect(inflatedByPython == data, "Python could not inflate the \(size) bytes the worker's stream deflated")

        let deflatedByPython = try await TypedCallBufferTests.python(
            "import sys, zlib; sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read(), 9))", input: data)
        let inflated = try await Self.inflate(deflatedByPython, chunk: 10_000, room: 32_768, on: connection)
        #expect(inflated == data, "the worker's inflate stream did not give back the \(size) bytes Python deflated")
        await process.invalidateAndWait()
    }

    @Test("a stream handle is refused once released, as another kind, and while nothing made it; its msg reads zlib's message")
    func streamHandles() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await TypedCallBufferTests.launchZlib(in: test)
        let connection = try await process.makeConnection()
        let made = try await connection.callWithOutputs("inflateInit_", arguments: [.string("1.2.13"), .int32(Self.zStreamSize)])
        guard case .handle(let stream)? = made[output: "strm"] else { throw TestFailure("no stream") }
        // Not zlib data: inflate says so through msg, a string the library set.
        let garbage = try await connection.callWithOutputs(
            "inflate", arguments: [.handle(stream), .bytes(Array("not zlib".utf8)), .uint32(64), .int32(Self.zNoFlush)])
        #expect(garbage.value == .int32(-3))
        #expect(garbage[output: "strm.msg"] == .string("incorrect header check"))
        #expect(garbage[output: "strm.next_out"] == .bytes([]))

        let wrongKind = await #expect(throws: AppExtensionError.self) {
            try await connection.call(
                "deflate", arguments: [.handle(FunctionHandle(kind: "deflate_stream", id: stream.id)), .bytes([]), .uint32(8), .int32(0)])
        }
        #expect(wrongKind?.reason.contains("which is a inflate_stream handle") == true, "\(wrongKind?.reason ?? "")")
        #expect(try await connection.call("inflateEnd", arguments: [.handle(stream)]) == .int32(0))
        let released = await #expect(throws: AppExtensionError.self) {
            try await connection.call("inflate", arguments: [.handle(stream), .bytes([]), .uint32(8), .int32(0)])
        }
        #expect(released?.reason.contains("released") == true, "\(released?.reason ?? "")")
        // A version zlib refuses: the struct was made and is a handle all the same, to release.
        let refused = try await connection.callWithOutputs("inflateInit_", arguments: [.string("2"), .int32(Self.zStreamSize)])
        #expect(refused.value == .int32(-6))
        guard case .handle(let unused)? = refused[output: "strm"] else { throw TestFailure("no stream") }
        #expect(try await connection.call("inflateEnd", arguments: [.handle(unused)]) == .int32(-2))
        await process.invalidateAndWait()
    }

    @Test("libc's timegm on a struct tm made for the call: the time and the normalised fields match Python's calendar and gmtime")
    func timegmStruct() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let setFields = ["tm_year", "tm_mon", "tm_mday", "tm_hour", "tm_min", "tm_sec"]
        let getFields = ["tm_year", "tm_mon", "tm_mday", "tm_hour", "tm_min", "tm_sec", "tm_wday", "tm_yday", "tm_zone"]
        let bundle = test.bundledRoot + "/timegm.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.timegm", "name": "timegm", "version": "1",
            "extensionPoint": "org.plugind.tests.functions", "library": "libc.so.6", "structs": ["tm": GlibcStructLayouts.tm],
            "functions": [
                [
                    "name": "timegm", "returns": "int64",
                    "arguments": [["name": "tm", "type": "struct", "struct": "tm", "set": setFields, "get": getFields]],
                ]
            ],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let process = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.timegm"))
        let connection = try await process.makeConnection()
        // Dates as C counts them (years since 1900, months from 0), some out of range to normalise.
        let dates: [[Int32]] = [
            [70, 0, 1, 0, 0, 0], [126, 11, 6, 0, 10, 2], [100, 1, 29, 23, 59, 59], [124, 0, 32, 25, 61, 61], [199, 11, 31, 12, 0, 0],
            [69, 11, 31, 23, 59, 59],
        ]
        var lines: [String] = []
        var answers: [[Int64]] = []
        for date in dates {
            let result = try await connection.callWithOutputs("timegm", arguments: date.map(FunctionValue.int32))
            guard case .int64(let seconds) = result.value else { throw TestFailure("timegm returned \(result.value)") }
            var row = [seconds]
            for name in getFields.dropLast() {
                guard case .int32(let value)? = result[output: "tm." + name] else { throw TestFailure("no \(name)") }
                row.append(Int64(value))
            }
            #expect(result[output: "tm.tm_zone"] == .string("GMT"))
            answers.append(row)
            let fields = date.map(String.init).joined(separator: ",")
            lines.append(fields)
        }
        // Python: calendar.timegm for the seconds, out-of-range fields carried by timedelta, and
        // time.gmtime for the normalised fields
        // (its weekday counts from Monday, C's from Sunday; its yday from 1, C's from 0).
        let program = """
            import sys, calendar, datetime, time
            for line in sys.stdin.read().split():
                y, mo, d, h, mi, s = map(int, line.split(','))
                first = calendar.timegm((1900 + y + mo // 12, mo % 12 + 1, 1, 0, 0, 0))
                t = first + int(datetime.timedelta(days=d - 1, hours=h, minutes=mi, seconds=s).total_seconds())
                g = time.gmtime(t)
                print(t, g.tm_year - 1900, g.tm_mon - 1, g.tm_mday, g.tm_hour, g.tm_min, g.tm_sec, (g.tm_wday + 1) % 7, g.tm_yday - 1)
            """
        let output = try await TypedCallBufferTests.python(program, input: Array(lines.joined(separator: "\n").utf8))
        let expected = String(decoding: output, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: " ").compactMap { Int64($0) }
        }
        #expect(answers == expected)
        await process.invalidateAndWait()
    }

    @Test(
        "a library that claims more room left than the struct's out buffer was given: a typed error naming the field; the worker is stopped"
    )
    func roomBeyondCapacity() async throws {
        let test = try TestHost()
        defer { test.remove() }
        var fixture = try await TypedCallBufferTests.typedBuffersFixture(in: test)
        let sink: [String: Any] = [
            "size": 16, "alignment": 8,
            "fields": [
                ["name": "next_out", "offset": 0, "type": "buffer", "direction": "out", "count": "avail_out", "advances": true],
                ["name": "avail_out", "offset": 8, "type": "uint32"], ["name": "written", "offset": 12, "type": "uint32"],
            ],
        ]
        let argument: [String: Any] = [
            "name": "sink", "type": "struct", "struct": "sink", "set": ["next_out", "avail_out"],
            "get": ["next_out", "avail_out", "written"],
        ]
        fixture.extra["structs"] = ["sink": sink]
        var functions = fixture.extra["functions"] as? [[String: Any]] ?? []
        functions.append(["name": "sink_fill", "returns": "int32", "arguments": [argument, "uint8"]])
        functions.append(["name": "sink_overstate", "returns": "int32", "arguments": [argument]])
        fixture.extra["functions"] = functions
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()
        let filled = try await connection.callWithOutputs("sink_fill", arguments: [.uint32(5), .uint8(7)])
        #expect(filled[output: "sink.next_out"] == .bytes([7, 7, 7, 7, 7]))
        #expect(filled[output: "sink.written"] == .uint32(5))
        #expect(filled[output: "sink.avail_out"] == .uint32(0))
        let error = await #expect(throws: AppExtensionError.self) {
            try await connection.callWithOutputs("sink_overstate", arguments: [.uint32(16)])
        }
        #expect(error?.code == .protocolViolation)
        #expect(
            error?.reason
                == "sink_overstate set 'sink.avail_out' to 116, beyond the 16 uint8 elements bound to 'sink.next_out'; the worker was stopped"
        )
        _ = await process.waitForTermination()
        await process.invalidateAndWait()
    }
}
