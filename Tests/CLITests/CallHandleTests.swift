import Foundation
import TestSupport
import Testing

/// `plugind call` with handles (ExamplePlugins/Sqlite): a handle printed as `kind#id` and carried
/// by `--json`; a handle named on the command line names nothing in the call's own worker; and
/// `plugind verify` refusing inconsistent handle declarations by function and argument.
@Suite("plugind call: handles", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct CallHandleTests {
    static func sqlite(in test: TestHost) async throws -> String {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Sqlite/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        return try await CallOutputsTests.approved(manifest, in: test)
    }

    @Test("an out handle is printed as kind#id and is an object in --json; a handle from an earlier call is refused")
    func sqliteOpen() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let sqlite = try await Self.sqlite(in: test)
        let opened = try await plugind("call", sqlite, "sqlite3_open", ":memory:", in: test)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == "0\nppDb: sqlite3#1\n")

        let json = try await plugind("call", sqlite, "sqlite3_open", ":memory:", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        #expect(document["value"] as? Int == 0)
        let outputs = try #require(document["outputs"] as? [String: Any])
        let handle = try #require(outputs["ppDb"] as? [String: Any])
        #expect(handle["kind"] as? String == "sqlite3")
        #expect(handle["id"] as? Int == 1)

        // Each call has a worker of its own: sqlite3#1 of the last one names nothing here.
        let stale = try await plugind("call", sqlite, "sqlite3_errmsg", "sqlite3#1", in: test)
        #expect(stale.status == 1)
        #expect(stale.stderr.contains("sqlite3_errmsg") && stale.stderr.contains("never gave out"), "\(stale.stderr)")
        let wrongKind = try await plugind("call", sqlite, "sqlite3_errmsg", "sqlite3_stmt#1", in: test)
        #expect(wrongKind.status == 64)
        #expect(wrongKind.stderr.contains("argument 1 of sqlite3_errmsg"), "\(wrongKind.stderr)")
        let null = try await plugind("call", sqlite, "sqlite3_errmsg", "sqlite3#null", in: test)
        #expect(null.status == 64)
        #expect(null.stderr.contains("NULL"), "\(null.stderr)")
    }

    @Test("verify refuses a handle of a kind not declared and a release function of the wrong shape")
    func verifyRefuses() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let cases = [
            (
                #""handles": {"sqlite3": {"release": "sqlite3_close_v2"}}, "functions": [{"name": "sqlite3_close_v2", "returns": "int32", "arguments": [{"name": "db", "type": "handle", "kind": "sqlite3"}]}, {"name": "sqlite3_step", "returns": "int32", "arguments": [{"name": "stmt", "type": "handle", "kind": "sqlite3_stmt"}]}]"#,
                "key 'functions[1].arguments[0].kind' names handle kind 'sqlite3_stmt' of sqlite3_step, which \"handles\" does not declare"
            ),
            (
                #""handles": {"sqlite3": {"release": "sqlite3_close_v2"}}, "functions": [{"name": "sqlite3_close_v2", "returns": "int32", "arguments": [{"name": "db", "type": "handle", "kind": "sqlite3"}, "int32"]}]"#,
                "key 'handles.sqlite3.release' names sqlite3_close_v2, which takes 2 values from the caller"
            ),
        ]
        for (index, (declarations, message)) in cases.enumerated() {
            let bundle = test.externalRoot + "/bad\(index).appex"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
            let manifest = """
                {"manifestVersion": 1, "identifier": "org.plugind.tests.bad\(index)", "name": "Bad", "version": "1",
                 "extensionPoint": "org.plugind.tests.functions", "library": "libsqlite3.so.0", \(declarations)}
                """
            try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
            let verified = try await plugind("verify", bundle, in: test)
            #expect(verified.status != 0)
            #expect(verified.stdout.contains(message), "\(verified.stdout)")
        }
    }
}
