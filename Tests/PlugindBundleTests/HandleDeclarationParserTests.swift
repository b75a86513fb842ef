import Foundation
import PlugindBundle
import PlugindWire
import TestSupport
import Testing

/// The `handles` key and handle arguments and returns: the SQLite example, and every
/// inconsistency the parser refuses, each naming the key, the function and the argument.
@Suite("Manifest handle declarations", .tags(.unit))
struct HandleDeclarationParserTests {
    /// `db` released by `close_db`, `stmt` by `finalize`, unless `handles` says otherwise.
    static func parse(_ manifest: String) throws(ManifestError) -> ManifestParser.Result {
        let document = """
            {"manifestVersion": 1, "identifier": "com.example.handles", "name": "Handles", "version": "1",
             "extensionPoint": "com.example.app.functions", "library": "libsqlite3.so.0", \(manifest)}
            """
        return try ManifestParser.parse(Data(document.utf8), file: "/b/manifest.json")
    }

    static let handles = #""handles": {"db": {"release": "close_db"}, "stmt": {"release": "finalize"}}"#
    static let closeDB = #"{"name": "close_db", "arguments": [{"name": "d", "type": "handle", "kind": "db"}], "returns": "int32"}"#
    static let finalize = #"{"name": "finalize", "arguments": [{"name": "s", "type": "handle", "kind": "stmt"}], "returns": "int32"}"#

    /// A manifest with the usual handles, their release functions and `function`.
    static func withFunction(_ function: String) -> String {
        "\(handles), \"functions\": [\(closeDB), \(finalize), \(function)]"
    }

    @Test("the SQLite example parses: kinds, release functions, out handles, a returned handle")
    func sqliteExample() throws {
        let result = try ManifestParser.parse(contentsOf: BuiltProducts.packageRoot + "/ExamplePlugins/Sqlite/manifest.json")
        #expect(result.warnings.isEmpty)
        let functions = result.manifest.functions
        func function(_ name: String) throws -> FunctionSignature { try #require(functions.first { $0.name == name }) }
        #expect(try function("sqlite3_open").description == "sqlite3_open(string filename, out sqlite3 **ppDb) -> int32")
        #expect(try function("sqlite3_open").outputs.map(\.kind) == ["sqlite3"])
        #expect(
            try function("sqlite3_prepare_v2").description
                == "sqlite3_prepare_v2(sqlite3 *db, string zSql, int32 nByte, out sqlite3_stmt **ppStmt, NULL) -> int32")
        #expect(try function("sqlite3_prepare_v2").arguments == [.handle, .string, .int32])
        #expect(try function("sqlite3_db_handle").returns == .handle)
        #expect(try function("sqlite3_db_handle").returnKind == "sqlite3")
        #expect(try function("sqlite3_close_v2").releases == "sqlite3")
        #expect(try function("sqlite3_finalize").releases == "sqlite3_stmt")
        #expect(try function("sqlite3_step").releases == nil)
        #expect(
            FunctionSignature.handleKinds(of: functions).mapValues(\.name) == [
                "sqlite3": "sqlite3_close_v2", "sqlite3_stmt": "sqlite3_finalize",
            ])
        try FunctionSignature.validateHandles(of: functions)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var what: String
        var manifest: String
        var key: String
        var words: [String]
        var testDescription: String { what }
    }

    static let refusals: [Refusal] = [
        Refusal(
            what: "an argument of a kind not declared",
            manifest: withFunction(#"{"name": "f", "arguments": [{"name": "c", "type": "handle", "kind": "cursor"}], "returns": "void"}"#),
            key: "functions[2].arguments[0].kind", words: ["'cursor'", "of f", "does not declare", "db, stmt"]),
        Refusal(
            what: "a return of a kind not declared",
            manifest: withFunction(#"{"name": "f", "arguments": [], "returns": {"type": "handle", "kind": "cursor"}}"#),
            key: "functions[2].returns.kind", words: ["'cursor'", "of f"]),
        Refusal(
            what: "a handle argument without a kind",
            manifest: withFunction(#"{"name": "f", "arguments": [{"name": "c", "type": "handle"}], "returns": "void"}"#),
            key: "functions[2].arguments[0].kind", words: ["is missing", "f"]),
        Refusal(
            what: "handle as a bare type name", manifest: withFunction(#"{"name": "f", "arguments": ["handle"], "returns": "void"}"#),
            key: "functions[2].arguments[0]", words: ["no kind"]),
        Refusal(
            what: "handle as a bare return type", manifest: withFunction(#"{"name": "f", "arguments": [], "returns": "handle"}"#),
            key: "functions[2].returns", words: ["no kind"]),
        Refusal(
            what: "an inout handle",
            manifest: withFunction(
                #"{"name": "f", "arguments": [{"name": "c", "type": "handle", "kind": "db", "direction": "inout"}], "returns": "void"}"#),
            key: "functions[2].arguments[0].direction", words: ["in or out"]),
        Refusal(
            what: "an out handle without a name",
            manifest: withFunction(
                #"{"name": "f", "arguments": [{"type": "handle", "kind": "db", "direction": "out"}], "returns": "void"}"#),
            key: "functions[2].arguments[0].name", words: ["out handle"]),
        Refusal(
            what: "a kind on an integer",
            manifest: withFunction(#"{"name": "f", "arguments": [{"name": "n", "type": "int32", "kind": "db"}], "returns": "void"}"#),
            key: "functions[2].arguments[0].kind", words: ["does not apply"]),
        Refusal(
            what: "a kind on an integer return",
            manifest: withFunction(#"{"name": "f", "arguments": [], "returns": {"type": "int32", "kind": "db"}}"#),
            key: "functions[2].returns.kind", words: ["does not apply"]),
        Refusal(
            what: "a release function not declared",
            manifest: #""handles": {"db": {"release": "close_db"}}, "functions": [{"name": "f", "arguments": [], "returns": "void"}]"#,
            key: "handles.db.release", words: ["close_db", "does not declare"]),
        Refusal(
            what: "handles without functions", manifest: #""handles": {"db": {"release": "close_db"}}"#,
            key: "handles.db.release", words: ["close_db", "no functions"]),
        Refusal(
            what: "a release function taking two values",
            manifest:
                #""handles": {"db": {"release": "close_db"}}, "functions": [{"name": "close_db", "arguments": [{"name": "d", "type": "handle", "kind": "db"}, "int32"], "returns": "int32"}]"#,
            key: "handles.db.release", words: ["close_db", "takes 2 values", "exactly one value"]),
        Refusal(
            what: "a release function taking a handle of another kind",
            manifest:
                #""handles": {"db": {"release": "close_db"}, "stmt": {"release": "finalize"}}, "functions": [{"name": "close_db", "arguments": [{"name": "s", "type": "handle", "kind": "stmt"}], "returns": "int32"}, \#(finalize)]"#,
            key: "handles.db.release", words: ["close_db", "argument 1 ('s')", "a stmt handle"]),
        Refusal(
            what: "a release function taking an integer",
            manifest:
                #""handles": {"db": {"release": "close_db"}}, "functions": [{"name": "close_db", "arguments": ["int64"], "returns": "int32"}]"#,
            key: "handles.db.release", words: ["close_db", "int64 as argument 1"]),
        Refusal(
            what: "a release function writing the handle out",
            manifest:
                #""handles": {"db": {"release": "close_db"}}, "functions": [{"name": "close_db", "arguments": [{"name": "d", "type": "handle", "kind": "db", "direction": "out"}], "returns": "int32"}]"#,
            key: "handles.db.release", words: ["close_db", "takes 0 values"]),
        Refusal(
            what: "one function releasing two kinds",
            manifest: #""handles": {"a": {"release": "close_db"}, "b": {"release": "close_db"}}, "functions": [\#(closeDB)]"#,
            key: "handles.b.release", words: ["close_db", "already releases handle kind a"]),
        Refusal(
            what: "a kind that is not a C identifier",
            manifest: #""handles": {"my-db": {"release": "close_db"}}, "functions": [\#(closeDB)]"#,
            key: "handles.my-db", words: ["C identifier"]),
        Refusal(
            what: "a kind without a release function", manifest: #""handles": {"db": {}}, "functions": [\#(closeDB)]"#,
            key: "handles.db.release", words: ["is missing"]),
        Refusal(
            what: "a kind declared as a string", manifest: #""handles": {"db": "close_db"}, "functions": [\#(closeDB)]"#,
            key: "handles.db", words: ["object"]),
        Refusal(
            what: "handles as an array", manifest: #""handles": ["db"], "functions": [\#(closeDB)]"#,
            key: "handles", words: ["object"]),
    ]

    @Test("inconsistent handle declarations are refused with the key, the function and the argument", arguments: refusals)
    func refused(_ refusal: Refusal) {
        do {
            _ = try Self.parse(refusal.manifest)
            Issue.record("accepted: \(refusal.manifest)")
        } catch {
            #expect(error.key == refusal.key, "\(error)")
            for word in refusal.words {
                #expect(error.problem.contains(word), "'\(word)' is not in: \(error.problem)")
            }
        }
    }

    @Test("unknown keys of a kind or a return object are warnings; an unused kind is fine")
    func warnings() throws {
        let result = try Self.parse(
            #""handles": {"db": {"release": "close_db", "colour": "red"}, "stmt": {"release": "finalize"}}, "functions": [\#(Self.closeDB), \#(Self.finalize), {"name": "f", "arguments": [], "returns": {"type": "handle", "kind": "db", "owned": true}}]"#
        )
        #expect(result.warnings.map(\.key) == ["handles.db.colour", "functions[2].returns.owned"])
        #expect(result.manifest.functions[2].returnKind == "db")
    }
}
