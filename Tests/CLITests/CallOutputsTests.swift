import Foundation
import TestSupport
import Testing

/// `plugind call` with buffers, pointers, NULL and errno: arguments on the command line, out
/// values in the text output and in `--json`, refusals before any worker starts; and `plugind
/// verify` refusing inconsistent declarations by function and argument.
@Suite("plugind call: out values, buffers, errno", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct CallOutputsTests {
    /// Writes a manifest-only bundle into the external root and approves it.
    static func approved(_ manifest: [String: Any], in test: TestHost) async throws -> String {
        let identifier = try #require(manifest["identifier"] as? String)
        let bundle = test.externalRoot + "/\(identifier).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let approval = try await plugind("approve", identifier, "--yes", in: test)
        try #require(approval.status == 0, "approve \(identifier): \(approval.stderr)")
        return identifier
    }

    static func zlib(in test: TestHost) async throws -> String {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        return try await approved(manifest, in: test)
    }

    @Test("zlib's compress and uncompress from the shell: hexadecimal or @FILE in, each out value printed by name")
    func zlibText() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let zlib = try await Self.zlib(in: test)
        // Python: zlib.compress(b"hello").hex()
        let compressed = try await plugind("call", zlib, "compress", "64", "68656c6c6f", in: test)
        #expect(compressed.status == 0, "\(compressed.stderr)")
        #expect(compressed.stdout == "0\ndest: 789ccb48cdc9c90700062c0215\ndestLen: 13\n")

        let file = test.directory.path + "/hello.z"
        try Data([0x78, 0x9C, 0xCB, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00, 0x06, 0x2C, 0x02, 0x15]).write(to: URL(fileURLWithPath: file))
        let uncompressed = try await plugind("call", zlib, "uncompress", "5", "@" + file, in: test)
        #expect(uncompressed.stdout == "0\ndest: 68656c6c6f\ndestLen: 5\n", "\(uncompressed.stderr)")
        // Too small a capacity: zlib's own answer, printed like any other.
        let small = try await plugind("call", zlib, "uncompress", "2", "@" + file, in: test)
        #expect(small.status == 0)
        #expect(small.stdout == "-5\ndest: 6865\ndestLen: 2\n")

        let json = try await plugind("call", zlib, "compress", "64", "68656c6c6f", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        #expect(document["value"] as? Int == 0)
        let outputs = try #require(document["outputs"] as? [String: Any])
        #expect(outputs["dest"] as? String == "789ccb48cdc9c90700062c0215")
        #expect(outputs["destLen"] as? Int == 13)
        #expect(document["errno"] == nil)
        // A function without outputs keeps the document it always had.
        let plain = try await plugind("call", zlib, "compressBound", "0", "--json", in: test)
        let plainDocument = try #require(try JSONSerialization.jsonObject(with: Data(plain.standardOutput)) as? [String: Any])
        #expect(plainDocument["value"] as? Int == 13)
        #expect(plainDocument["outputs"] == nil)
    }

    @Test("an out int, NULL and errno from the shell; refusals before any worker starts")
    func pointersAndErrno() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let libm = try await Self.approved(
            [
                "manifestVersion": 1, "identifier": "org.plugind.tests.frexp", "name": "libm", "version": "6",
                "extensionPoint": "org.plugind.tests.functions", "library": "libm.so.6",
                "functions": [
                    [
                        "name": "frexp", "returns": "double",
                        "arguments": ["double", ["name": "exponent", "type": "pointer", "to": "int32", "direction": "out"]],
                    ]
                ],
            ], in: test)
        #expect(try await plugind("call", libm, "frexp", "8", in: test).stdout == "0.5\nexponent: 4\n")
        let libc = try await Self.approved(
            [
                "manifestVersion": 1, "identifier": "org.plugind.tests.strtol", "name": "libc", "version": "6",
                "extensionPoint": "org.plugind.tests.functions", "library": "libc.so.6",
                "functions": [["name": "strtol", "arguments": ["string", "null", "int32"], "returns": "int64", "errno": true]],
            ], in: test)
        #expect(try await plugind("call", libc, "strtol", "ff", "16", in: test).stdout == "255\nerrno: 0\n")
        let overflow = try await plugind("call", libc, "strtol", "99999999999999999999", "10", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(overflow.standardOutput)) as? [String: Any])
        #expect(document["errno"] as? Int == Int(ERANGE))
        #expect(document["value"] as? Int64 == .max)

        let zlib = try await Self.zlib(in: test)
        let count = try await plugind("call", zlib, "compress", "64", in: test)
        #expect(count.status == 64)
        #expect(count.stderr.contains("takes 2 argument(s), got 1"), "\(count.stderr)")
        let hex = try await plugind("call", zlib, "compress", "64", "6g", in: test)
        #expect(hex.status == 64)
        #expect(hex.stderr.contains("argument 2 of compress("), "\(hex.stderr)")
    }

    @Test("a struct made for one call from the shell: its fields set by argument, read back by name, in text and --json")
    func structFields() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let timegm = try await Self.approved(
            [
                "manifestVersion": 1, "identifier": "org.plugind.tests.cli-timegm", "name": "timegm", "version": "1",
                "extensionPoint": "org.plugind.tests.functions", "library": "libc.so.6",
                "structs": ["tm": GlibcStructLayouts.tm],
                "functions": [
                    [
                        "name": "timegm", "returns": "int64",
                        "arguments": [
                            [
                                "name": "tm", "type": "struct", "struct": "tm", "set": ["tm_year", "tm_mon", "tm_mday"],
                                "get": ["tm_wday", "tm_yday", "tm_zone"],
                            ]
                        ],
                    ]
                ],
            ], in: test)
        // 2026-12-06 (C counts years from 1900 and months from 0): a Sunday, day 339 from 0.
        // Python: calendar.timegm((2026, 12, 6, 0, 0, 0)) == 1796515200
        let text = try await plugind("call", timegm, "timegm", "126", "11", "6", in: test)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout == "1796515200\ntm.tm_wday: 0\ntm.tm_yday: 339\ntm.tm_zone: GMT\n")
        let json = try await plugind("call", timegm, "timegm", "126", "11", "6", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        let outputs = try #require(document["outputs"] as? [String: Any])
        #expect(outputs["tm.tm_yday"] as? Int == 339)
        #expect(outputs["tm.tm_zone"] as? String == "GMT")
        let refused = try await plugind("call", timegm, "timegm", "126", "11", in: test)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("takes 3 argument(s), got 2"), "\(refused.stderr)")
    }

    @Test("verify refuses an inconsistent declaration, naming the function and the argument")
    func verifyRefuses() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = test.externalRoot + "/bad.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest = """
            {"manifestVersion": 1, "identifier": "org.plugind.tests.bad", "name": "Bad", "version": "1",
             "extensionPoint": "org.plugind.tests.functions", "library": "libz.so.1",
             "functions": [{"name": "compress", "returns": "int32", "arguments": [
               {"name": "dest", "type": "buffer", "direction": "out", "count": "*destLen"},
               {"name": "destLen", "type": "pointer", "to": "uint64", "direction": "out"},
               {"name": "source", "type": "buffer", "direction": "in", "count": "sourceLen"},
               {"name": "sourceLen", "type": "uint64"}]}]}
            """
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let verified = try await plugind("verify", bundle, in: test)
        #expect(verified.status != 0)
        #expect(
            verified.stdout.contains(
                "key 'functions[0].arguments[0]' is refused: 'dest' of compress is counted by *destLen, but 'destLen' is not an inout pointer to an integer"
            ), "\(verified.stdout)")
    }
}
