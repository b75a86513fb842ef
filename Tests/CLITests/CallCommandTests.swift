import Foundation
import TestSupport
import Testing

@Suite("plugind call", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct CallCommandTests {
    func libraryFixture() throws -> PluginFixture {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/FunctionLibrary/manifest.json"
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        return PluginFixture(library: "FunctionLibrary", extra: ["functions": manifest?["functions"] ?? []])
    }

    @Test("arguments are parsed by their declared type; results print plainly or as JSON")
    func parsing() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = try libraryFixture()
        try await installApproved(fixture, in: test)
        let id = fixture.identifier
        #expect(try await plugind("call", id, "add_int64", "-9223372036854775808", "0x10", in: test).stdout == "-9223372036854775792\n")
        #expect(try await plugind("call", id, "identity_bool", "yes", in: test).stdout == "true\n")
        #expect(try await plugind("call", id, "identity_double", "-inf", in: test).stdout == "-inf\n")
        #expect(try await plugind("call", id, "checksum", "00ff10", in: test).stdout == "34668816\n")
        #expect(try await plugind("call", id, "bytes_length", "", in: test).stdout == "0\n")
        #expect(try await plugind("call", id, "count_call", in: test).stdout == "")
        let json = try await plugind("call", id, "identity_uint64", "18446744073709551615", "--json", in: test)
        #expect(json.stdout.contains("\"value\" : 18446744073709551615"))
        #expect(json.stdout.contains("\"formatVersion\" : 1"))
        let nan = try await plugind("call", id, "identity_float", "nan", "--json", in: test)
        #expect(nan.stdout.contains("\"value\" : \"nan\""))
    }

    @Test("out-of-range, malformed and missing arguments are usage errors, before any worker starts")
    func refusals() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = try libraryFixture()
        try await installApproved(fixture, in: test)
        let id = fixture.identifier
        let range = try await plugind("call", id, "identity_int8", "128", in: test)
        #expect(range.status == 64)
        #expect(range.stderr.hasPrefix("error: argument 1 of identity_int8(int8) -> int8: 128 is out of range for int8 (-128 … 127)\n"))
        let negative = try await plugind("call", id, "identity_uint16", "-1", in: test)
        #expect(negative.stderr.contains("-1 is out of range for uint16"))
        let malformed = try await plugind("call", id, "hypotenuse", "3", "four", in: test)
        #expect(malformed.stderr.contains("expected a double, got 'four'"))
        let count = try await plugind("call", id, "hypotenuse", "3", in: test)
        #expect(count.status == 64)
        #expect(count.stderr.contains("takes 2 argument(s), got 1"))
        let unknown = try await plugind("call", id, "nope", in: test)
        #expect(unknown.stderr.contains("declares no function 'nope'; it declares: identity_bool"))
        let crash = try await plugind("call", id, "crash", "1", in: test)
        #expect(crash.status == 70)
    }

    @Test("a function-only bundle exposes a library that ships with the operating system")
    func systemLibrary() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = test.externalRoot + "/libm.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest = """
            {
              "manifestVersion": 1,
              "identifier": "org.plugind.tests.libm",
              "name": "C math library",
              "version": "6",
              "extensionPoint": "org.plugind.tests.functions",
              "library": "libm.so.6",
              "functions": [
                {"name": "cos", "arguments": ["double"], "returns": "double"},
                {"name": "pow", "arguments": ["double", "double"], "returns": "double"},
                {"name": "lround", "arguments": ["double"], "returns": "int64"}
              ]
            }
            """
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let approval = try await plugind("approve", "org.plugind.tests.libm", "--yes", in: test)
        #expect(approval.status == 0, "\(approval.stderr)")
        #expect(approval.stderr.contains("library:         /"))
        #expect(try await plugind("call", "org.plugind.tests.libm", "cos", "0", in: test).stdout == "1.0\n")
        #expect(try await plugind("call", "org.plugind.tests.libm", "pow", "2", "10", in: test).stdout == "1024.0\n")
        #expect(try await plugind("call", "org.plugind.tests.libm", "lround", "-2.5", in: test).stdout == "-3\n")
        let info = try await plugind("info", "org.plugind.tests.libm", "--no-probe", in: test)
        #expect(info.stdout.contains("(system library libm.so.6, root-owned, updated by the system"))
        #expect(info.stdout.contains("pow(double, double) -> double"))
    }
}
