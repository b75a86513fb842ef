import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Structs passed and returned by value, in the confined worker: libm's complex functions
/// (ExamplePlugins/Libm: `double complex` is passed as the struct of two doubles it is laid out
/// as) checked against Python's cmath; libc's `div`, `ldiv`, `lldiv` and `inet_ntoa` checked
/// against Swift's own arithmetic; and a library of the suite's own with a struct for each way
/// x86-64 passes one (general registers, vector registers, both, memory, the stack).
@Suite("Typed calls with structs by value", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct TypedCallStructValueTests {
    static func bundle(_ manifest: [String: Any], named name: String, in test: TestHost) throws {
        let bundle = test.bundledRoot + "/\(name).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
    }

    static func double(_ value: FunctionValue?) throws -> Double {
        guard case .double(let number)? = value else { throw TestFailure("expected a double, got \(String(describing: value))") }
        return number
    }

    static func close(_ a: Double, _ b: Double) -> Bool {
        a == b || abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    }

    @Test("libm's csqrt, cexp, cpow and cabs on double complex, and frexp's exponent, agree with Python's cmath and math")
    func complexMath() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = test.bundledRoot + "/libm.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: BuiltProducts.packageRoot + "/ExamplePlugins/Libm/manifest.json", toPath: bundle + "/manifest.json")
        let process = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.examples.libm"))
        let connection = try await process.makeConnection()
        let numbers: [(Double, Double)] = [(-4, 0), (3, 4), (0.5, -1.25), (-2.75, -0.125), (1e-3, 7), (12.5, 0)]
        var confined: [[Double]] = []
        for (index, (re, im)) in numbers.enumerated() {
            let (wre, wim) = numbers[(index + 1) % numbers.count]
            var row: [Double] = []
            for function in ["csqrt", "cexp"] {
                let result = try await connection.callWithOutputs(function, arguments: [.double(re), .double(im)])
                #expect(result.value == .void)
                row += [try Self.double(result[output: "return.re"]), try Self.double(result[output: "return.im"])]
            }
            let power = try await connection.callWithOutputs(
                "cpow", arguments: [.double(re), .double(im), .double(wre / 4), .double(wim / 4)])
            row += [try Self.double(power[output: "return.re"]), try Self.double(power[output: "return.im"])]
            row.append(try Self.double(try await connection.call("cabs", arguments: [.double(re), .double(im)])))
            let split = try await connection.callWithOutputs("frexp", arguments: [.double(re * 1000 + im)])
            row.append(try Self.double(split.value))
            guard case .int32(let exponent)? = split[output: "exponent"] else { throw TestFailure("frexp gave no exponent") }
            row.append(Double(exponent))
            confined.append(row)
        }
        let pairs = numbers.enumerated().map { index, number in
            let other = numbers[(index + 1) % numbers.count]
            return "\(number.0),\(number.1),\(other.0 / 4),\(other.1 / 4)"
        }
        let program = """
            import cmath, math, sys
            for line in sys.stdin.read().split():
                re, im, wre, wim = map(float, line.split(','))
                z = complex(re, im); s = cmath.sqrt(z); e = cmath.exp(z); p = z ** complex(wre, wim)
                m, x = math.frexp(re * 1000 + im)
                print(*map(repr, [s.real, s.imag, e.real, e.imag, p.real, p.imag, math.hypot(re, im), m, float(x)]))
            """
        let output = try await TypedCallBufferTests.python(program, input: Array(pairs.joined(separator: "\n").utf8))
        let expected = String(decoding: output, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: " ").compactMap { Double($0) }
        }
        #expect(expected.count == numbers.count)
        for (row, reference) in zip(confined, expected) {
            #expect(row.count == reference.count)
            #expect(zip(row, reference).allSatisfy(Self.close), "libm \(row) against Python \(reference)")
            // frexp is exact: the same mantissa and exponent.
            #expect(Array(row.suffix(2)) == Array(reference.suffix(2)))
        }
        await process.invalidateAndWait()
    }

    @Test(
        "libc's div, ldiv and lldiv return their quotient and remainder by value as Swift's truncating division does; inet_ntoa takes struct in_addr by value"
    )
    func libcStructs() async throws {
        let test = try TestHost()
        defer { test.remove() }
        func pair(_ name: String, _ type: String, size: Int) -> [String: Any] {
            let width = size / 2
            return [
                "size": size, "alignment": width,
                "fields": [["name": "quot", "offset": 0, "type": type], ["name": "rem", "offset": width, "type": type]],
            ]
        }
        func division(_ name: String, _ type: String, _ layout: String) -> [String: Any] {
            ["name": name, "arguments": [type, type], "returns": ["type": "struct", "struct": layout, "get": ["quot", "rem"]]]
        }
        try Self.bundle(
            [
                "manifestVersion": 1, "identifier": "org.plugind.tests.division", "name": "division", "version": "1",
                "extensionPoint": "org.plugind.tests.functions", "library": "libc.so.6",
                "structs": [
                    "div_t": pair("div_t", "int32", size: 8), "ldiv_t": pair("ldiv_t", "int64", size: 16),
                    "in_addr": ["size": 4, "alignment": 4, "fields": [["name": "s_addr", "offset": 0, "type": "uint32"]]],
                ],
                "functions": [
                    division("div", "int32", "div_t"), division("ldiv", "int64", "ldiv_t"), division("lldiv", "int64", "ldiv_t"),
                    [
                        "name": "inet_ntoa", "returns": "string",
                        "arguments": [["name": "in", "type": "struct", "struct": "in_addr", "by": "value", "set": ["s_addr"]]],
                    ],
                ],
            ], named: "division", in: test)
        let process = try await AppExtensionProcess(configuration: try test.configuration("org.plugind.tests.division"))
        let connection = try await process.makeConnection()
        let pairs: [(Int64, Int64)] = [
            (7, 2), (-7, 2), (7, -2), (-7, -2), (0, 5), (1 << 40, 3), (-(1 << 40) - 1, 1 << 20), (Int64(Int32.min) + 1, 10),
        ]
        for (numerator, denominator) in pairs {
            for function in ["ldiv", "lldiv"] {
                let result = try await connection.callWithOutputs(function, arguments: [.int64(numerator), .int64(denominator)])
                #expect(result[output: "return.quot"] == .int64(numerator / denominator), "\(function)(\(numerator), \(denominator))")
                #expect(result[output: "return.rem"] == .int64(numerator % denominator))
            }
            guard let small = Int32(exactly: numerator), let divisor = Int32(exactly: denominator) else { continue }
            let result = try await connection.callWithOutputs("div", arguments: [.int32(small), .int32(divisor)])
            #expect(result.outputs.map(\.name) == ["return.quot", "return.rem"])
            #expect(result[output: "return.quot"] == .int32(small / divisor), "div(\(small), \(divisor))")
            #expect(result[output: "return.rem"] == .int32(small % divisor))
        }
        for address: [UInt8] in [[127, 0, 0, 1], [192, 168, 10, 254], [0, 0, 0, 0], [255, 255, 255, 255], [10, 1, 200, 3]] {
            // s_addr holds the address in network order: its first byte is the first number.
            let word = UInt32(address[0]) | UInt32(address[1]) << 8 | UInt32(address[2]) << 16 | UInt32(address[3]) << 24
            let text = try await connection.call("inet_ntoa", arguments: [.uint32(word)])
            #expect(text == .string(address.map(String.init).joined(separator: ".")))
        }
        await process.invalidateAndWait()
    }

    @Test(
        "structs in general registers, vector registers, both, memory and on the stack, passed and returned, as the library computes them")
    func everyPassingClass() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let library = test.directory.path + "/libStructValues.so"
        let source = try String(
            contentsOfFile: BuiltProducts.packageRoot + "/Tests/Fixtures/StructValues/struct_values.c", encoding: .utf8)
        try await CCompiler.sharedLibrary(source, output: library)
        func byValue(_ name: String, _ layout: String, _ fields: [String]) -> [String: Any] {
            ["name": name, "type": "struct", "struct": layout, "by": "value", "set": fields]
        }
        func returned(_ layout: String, _ fields: [String]) -> [String: Any] {
            ["type": "struct", "struct": layout, "get": fields]
        }
        let mixed = ["x", "n"]
        let floats = ["a", "b", "c"]
        let wide = ["a", "b", "c", "d"]
        let structs: [String: Any] = [
            "mixed": [
                "size": 16, "alignment": 8,
                "fields": [["name": "x", "offset": 0, "type": "double"], ["name": "n", "offset": 8, "type": "int32"]],
            ],
            "floats3": [
                "size": 12, "alignment": 4,
                "fields": [
                    ["name": "a", "offset": 0, "type": "float"], ["name": "b", "offset": 4, "type": "float"],
                    ["name": "c", "offset": 8, "type": "float"],
                ],
            ],
            "wide": [
                "size": 32, "alignment": 8,
                "fields": [
                    ["name": "a", "offset": 0, "type": "int64"], ["name": "b", "offset": 8, "type": "int64"],
                    ["name": "c", "offset": 16, "type": "int64"], ["name": "d", "offset": 24, "type": "double"],
                ],
            ],
            "small": [
                "size": 4, "alignment": 2,
                "fields": [["name": "tag", "offset": 0, "type": "uint8"], ["name": "value", "offset": 2, "type": "int16"]],
            ],
            "named": [
                "size": 16, "alignment": 8,
                "fields": [["name": "label", "offset": 0, "type": "string"], ["name": "n", "offset": 8, "type": "int32"]],
            ],
        ]
        let functions: [[String: Any]] = [
            ["name": "mixed_scale", "arguments": [byValue("m", "mixed", mixed), "int32"], "returns": returned("mixed", mixed)],
            ["name": "mixed_sum5", "arguments": ["a", "b", "c", "d", "e"].map { byValue($0, "mixed", mixed) }, "returns": "double"],
            ["name": "floats3_scale", "arguments": [byValue("v", "floats3", floats), "float"], "returns": returned("floats3", floats)],
            [
                "name": "wide_add", "arguments": [byValue("left", "wide", wide), byValue("right", "wide", wide)],
                "returns": returned("wide", wide),
            ],
            ["name": "small_total", "arguments": ["int32", byValue("s", "small", ["tag", "value"]), "int32"], "returns": "int32"],
            ["name": "parity", "arguments": ["int32"], "returns": returned("named", ["label", "n"])],
            ["name": "garbage_label", "arguments": [], "returns": returned("named", ["label", "n"])],
        ]
        let fixture = PluginFixture(
            library: "StructValues", identifier: "org.plugind.tests.struct-values", extra: ["structs": structs, "functions": functions],
            libraryPath: library)
        let process = try await test.launch(fixture)
        let connection = try await process.makeConnection()

        let scaled = try await connection.callWithOutputs("mixed_scale", arguments: [.double(2.5), .int32(-3), .int32(4)])
        #expect(scaled.outputs.map(\.description) == ["return.x: 10.0", "return.n: -12"])
        let parts: [(Double, Int32)] = [(0.5, 1), (1.25, -2), (-3, 30), (1e6, 400), (0.125, -5000)]
        let sum = try await connection.call("mixed_sum5", arguments: parts.flatMap { [FunctionValue.double($0.0), .int32($0.1)] })
        #expect(sum == .double(parts.reduce(0) { $0 + $1.0 + Double($1.1) }))
        let floatsScaled = try await connection.callWithOutputs(
            "floats3_scale", arguments: [.float(1.5), .float(-2), .float(0.25), .float(4)])
        #expect(floatsScaled.outputs.map(\.value) == [.float(6), .float(-8), .float(1)])
        let left: [Int64] = [1 << 40, -7, 123_456_789]
        let right: [Int64] = [5, -(1 << 50), 1]
        let added = try await connection.callWithOutputs(
            "wide_add", arguments: left.map(FunctionValue.int64) + [.double(0.5)] + right.map(FunctionValue.int64) + [.double(-2.25)])
        let sums: [FunctionValue] = zip(left, right).map { FunctionValue.int64($0 + $1) }
        #expect(added.outputs.map(\.value) == sums + [.double(-1.75)])
        let total = try await connection.call("small_total", arguments: [.int32(3), .uint8(200), .int16(-17), .int32(5)])
        let expectedTotal: Int32 = 3 * 1_000_000 + 200 * 1000 - 17 + 5 * 7
        #expect(total == .int32(expectedTotal))
        for number: Int32 in [0, 7, -4] {
            let named = try await connection.callWithOutputs("parity", arguments: [.int32(number)])
            #expect(named[output: "return.label"] == .string(number % 2 == 0 ? "even" : "odd"))
            #expect(named[output: "return.n"] == .int32(number))
        }
        // A string the library points nowhere readable: the worker ends, the host gets a typed error.
        let error = await #expect(throws: AppExtensionError.self) { try await connection.callWithOutputs("garbage_label") }
        #expect(error?.code == .workerCrashed)
        _ = await process.waitForTermination()
        await process.invalidateAndWait()
    }
}
