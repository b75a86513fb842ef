import Foundation
import PlugindBundle
import PlugindTypes
import TestSupport
import Testing

@testable import plugind

/// `plugind declare`: declarations drafted from a C header through libclang. The header of each
/// test is the test's own, so that what libclang reads can be checked against what it says.
@Suite("plugind declare drafts declarations from a C header", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct DeclareCommandTests {
    /// A header with one function of each shape the vocabulary can and cannot express.
    static let header = """
        #include <stdbool.h>
        #include <stddef.h>
        #include <stdint.h>
        typedef struct database database;
        typedef struct cursor cursor;
        typedef struct { int width; int height; } size2d;
        typedef enum { red, green } colour;
        typedef unsigned long length_t;
        int8_t scalars(int8_t a, uint8_t b, int16_t c, uint16_t d, int32_t e, uint32_t f, int64_t g, uint64_t h,
                       float i, double j, bool k, size_t l, colour m, length_t n);
        const char *describe(const char *text);
        int database_open(const char *path, database **out);
        int database_close(database *db);
        cursor *database_query(database *db, const char *sql);
        void cursor_free(cursor *c);
        int encode(unsigned char *dest, size_t *destLength, const void *source, size_t sourceLength);
        double split(double x, int *exponent);
        int sum(const int32_t *values, uint32_t count);
        int logf_(const char *format, ...);
        void sort(void *base, size_t count, int (*compare)(const void *, const void *));
        void walk(void *(*visit)(void *item));
        void each(void (*visit)(void *context, const char *name, char **values, int count, double weight), void *context);
        int area(size2d size);
        static inline int twice(int x) { return 2 * x; }
        int fill(size2d *size);
        """

    static func writeHeader(_ text: String = header) throws -> (directory: TemporaryDirectory, path: String) {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/library.h"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return (directory, path)
    }

    static func draft() throws -> DeclarationDraft {
        let (directory, path) = try writeHeader()
        defer { directory.remove() }
        return try DeclarationDraft(HeaderReader.functions(in: path, arguments: [], mainFileOnly: true))
    }

    static func function(_ name: String, in draft: DeclarationDraft) -> DeclarationDraft.Drafted? {
        draft.functions.first { $0.name == name }
    }

    @Test("scalars map to the manifest's names by their C size, as the compiler lays them out")
    func scalars() throws {
        let draft = try Self.draft()
        let scalars = try #require(Self.function("scalars", in: draft))
        let types = scalars.declaration["arguments"].map { arguments -> [String] in
            guard case .array(let elements) = arguments else { return [] }
            return elements.compactMap { if case .string(let type)? = $0["type"] { type } else { nil } }
        }
        #expect(
            types == [
                "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float", "double", "bool", "uint64",
                "int32", "uint64",
            ])
        #expect(scalars.declaration["returns"] == .string("int8"))
        #expect(scalars.toComplete.isEmpty)
    }

    @Test("opaque structs become handles: passed, written through a pointer, returned; release candidates named")
    func handles() throws {
        let draft = try Self.draft()
        let open = try #require(Self.function("database_open", in: draft))
        #expect(
            open.declaration.rendered().contains(
                #""name": "out",\#n            "type": "handle",\#n            "kind": "database",\#n            "direction": "out""#))
        #expect(open.toComplete.isEmpty)
        let query = try #require(Self.function("database_query", in: draft))
        #expect(query.declaration["returns"] == .object([("type", .string("handle")), ("kind", .string("cursor"))]))
        // fill(size2d *) is no handle: the header completes size2d (see completeStructs).
        #expect(
            draft.handles == [
                DeclarationDraft.HandleKind(kind: "database", releaseCandidates: ["database_close"]),
                DeclarationDraft.HandleKind(kind: "cursor", releaseCandidates: ["cursor_free"]),
            ])
        #expect(draft.fragment.rendered().contains(#""release": "TODO: the function that releases a database (database_close?)""#))
    }

    @Test("a pointer to a struct the header completes drafts its layout, and leaves struct or handle to choose")
    func completeStructs() throws {
        let draft = try Self.draft()
        let fill = try #require(Self.function("fill", in: draft))
        #expect(fill.toComplete.map(\.field) == ["type"])
        guard case .array(let arguments)? = fill.declaration["arguments"], let size = arguments.first else { throw DraftShapeError() }
        #expect(size["type"].map { $0.containsTodo } == true)
        #expect(size["struct"] == .string("size2d"))
        #expect(size["set"] == .array([]) && size["get"] == .array([]))
        // An anonymous struct is named by its typedef.
        #expect(
            draft.structs.map(\.name) == ["size2d"] && draft.structs.first?.toComplete.isEmpty == true
                && draft.structs.first?.leftOut.isEmpty == true)
        #expect(
            draft.fragment["structs"]?["size2d"]
                == .object([
                    ("size", .integer(8)), ("alignment", .integer(4)),
                    (
                        "fields",
                        .array([
                            .object([("name", .string("width")), ("offset", .integer(0)), ("type", .string("int32"))]),
                            .object([("name", .string("height")), ("offset", .integer(4)), ("type", .string("int32"))]),
                        ])
                    ),
                ]))
    }

    /// A struct with a field of each shape a manifest can and cannot declare.
    static let structHeader = """
        #include <stddef.h>
        #include <stdint.h>
        typedef enum { red, green } colour;
        typedef struct point { double x, y; } point;
        struct shape {
            const char *label;
            char *note;
            unsigned char *pixels;
            size_t pixel_count;
            const float *weights;
            uint32_t weight_count;
            unsigned visible : 1;
            point origin;
            union { int i; float f; } value;
            char tag[8];
            char **names;
            void (*draw)(struct shape *);
            struct shape *next;
            struct hidden *library_state;
            long double scale;
            _Bool closed;
            colour tint;
        };
        int shape_draw(struct shape *shape);
        typedef struct _widget __widget;
        typedef struct _widget widget;
        struct _widget { int id; };
        int widget_id(__widget *w);
        """

    @Test("struct fields: scalars, strings and buffers drafted at their offsets; the rest left out, each with its reason")
    func structFields() throws {
        let (directory, path) = try Self.writeHeader(Self.structHeader)
        defer { directory.remove() }
        let draft = try DeclarationDraft(HeaderReader.functions(in: path, arguments: [], mainFileOnly: true))
        // Named by the tag without a typedef; by the first typedef without a leading underscore.
        #expect(draft.structs.map(\.name) == ["shape", "widget"])
        let shape = try #require(draft.structs.first { $0.name == "shape" })
        guard case .array(let fields)? = shape.declaration["fields"] else { throw DraftShapeError() }
        let shapes = fields.map { field -> String in
            guard case .string(let name)? = field["name"], case .integer(let offset)? = field["offset"],
                case .string(let type)? = field["type"]
            else { return "?" }
            return "\(name)@\(offset):\(type)"
        }
        #expect(
            shapes == [
                "label@0:string", "note@8:string", "pixels@16:buffer", "pixel_count@24:uint64", "weights@32:buffer",
                "weight_count@40:uint32", "closed@128:bool", "tint@132:int32",
            ])
        // Each buffer's count is the next integer field; a pointer to const is the caller's (in).
        #expect(fields[2]["count"] == .string("TODO: the integer field that counts it (pixel_count?)"))
        #expect(fields[2]["direction"]?.containsTodo == true)
        #expect(fields[4]["direction"] == .string("in") && fields[4]["element"] == .string("float"))
        #expect(fields[4]["count"] == .string("TODO: the integer field that counts it (weight_count?)"))
        #expect(
            shape.toComplete.map(\.field) == [
                "pixels.direction", "pixels.count", "pixels.advances", "weights.count", "weights.advances",
            ])
        let reasons = Dictionary(uniqueKeysWithValues: shape.leftOut.map { ($0.name, $0.reason) })
        #expect(reasons["shape.visible"]?.contains("bit-field") == true)
        #expect(reasons["shape.origin"]?.contains("nested struct (point)") == true)
        #expect(reasons["shape.value"]?.contains("nested union") == true)
        #expect(reasons["shape.tag"]?.contains("array (char[8])") == true)
        #expect(reasons["shape.names"]?.contains("pointer to a pointer (char **)") == true)
        #expect(reasons["shape.draw"]?.contains("function pointer") == true)
        #expect(reasons["shape.next"]?.contains("pointer to a struct (struct shape *)") == true)
        #expect(reasons["shape.library_state"]?.contains("opaque pointer") == true)
        #expect(reasons["shape.scale"]?.contains("long double") == true)
        #expect(reasons.count == 9, "\(reasons.keys.sorted())")
        // Left-out fields are reported with the functions that cannot be declared.
        #expect(draft.notDeclarable.map(\.name) == shape.leftOut.map(\.name))
    }

    struct DraftShapeError: Error {}

    /// Foundation values of a draft, to complete as an author would.
    static func object(_ json: DraftJSON) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(json)) as? [String: Any])
    }

    /// A function-only manifest around `fragment`'s keys, as `plugind verify` reads it.
    static func manifest(_ fragment: [String: Any]) throws -> Data {
        var manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.declared", "name": "Declared", "version": "1.0.0",
            "extensionPoint": "org.plugind.functions", "library": "libz.so.1",
        ]
        manifest.merge(fragment) { _, new in new }
        return try JSONSerialization.data(withJSONObject: manifest)
    }

    @Test("zlib's deflate: z_stream drafted as the compiler lays it out; completed as handles, it is ExamplePlugins/Zlib's")
    func zlibStream() throws {
        let header = try HeaderReader.functions(in: "/usr/include/zlib.h", arguments: [], mainFileOnly: false)
        let draft = try DeclarationDraft(header, selected: ["deflateInit_", "deflate", "deflateEnd"])
        let stream = try #require(draft.structs.first)
        #expect(draft.structs.count == 1 && stream.name == "z_stream", "named by its typedef, not its tag z_stream_s")
        #expect(stream.declaration["size"] == .integer(112) && stream.declaration["alignment"] == .integer(8))
        guard case .array(let fields)? = stream.declaration["fields"] else { throw DraftShapeError() }
        func field(_ name: String) -> DraftJSON? { fields.first { $0["name"] == .string(name) } }
        #expect(field("next_in")?["offset"] == .integer(0) && field("next_in")?["type"] == .string("buffer"))
        #expect(field("next_in")?["count"] == .string("TODO: the integer field that counts it (avail_in?)"))
        #expect(field("avail_in")?["offset"] == .integer(8) && field("avail_in")?["type"] == .string("uint32"))
        #expect(field("total_in")?["offset"] == .integer(16) && field("total_in")?["type"] == .string("uint64"))
        #expect(field("next_out")?["offset"] == .integer(24) && field("next_out")?["type"] == .string("buffer"))
        #expect(field("next_out")?["count"] == .string("TODO: the integer field that counts it (avail_out?)"))
        #expect(field("avail_out")?["offset"] == .integer(32) && field("avail_out")?["type"] == .string("uint32"))
        #expect(field("msg")?["offset"] == .integer(48) && field("msg")?["type"] == .string("string"))
        // The pointers the library keeps for itself are never the host's to write.
        #expect(
            stream.leftOut.map(\.name) == ["z_stream.state", "z_stream.zalloc", "z_stream.zfree"],
            "\(stream.leftOut)")
        #expect(stream.leftOut.first?.reason.contains("opaque pointer") == true)
        #expect(stream.leftOut.dropFirst().allSatisfy { $0.reason.contains("function pointer") })
        #expect(draft.handles.isEmpty, "a complete struct proposes no handle kind of its own")
        let deflate = try #require(Self.function("deflate", in: draft))
        #expect(deflate.toComplete.map(\.field) == ["type"])
        #expect(deflate.declaration.rendered().contains("a release function, deflateEnd or inflateEnd or inflateBackEnd?)"))

        // Refused as drafted, and while the argument alone is left to complete.
        var fragment = try Self.object(draft.fragment)
        #expect(throws: ManifestError.self) { try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json") }
        var structs = try #require(fragment["structs"] as? [String: Any])
        var layout = try #require(structs["z_stream"] as? [String: Any])
        layout["fields"] = try #require(layout["fields"] as? [[String: Any]]).compactMap { field -> [String: Any]? in
            var field = field
            switch field["name"] as? String {
            case "opaque", "reserved": return nil  // fields the host does not need, deleted as an author would
            case "next_in": field.merge(["direction": "in", "count": "avail_in", "advances": true]) { _, new in new }
            case "next_out": field.merge(["direction": "out", "count": "avail_out", "advances": true]) { _, new in new }
            default: break
            }
            return field
        }
        structs["z_stream"] = layout
        fragment["structs"] = structs
        #expect(throws: ManifestError.self) { try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json") }

        // Completed as a handle kind that is the struct, kept between calls.
        fragment["handles"] = ["deflate_stream": ["struct": "z_stream", "release": "deflateEnd"]]
        fragment["functions"] = try #require(fragment["functions"] as? [[String: Any]]).map { function -> [String: Any] in
            var function = function
            var arguments = function["arguments"] as? [Any] ?? []
            var stream: [String: Any] = ["name": "strm", "type": "handle", "kind": "deflate_stream"]
            switch function["name"] as? String {
            case "deflateInit_": stream["direction"] = "out"
            case "deflate":
                stream["set"] = ["next_in", "next_out", "avail_out"]
                stream["get"] = ["avail_in", "next_out", "avail_out", "total_in", "total_out", "msg"]
            default: break
            }
            arguments[0] = stream
            function["arguments"] = arguments
            return function
        }
        let parsed = try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json").manifest
        let example = try ManifestParser.parse(contentsOf: BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json").manifest
        // The draft is in the header's order, where deflateInit_ follows the functions its macro serves.
        let expected = example.functions.filter { ["deflateInit_", "deflate", "deflateEnd"].contains($0.name) }
        #expect(parsed.functions.sorted { $0.name < $1.name } == expected.sorted { $0.name < $1.name })
    }

    @Test("libc's div and lldiv: div_t and lldiv_t drafted whole, returned by value; the draft verifies with nothing to complete")
    func structsByValue() throws {
        let header = try HeaderReader.functions(in: "/usr/include/stdlib.h", arguments: [], mainFileOnly: false)
        let draft = try DeclarationDraft(header, selected: ["div", "lldiv"])
        #expect(draft.structs.map(\.name).sorted() == ["div_t", "lldiv_t"])
        #expect(draft.functions.allSatisfy { $0.toComplete.isEmpty })
        let parsed = try ManifestParser.parse(Self.manifest(try Self.object(draft.fragment)), file: "manifest.json").manifest
        let described = parsed.functions.map(\.description).sorted()
        #expect(
            described == [
                "div(int32 numer, int32 denom) -> struct div_t {get quot, rem}",
                "lldiv(int64 numer, int64 denom) -> struct lldiv_t {get quot, rem}",
            ])
        let area = try #require(Self.function("area", in: try Self.draft()))
        #expect(area.declaration.rendered().contains(#""by": "value""#))
        #expect(area.declaration.rendered().contains(#""set": ["width", "height"]"#))
    }

    @Test("struct tm for timegm: drafted as glibc lays it out; completed as a struct made for the call, it verifies")
    func timeStruct() throws {
        let header = try HeaderReader.functions(in: "/usr/include/time.h", arguments: [], mainFileOnly: false)
        let draft = try DeclarationDraft(header, selected: ["timegm"])
        let tm = try #require(draft.structs.first)
        #expect(draft.structs.count == 1 && tm.name == "tm" && tm.toComplete.isEmpty && tm.leftOut.isEmpty)
        let drafted = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(tm.declaration)) as? NSDictionary)
        #expect(drafted == GlibcStructLayouts.tm as NSDictionary, "\(drafted)")

        var fragment = try Self.object(draft.fragment)
        #expect(throws: ManifestError.self) { try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json") }
        var function = try #require((fragment["functions"] as? [[String: Any]])?.first)
        var argument = try #require((function["arguments"] as? [[String: Any]])?.first)
        argument["type"] = "struct"
        argument["set"] = ["tm_year", "tm_mon", "tm_mday"]
        argument["get"] = ["tm_wday", "tm_yday", "tm_zone"]
        function["arguments"] = [argument]
        fragment["functions"] = [function]
        let parsed = try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json").manifest
        let timegm = try #require(parsed.functions.first)
        #expect(timegm.parameters.first?.fields?.layout.fields.count == 11)
        #expect(timegm.parameters.first?.fields?.gets == ["tm_wday", "tm_yday", "tm_zone"])
    }

    @Test("what C cannot say is left to complete, with the next argument suggested as a count")
    func toComplete() throws {
        let draft = try Self.draft()
        let encode = try #require(Self.function("encode", in: draft))
        let fields = encode.toComplete.map { "\($0.argument ?? "").\($0.field)" }
        #expect(fields == ["dest.direction", "dest.count", "destLength.direction", "source.count"])
        #expect(encode.declaration.rendered().contains("\"count\": \"TODO: what counts it (*destLength?)\""))
        #expect(encode.declaration.rendered().contains("\"count\": \"TODO: what counts it (sourceLength?)\""))
        let split = try #require(Self.function("split", in: draft))
        #expect(split.toComplete.map(\.field) == ["direction"])
        let sum = try #require(Self.function("sum", in: draft))
        #expect(sum.declaration.rendered().contains("\"element\": \"int32\""))
        #expect(Self.function("describe", in: draft)?.toComplete.isEmpty == true)
    }

    @Test("a function the vocabulary cannot express is listed with its reason, never dropped")
    func notDeclarable() throws {
        let draft = try Self.draft()
        let reasons = Dictionary(uniqueKeysWithValues: draft.notDeclarable.map { ($0.name, $0.reason) })
        #expect(reasons["logf_"]?.contains("variadic") == true)
        #expect(reasons["sort"] == nil, "a callback is drafted")
        #expect(reasons["walk"]?.contains("visit is a callback returning a void *") == true, "\(reasons)")
        #expect(reasons["area"] == nil, "a struct passed by value is drafted")
        #expect(reasons["twice"]?.contains("static or inline") == true)
        let declared = Set(draft.functions.map(\.name)).union(reasons.keys)
        #expect(declared.count == 16, "every function of the header is either drafted or refused: \(declared.sorted())")
    }

    @Test("a callback's arguments drafted by their C types: scalars, text, strings and buffers to count, a context to leave out")
    func callbackArguments() throws {
        let draft = try Self.draft()
        let each = try #require(Self.function("each", in: draft))
        guard case .array(let arguments)? = each.declaration["arguments"], case .array(let visit)? = arguments.first?["arguments"] else {
            throw DraftShapeError()
        }
        #expect(arguments.first?["type"] == .string("callback") && arguments.first?["returns"] == .string("void"))
        #expect(visit.count == 5)
        #expect(visit[0]["type"] == .string("buffer") && visit[0]["count"] == .string("TODO: what counts it"))
        #expect(visit[1]["type"] == .string("string"))
        #expect(visit[2]["type"] == .string("strings") && visit[2]["count"] == .string("TODO: what counts them"), "no integer before it")
        #expect(visit[3]["type"] == .string("int32") && visit[4]["type"] == .string("double"))
        #expect(
            each.toComplete.map { "\($0.argument ?? "").\($0.field)" } == [
                "visit.arg1.count", "visit.arg3.count", "context.direction", "context.count",
            ])
    }

    @Test("sqlite3_exec's row callback: its string arrays counted by the integer before them, as ExamplePlugins/Sqlite declares it")
    func rowCallback() throws {
        // sqlite3.h's declaration (libsqlite3-dev is not needed to run the suite).
        let (directory, path) = try Self.writeHeader(
            """
            typedef struct sqlite3 sqlite3;
            int sqlite3_exec(sqlite3 *, const char *sql, int (*callback)(void *, int, char **, char **), void *, char **errmsg);
            """)
        defer { directory.remove() }
        let draft = try DeclarationDraft(HeaderReader.functions(in: path, arguments: [], mainFileOnly: true))
        let exec = try #require(Self.function("sqlite3_exec", in: draft))
        guard case .array(let arguments)? = exec.declaration["arguments"], case .array(let row)? = arguments[2]["arguments"] else {
            throw DraftShapeError()
        }
        #expect(row.map { $0["type"] } == [.string("buffer"), .string("int32"), .string("strings"), .string("strings")])
        #expect(
            row[2]["count"] == .string("TODO: what counts them (arg2?)") && row[3]["count"] == .string("TODO: what counts them (arg2?)"))
        #expect(arguments[2]["returns"] == .string("int32"))
    }

    @Test("libc's qsort: the comparator drafted as a callback; completed, it is ExamplePlugins/Qsort's")
    func qsortCallback() throws {
        let header = try HeaderReader.functions(in: "/usr/include/stdlib.h", arguments: [], mainFileOnly: false)
        let draft = try DeclarationDraft(header, selected: ["qsort"])
        let qsort = try #require(Self.function("qsort", in: draft))
        #expect(
            qsort.toComplete.map { "\($0.argument ?? "").\($0.field)" } == [
                "base.direction", "base.count", "compar.arg1.count", "compar.arg2.count",
            ])
        var fragment = try Self.object(draft.fragment)
        #expect(throws: ManifestError.self) { try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json") }
        var function = try #require((fragment["functions"] as? [[String: Any]])?.first)
        var arguments = try #require(function["arguments"] as? [[String: Any]])
        #expect(arguments.map { $0["name"] as? String } == ["base", "nmemb", "size", "compar"])
        arguments[0].merge(["direction": "inout", "element": "int64", "count": "nmemb"]) { _, new in new }
        var comparator = try #require(arguments[3]["arguments"] as? [[String: Any]])
        comparator[0].merge(["name": "a", "count": "size"]) { _, new in new }
        comparator[1].merge(["name": "b", "count": "size"]) { _, new in new }
        arguments[3]["arguments"] = comparator
        function["arguments"] = arguments
        fragment["functions"] = [function]
        let parsed = try ManifestParser.parse(Self.manifest(fragment), file: "manifest.json").manifest
        let example = try ManifestParser.parse(contentsOf: BuiltProducts.packageRoot + "/ExamplePlugins/Qsort/manifest.json").manifest
        #expect(parsed.functions.first == example.functions.first { $0.name == "qsort" })
    }

    @Test("a completed draft is a declaration the manifest's reader accepts; a draft with TODOs is refused naming the argument")
    func completedDraftParses() throws {
        let draft = try Self.draft()
        let encode = try #require(Self.function("encode", in: draft)).declaration.rendered()
        let completed = encode.replacingOccurrences(of: "\"TODO: out or inout\"", with: "\"out\"", options: [], range: nil)
            .replacingOccurrences(of: "\"TODO: what counts it (*destLength?)\"", with: "\"*destLength\"")
            .replacingOccurrences(of: "\"TODO: what counts it (sourceLength?)\"", with: "\"sourceLength\"")
        // destLength is the capacity in and the length out: inout, which the first replacement made out.
        let inOut = completed.replacingOccurrences(
            of: "\"to\": \"uint64\",\n            \"direction\": \"out\"", with: "\"to\": \"uint64\",\n            \"direction\": \"inout\""
        )
        func manifest(_ function: String) -> Data {
            Data(
                """
                {"manifestVersion": 1, "identifier": "org.plugind.tests.declared", "name": "Declared", "version": "1.0.0",
                 "extensionPoint": "org.plugind.functions", "library": "libz.so.1", "functions": [\(function)]}
                """.utf8)
        }
        let parsed = try ManifestParser.parse(manifest(inOut), file: "manifest.json")
        #expect(
            parsed.manifest.functions.first?.description
                == "encode(out uint8 dest[*destLength], inout uint64 *destLength, in uint8 source[sourceLength], uint64 sourceLength) -> int32"
        )
        #expect(throws: ManifestError.self) { try ManifestParser.parse(manifest(encode), file: "manifest.json") }
    }

    @Test("the command prints the fragment, says what is left on standard error, and refuses what it cannot read")
    func command() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let (directory, path) = try Self.writeHeader()
        defer { directory.remove() }
        let drafted = try await plugind("declare", path, "--function", "encode", "--function", "database_open", in: test)
        #expect(drafted.status == 0, "\(drafted.stderr)")
        #expect(drafted.stdout.hasPrefix("{\n    \"functions\": ["))
        #expect(drafted.stderr.contains("Complete: database_open."))
        #expect(drafted.stderr.contains("encode dest.direction: out"))
        let unknown = try await plugind("declare", path, "--function", "missing", in: test)
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("does not declare 'missing'"))
        let broken = try Self.writeHeader("int broken(int x")
        defer { broken.directory.remove() }
        let refused = try await plugind("declare", broken.path, in: test)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("library.h:1:"))
        let written = try await plugind("declare", path, "--function", "split", "--output", directory.path + "/draft.json", in: test)
        #expect(written.status == 0, "\(written.stderr)")
        let again = try await plugind("declare", path, "--function", "split", "--output", directory.path + "/draft.json", in: test)
        #expect(again.status != 0, "an existing file is not replaced")
        let system = try await plugind("declare", "/usr/include/math.h", "--function", "frexp", in: test)
        #expect(system.status == 0, "functions of the headers a header includes are found by name: \(system.stderr)")
        #expect(system.stdout.contains("\"name\": \"exponent\""))
        let stream = try await plugind("declare", "/usr/include/zlib.h", "--function", "deflate", in: test)
        #expect(stream.status == 0, "\(stream.stderr)")
        #expect(stream.stdout.contains("\"structs\": {\n        \"z_stream\": {"))
        #expect(stream.stderr.contains("structs z_stream.next_in.direction: in"), "\(stream.stderr)")
        #expect(stream.stderr.contains("z_stream.zalloc: left out: a function pointer (alloc_func)"), "\(stream.stderr)")
        let json = try await plugind("declare", "/usr/include/zlib.h", "--function", "deflate", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        let leftOut = (document["notDeclarable"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(leftOut == ["z_stream.state", "z_stream.zalloc", "z_stream.zfree"])
        #expect((document["fragment"] as? [String: Any])?["structs"] is [String: Any])
    }
}
