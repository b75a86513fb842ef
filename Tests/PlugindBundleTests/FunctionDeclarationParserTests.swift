import Foundation
import PlugindBundle
import PlugindWire
import TestSupport
import Testing

/// The `functions` key's argument objects: pointers, buffers and their counts, NULL, errno; and
/// the declarations the parser refuses, each naming the function and the argument.
@Suite("Manifest function declarations: pointers, buffers, NULL, errno", .tags(.unit))
struct FunctionDeclarationParserTests {
    static func manifest(_ functions: [[String: Any]]) -> [String: Any] {
        [
            "manifestVersion": 1, "identifier": "com.example.functions", "name": "Functions", "version": "1",
            "extensionPoint": "com.example.app.functions", "library": "libz.so.1", "functions": functions,
        ]
    }

    static func parse(_ functions: [[String: Any]]) throws(ManifestError) -> ManifestParser.Result {
        let data = (try? JSONSerialization.data(withJSONObject: manifest(functions))) ?? Data()
        return try ManifestParser.parse(data, file: "/b/manifest.json")
    }

    static func error(_ functions: [[String: Any]]) -> ManifestError? {
        do {
            _ = try parse(functions)
            return nil
        } catch {
            return error
        }
    }

    static func buffer(_ name: String, _ direction: String, _ count: Any) -> [String: Any] {
        ["name": name, "type": "buffer", "direction": direction, "count": count]
    }

    static func pointer(_ name: String, _ type: String, _ direction: String) -> [String: Any] {
        ["name": name, "type": "pointer", "to": type, "direction": direction]
    }

    @Test("the zlib example parses: compress's buffers counted by *destLen and sourceLen")
    func zlibExample() throws {
        let result = try ManifestParser.parse(contentsOf: BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json")
        #expect(result.warnings.isEmpty)
        let compress = try #require(result.manifest.functions.first { $0.name == "compress" })
        #expect(
            compress.description
                == "compress(out uint8 dest[*destLen], inout uint64 *destLen, in uint8 source[sourceLen], uint64 sourceLen) -> int32")
        #expect(compress.arguments == [.uint64, .bytes])
        let crc32 = try #require(result.manifest.functions.first { $0.name == "crc32" })
        #expect(crc32 == FunctionSignature(name: "crc32", arguments: [.uint64, .string, .uint32], returns: .uint64))
    }

    @Test("every kind parses: an out pointer, NULL by name or object, errno, typed elements, constant counts")
    func kinds() throws {
        let functions = try Self.parse([
            ["name": "frexp", "arguments": ["double", Self.pointer("exp", "int32", "out")], "returns": "double"],
            ["name": "strtol", "arguments": ["string", "null", "int32"], "returns": "int64", "errno": true],
            ["name": "g", "arguments": [["type": "null"], ["name": "level", "type": "int32"]], "returns": "void"],
            [
                "name": "block",
                "arguments": [["name": "values", "type": "buffer", "direction": "inout", "element": "double", "count": 4]],
                "returns": "void",
            ],
        ]).manifest.functions
        #expect(
            functions.map(\.description) == [
                "frexp(double, out int32 *exp) -> double", "strtol(string, NULL, int32) -> int64, errno", "g(NULL, int32 level) -> void",
                "block(inout double values[4]) -> void",
            ])
        #expect(functions[1].reportsErrno)
        #expect(functions[0].arguments == [.double])
        #expect(functions[0].outputs.map(\.name) == ["exp"])
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var what: String
        /// The `arguments` array, as JSON.
        var arguments: String
        var key: String
        /// Words the problem must contain (the function's and the argument's names among them).
        var words: [String]
        var testDescription: String { what }
    }

    static let refusals: [Refusal] = [
        Refusal(
            what: "a count naming no argument",
            arguments: #"[{"name": "dest", "type": "buffer", "direction": "out", "count": "*destLen"}]"#,
            key: "functions[0].arguments[0].count", words: ["'dest'", "f", "no argument named 'destLen'"]),
        Refusal(
            what: "a count naming a double",
            arguments: #"[{"name": "dest", "type": "buffer", "direction": "in", "count": "n"}, {"name": "n", "type": "double"}]"#,
            key: "functions[0].arguments[0]", words: ["'dest' of f", "'n'", "not an integer argument"]),
        Refusal(
            what: "*len of a value, not a pointer",
            arguments: #"[{"name": "dest", "type": "buffer", "direction": "out", "count": "*n"}, {"name": "n", "type": "uint64"}]"#,
            key: "functions[0].arguments[0]", words: ["'dest' of f", "'n' is not an inout pointer"]),
        Refusal(
            what: "*len of an out pointer",
            arguments:
                #"[{"name": "dest", "type": "buffer", "direction": "out", "count": "*n"}, {"name": "n", "type": "pointer", "to": "uint64", "direction": "out"}]"#,
            key: "functions[0].arguments[0]", words: ["'dest' of f", "not an inout pointer"]),
        Refusal(
            what: "*len of a pointer to double",
            arguments:
                #"[{"name": "dest", "type": "buffer", "direction": "out", "count": "*n"}, {"name": "n", "type": "pointer", "to": "double", "direction": "inout"}]"#,
            key: "functions[0].arguments[0]", words: ["'dest' of f", "integer"]),
        Refusal(
            what: "a count naming a pointer without *",
            arguments:
                #"[{"name": "dest", "type": "buffer", "direction": "out", "count": "n"}, {"name": "n", "type": "pointer", "to": "uint64", "direction": "inout"}]"#,
            key: "functions[0].arguments[0]", words: ["'dest' of f", "write '*n'"]),
        Refusal(
            what: "two buffers claiming one length",
            arguments:
                #"[{"name": "a", "type": "buffer", "direction": "out", "count": "*n"}, {"name": "b", "type": "buffer", "direction": "inout", "count": "*n"}, {"name": "n", "type": "pointer", "to": "uint64", "direction": "inout"}]"#,
            key: "functions[0].arguments[1]", words: ["'b' of f", "already counts 'a'"]),
        Refusal(
            what: "an in buffer counted by a length",
            arguments:
                #"[{"name": "a", "type": "buffer", "direction": "in", "count": "*n"}, {"name": "n", "type": "pointer", "to": "uint64", "direction": "inout"}]"#,
            key: "functions[0].arguments[0]", words: ["'a' of f", "in buffer"]),
        Refusal(
            what: "a buffer counted by itself", arguments: #"[{"name": "a", "type": "buffer", "direction": "in", "count": "a"}]"#,
            key: "functions[0].arguments[0]", words: ["'a' of f"]),
        Refusal(
            what: "a zero constant", arguments: #"[{"name": "a", "type": "buffer", "direction": "out", "count": 0}]"#,
            key: "functions[0].arguments[0].count", words: ["positive integer"]),
        Refusal(
            what: "a pointer without a name", arguments: #"[{"type": "pointer", "to": "int32", "direction": "out"}]"#,
            key: "functions[0].arguments[0].name", words: ["needs a name"]),
        Refusal(
            what: "a pointer to a string", arguments: #"[{"name": "p", "type": "pointer", "to": "string", "direction": "out"}]"#,
            key: "functions[0].arguments[0].to", words: ["scalar type"]),
        Refusal(
            what: "a buffer without a direction", arguments: #"[{"name": "a", "type": "buffer", "count": 4}]"#,
            key: "functions[0].arguments[0].direction", words: ["in, out or inout"]),
        Refusal(
            what: "an unknown direction", arguments: #"[{"name": "p", "type": "pointer", "to": "int32", "direction": "both"}]"#,
            key: "functions[0].arguments[0].direction", words: ["'both'"]),
        Refusal(
            what: "a buffer without a count", arguments: #"[{"name": "a", "type": "buffer", "direction": "out"}]"#,
            key: "functions[0].arguments[0].count", words: ["is missing"]),
        Refusal(
            what: "a count that is not a name", arguments: #"[{"name": "a", "type": "buffer", "direction": "out", "count": "n + 1"}]"#,
            key: "functions[0].arguments[0].count", words: ["'n + 1'"]),
        Refusal(
            what: "a count on a scalar", arguments: #"[{"name": "x", "type": "int32", "count": 2}]"#,
            key: "functions[0].arguments[0].count", words: ["does not apply"]),
        Refusal(
            what: "two arguments of one name", arguments: #"[{"name": "x", "type": "int32"}, {"name": "x", "type": "int32"}]"#,
            key: "functions[0].arguments[1].name", words: ["repeats 'x'", "f"]),
        Refusal(
            what: "an unknown type", arguments: #"[{"name": "x", "type": "union"}]"#,
            key: "functions[0].arguments[0].type", words: ["'union'"]),
        Refusal(
            what: "a number for an argument", arguments: #"[{"name": "x", "type": "int32"}, 7]"#,
            key: "functions[0].arguments[1]", words: ["type name or an argument object"]),
    ]

    @Test("inconsistent declarations are refused with the key, the function and the argument", arguments: refusals)
    func refused(_ refusal: Refusal) throws {
        let arguments = try JSONSerialization.jsonObject(with: Data(refusal.arguments.utf8))
        let error = try #require(Self.error([["name": "f", "arguments": arguments, "returns": "int32"]]))
        #expect(error.key == refusal.key, "\(error)")
        for word in refusal.words {
            #expect(error.problem.contains(word), "'\(word)' is not in: \(error.problem)")
        }
    }

    @Test("errno must be a boolean; unknown keys of an argument are warnings")
    func errnoAndWarnings() throws {
        #expect(Self.error([["name": "f", "arguments": [], "returns": "int32", "errno": "yes"]])?.key == "functions[0].errno")
        let result = try Self.parse([["name": "f", "arguments": [["name": "x", "type": "int32", "colour": "red"]], "returns": "void"]])
        #expect(result.warnings.map(\.key) == ["functions[0].arguments[0].colour"])
    }
}
