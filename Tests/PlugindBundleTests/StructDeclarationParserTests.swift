import Foundation
import PlugindBundle
import PlugindWire
import TestSupport
import Testing

/// The `structs` key, struct arguments and handles of a struct kind: the zlib example, and every
/// inconsistency the parser refuses, each naming the key.
@Suite("Manifest struct declarations", .tags(.unit))
struct StructDeclarationParserTests {
    static func parse(_ manifest: String) throws(ManifestError) -> ManifestParser.Result {
        let document = """
            {"manifestVersion": 1, "identifier": "com.example.structs", "name": "Structs", "version": "1",
             "extensionPoint": "com.example.app.functions", "library": "libz.so.1", \(manifest)}
            """
        return try ManifestParser.parse(Data(document.utf8), file: "/b/manifest.json")
    }

    static let structs =
        #""structs": {"s": {"size": 16, "alignment": 8, "fields": [{"name": "p", "offset": 0, "type": "buffer", "direction": "out", "count": "n"}, {"name": "n", "offset": 8, "type": "uint32"}, {"name": "m", "offset": 12, "type": "int32"}]}}"#

    @Test("the zlib example parses: a struct, two kinds of it, streams made, used and released")
    func zlibExample() throws {
        let result = try ManifestParser.parse(contentsOf: BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json")
        #expect(result.warnings.isEmpty)
        let functions = result.manifest.functions
        func function(_ name: String) throws -> FunctionSignature { try #require(functions.first { $0.name == name }) }
        #expect(
            try function("deflateInit_").description
                == "deflateInit_(out deflate_stream (struct z_stream) *strm, int32 level, string version, int32 stream_size) -> int32")
        #expect(try function("deflateInit_").outputs.map(\.name) == ["strm"])
        #expect(try function("inflate").arguments == [.handle, .bytes, .uint32, .int32])
        #expect(
            try function("inflate").outputs.map(\.name) == [
                "strm.avail_in", "strm.next_out", "strm.avail_out", "strm.total_in", "strm.total_out", "strm.msg",
            ])
        #expect(try function("deflateEnd").releases == "deflate_stream")
        #expect(try function("inflateEnd").releases == "inflate_stream")
        let layout = try #require(try function("deflate").parameters[0].fields?.layout)
        #expect(layout.size == 112)
        #expect(layout.field(named: "avail_out")?.offset == 32)
    }

    @Test(
        "inconsistent struct declarations are refused naming the key",
        arguments: [
            (
                #""structs": {"s": {"size": 16, "alignment": 8, "fields": [{"name": "a", "offset": 0, "type": "int64"}, {"name": "b", "offset": 4, "type": "int32"}]}}"#,
                "/b/manifest.json: key 'structs.s' is refused: field 'a' of struct s overlaps field 'b'"
            ),
            (
                #""structs": {"s": {"size": 16, "fields": []}}"#,
                "/b/manifest.json: key 'structs.s.alignment' is missing (_Alignof(s): 1, 2, 4, 8 or 16)"
            ),
            (
                #""structs": {"s": {"size": 8, "alignment": 8, "fields": [{"name": "a", "offset": 0, "type": "pointer"}]}}"#,
                "/b/manifest.json: key 'structs.s.fields[0].type' must be a scalar type (bool, int8 … uint64, float or double), string or buffer, found 'pointer'"
            ),
            (
                structs
                    + #", "handles": {"h": {"struct": "t", "release": "f"}}, "functions": [{"name": "f", "arguments": [{"name": "x", "type": "handle", "kind": "h"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'handles.h.struct' names struct 't', which \"structs\" does not declare"
            ),
            (
                structs + #", "functions": [{"name": "f", "arguments": [{"type": "struct", "struct": "s"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].name' is missing (a struct argument needs a name: its fields are named by it)"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "struct", "struct": "u"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].struct' names struct 'u', which \"structs\" does not declare"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "struct", "struct": "s", "set": ["p"]}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].set' is refused: an argument of f sets out buffer 'p' but not its count 'n', the room to bind for it"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "struct", "struct": "s", "set": ["p", "n"], "get": ["p"]}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].get' is refused: an argument of f gets out buffer 'p' but not its count 'n', by which the host checks its length"
            ),
            (
                structs
                    + #", "handles": {"h": {"release": "f"}}, "functions": [{"name": "f", "arguments": [{"name": "x", "type": "handle", "kind": "h", "get": ["m"]}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].get' does not apply: handle kind h is not a struct (\"handles\" gives it no \"struct\")"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "int32", "set": ["m"]}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].set' does not apply: only a struct argument or a struct handle has fields"
            ),
            (
                structs
                    + #", "handles": {"h": {"struct": "s", "release": "f"}}, "functions": [{"name": "f", "arguments": [{"name": "x", "type": "handle", "kind": "h"}], "returns": "void"}, {"name": "g", "arguments": [], "returns": {"type": "handle", "kind": "h"}}]"#,
                "/b/manifest.json: key 'functions' is refused: g returns a handle of kind h, a struct the worker makes; a function gets one as an out argument"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "struct", "struct": "s", "by": "reference"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].by' must be pointer (struct s *) or value (struct s), found 'reference'"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "int32", "by": "value"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0].by' does not apply: only a struct argument names a struct"
            ),
            (
                structs
                    + #", "functions": [{"name": "f", "arguments": [{"name": "x", "type": "struct", "struct": "s", "by": "value"}], "returns": "void"}]"#,
                "/b/manifest.json: key 'functions[0].arguments[0]' is refused: 'x' of f is a struct s passed by value that holds buffer field 'p'; a struct passed or returned by value holds scalars and strings"
            ),
            (
                structs + #", "functions": [{"name": "f", "arguments": [], "returns": {"type": "struct", "struct": "u", "get": []}}]"#,
                "/b/manifest.json: key 'functions[0].returns.struct' names struct 'u', which \"structs\" does not declare"
            ),
            (
                structs + #", "functions": [{"name": "f", "arguments": [], "returns": "struct"}]"#,
                #"/b/manifest.json: key 'functions[0].returns' is a struct of no layout (write {"type": "struct", "struct": …, "get": […]})"#
            ),
            (
                structs + #", "functions": [{"name": "f", "arguments": [], "returns": {"type": "int32", "get": ["n"]}}]"#,
                "/b/manifest.json: key 'functions[0].returns.get' does not apply: int32 is not a struct"
            ),
        ])
    func refusals(manifest: String, expected: String) {
        let error = #expect(throws: ManifestError.self) { try Self.parse(manifest) }
        #expect(error?.description == expected)
    }
}
