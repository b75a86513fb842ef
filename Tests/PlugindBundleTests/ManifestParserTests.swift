import Foundation
import PlugindBundle
import PlugindWire
import TestSupport
import Testing

@Suite("Manifest v1 validation", .tags(.unit))
struct ManifestParserTests {
    static var valid: [String: Any] {
        [
            "manifestVersion": 1,
            "identifier": "com.example.filter",
            "name": "Filter",
            "version": "1.2.3",
            "extensionPoint": "com.example.app.filters",
            "library": "libFilter.so",
        ]
    }

    func parse(_ object: [String: Any]) throws(ManifestError) -> ManifestParser.Result {
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return try ManifestParser.parse(data, file: "/b/manifest.json")
    }

    func error(_ object: [String: Any]) -> ManifestError? {
        do {
            _ = try parse(object)
            return nil
        } catch {
            return error
        }
    }

    @Test("a minimal manifest parses")
    func minimal() throws {
        let result = try parse(Self.valid)
        #expect(result.manifest.identifier == "com.example.filter")
        #expect(result.manifest.functions.isEmpty)
        #expect(result.manifest.permissions == Manifest.Permissions())
        #expect(result.warnings.isEmpty)
    }

    @Test(
        "each missing required key is an error naming the key and the file",
        arguments: ["manifestVersion", "identifier", "name", "version", "extensionPoint", "library"])
    func missingKey(key: String) {
        var object = Self.valid
        object[key] = nil
        let failure = error(object)
        #expect(failure?.key == key)
        #expect(failure?.file == "/b/manifest.json")
        #expect(failure?.description.hasPrefix("/b/manifest.json: key '\(key)' is missing") == true)
    }

    @Test("wrong types are errors with the type found")
    func wrongTypes() {
        var object = Self.valid
        object["name"] = 42
        #expect(error(object)?.description == "/b/manifest.json: key 'name' must be a string, found number")
        object = Self.valid
        object["manifestVersion"] = "1"
        #expect(error(object)?.description == "/b/manifest.json: key 'manifestVersion' must be a number, found string")
        object = Self.valid
        object["permissions"] = ["network": "yes"]
        #expect(error(object)?.description == "/b/manifest.json: key 'permissions.network' must be true or false, found string")
        object = Self.valid
        object["limits"] = ["memoryBytes": true]
        #expect(error(object)?.key == "limits.memoryBytes")
    }

    @Test("capabilities: words a host can match exactly, each once, in the manifest's order")
    func capabilities() throws {
        var object = Self.valid
        object["capabilities"] = ["text/markdown", "text/plain", "public.rust-source"]
        #expect(try parse(object).manifest.capabilities == ["text/markdown", "text/plain", "public.rust-source"])
        #expect(try parse(Self.valid).manifest.capabilities.isEmpty)
        for (bad, reason) in [
            (
                "text/plain; charset=utf-8",
                "is 'text/plain; charset=utf-8'; a capability is 1 to 128 printable ASCII characters without spaces"
            ),
            ("", "is ''; a capability is 1 to 128"), ("a\"b", "a capability is 1 to 128"), (String(repeating: "x", count: 129), "1 to 128"),
        ] {
            object["capabilities"] = ["text/plain", bad]
            let failure = error(object)
            #expect(failure?.key == "capabilities[1]")
            #expect(failure?.description.contains(reason) == true, "\(failure?.description ?? "parsed")")
        }
        object["capabilities"] = ["text/plain", "text/plain"]
        #expect(error(object)?.description == "/b/manifest.json: key 'capabilities[1]' repeats 'text/plain'; name each capability once")
        object["capabilities"] = "text/plain"
        #expect(error(object)?.description == "/b/manifest.json: key 'capabilities' must be an array of strings, found string")
    }

    @Test("unknown keys are warnings, also nested ones")
    func unknownKeys() throws {
        var object = Self.valid
        object["colour"] = "blue"
        object["limits"] = ["cpuSeconds": 2, "gpuSeconds": 1]
        let result = try parse(object)
        #expect(result.manifest.limits.cpuSeconds == 2)
        #expect(result.warnings.map(\.key) == ["colour", "limits.gpuSeconds"])
    }

    @Test("functions: every type parses; unknown types, void arguments and bytes returns do not")
    func functions() throws {
        var object = Self.valid
        // A handle is declared as an object with its kind (HandleDeclarationParserTests).
        let types = FunctionValueType.allCases.filter { $0.isValidArgument && $0 != .handle }.map(\.rawValue)
        object["functions"] = [
            ["name": "all_types", "arguments": types, "returns": "double"], ["name": "nothing", "arguments": [], "returns": "void"],
        ]
        let manifest = try parse(object).manifest
        #expect(manifest.functions.count == 2)
        #expect(manifest.functions[0].arguments.count == FunctionValueType.allCases.count - 2)

        object["functions"] = [["name": "f", "arguments": ["int128"], "returns": "void"]]
        #expect(error(object)?.key == "functions[0].arguments[0]")
        #expect(error(object)?.problem.contains("unknown type 'int128'") == true)
        object["functions"] = [["name": "f", "arguments": ["void"], "returns": "void"]]
        #expect(error(object)?.problem == "cannot be void")
        object["functions"] = [["name": "f", "arguments": [], "returns": "bytes"]]
        #expect(error(object)?.key == "functions[0].returns")
        object["functions"] = [["name": "not an identifier", "arguments": [], "returns": "void"]]
        #expect(error(object)?.key == "functions[0].name")
        object["functions"] = [["name": "f", "arguments": [], "returns": "void"], ["name": "f", "arguments": [], "returns": "void"]]
        #expect(error(object)?.problem == "declares 'f' a second time")
    }

    @Test("identifiers must be reverse DNS; library must be relative; version must be 1")
    func values() {
        var object = Self.valid
        object["identifier"] = "filter"
        #expect(error(object)?.key == "identifier")
        object = Self.valid
        object["library"] = "/usr/lib/libX.so"
        #expect(error(object)?.key == "library")
        object = Self.valid
        object["manifestVersion"] = 2
        #expect(error(object)?.problem == "is 2; this plugind reads version 1")
        object = Self.valid
        object["permissions"] = ["read": ["relative/path"]]
        #expect(error(object)?.key == "permissions.read[0]")
        object = Self.valid
        object["minimumHostVersion"] = "soon"
        #expect(error(object)?.key == "minimumHostVersion")
    }

    @Test("malformed JSON is reported with the file")
    func badJSON() {
        do {
            _ = try ManifestParser.parse(Data("{\"identifier\": ".utf8), file: "/b/manifest.json")
            Issue.record("parsed malformed JSON")
        } catch {
            #expect(error.key == nil)
            #expect(error.description.hasPrefix("/b/manifest.json: is not valid JSON"))
        }
    }

    @Test("a boolean is never accepted as a number, nor a number as a boolean")
    func strictScalars() {
        var object = Self.valid
        object["manifestVersion"] = true
        #expect(error(object)?.problem == "must be a number, found boolean")
        object = Self.valid
        object["permissions"] = ["network": 1]
        #expect(error(object)?.problem == "must be true or false, found number")
    }

    @Test("reverse DNS is decided as a split into labels decides it, over every short text of its alphabet and beyond")
    func reverseDNSAgainstSplit() {
        /// The rule as written: at least two labels split at '.', none empty, each of letters,
        /// digits, '-' and '_'.
        func bySplitting(_ text: String) -> Bool {
            let labels = text.split(separator: ".", omittingEmptySubsequences: false)
            return labels.count >= 2
                && labels.allSatisfy { label in
                    !label.isEmpty && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
                }
        }
        // Every text of up to five characters over an alphabet that holds each class of byte.
        let alphabet: [Character] = [".", "a", "Z", "7", "-", "_", " ", "é", "/"]
        var texts = [""]
        var checked = 0
        for _ in 0..<5 {
            texts = texts.flatMap { text in alphabet.map { text + String($0) } }
            for text in texts where ManifestParser.isReverseDNS(text) != bySplitting(text) {
                Issue.record("'\(text)': \(ManifestParser.isReverseDNS(text)) against \(bySplitting(text))")
            }
            checked += texts.count
        }
        #expect(checked > 60_000)
        #expect(ManifestParser.isReverseDNS("org.plugind.tests.echo0") && !ManifestParser.isReverseDNS("org..x"))
    }
}
