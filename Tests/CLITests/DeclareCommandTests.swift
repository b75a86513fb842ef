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
        #expect(
            draft.handles == [
                DeclarationDraft.HandleKind(kind: "database", releaseCandidates: ["database_close"]),
                DeclarationDraft.HandleKind(kind: "cursor", releaseCandidates: ["cursor_free"]),
                // fill(size2d *): the header completes size2d, so its kind is left to confirm.
                DeclarationDraft.HandleKind(kind: "size2d", releaseCandidates: []),
            ])
        let fill = try #require(Self.function("fill", in: draft))
        #expect(fill.toComplete.map(\.field) == ["kind"])
        #expect(draft.fragment.rendered().contains(#""release": "TODO: the function that releases a database (database_close?)""#))
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
        #expect(reasons["sort"]?.contains("compare is a callback") == true)
        #expect(reasons["area"]?.contains("struct passed by value") == true)
        #expect(reasons["twice"]?.contains("static or inline") == true)
        let declared = Set(draft.functions.map(\.name)).union(reasons.keys)
        #expect(declared.count == 14, "every function of the header is either drafted or refused: \(declared.sorted())")
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
    }
}
