import Foundation
import TestSupport
import Testing

/// Every Swift, C, C++, Rust, Go and Python snippet of the README and `Documentation/` compiles against this
/// build, as Rust's documentation tests do: a snippet that drifts from the API fails here, not
/// in a reader's editor. A snippet is a whole file unless the line before its fence names a
/// context (`<!-- snippet: host -->`): the declarations it assumes, kept below so that the text
/// stays as a reader sees it. Whole Swift host programs also run, against example plugins, in
/// `SDKPackageTests` (they need a package to link).
/// The time limit is a backstop: swiftc, cargo and go take many minutes on a loaded small machine.
@Suite("Documentation snippets compile", .tags(.process, .slow), .serialized, .timeLimit(.minutes(20)))
struct DocumentationSnippetTests {
    struct Snippet: CustomStringConvertible {
        var file: String
        var line: Int
        var language: String
        var context: String?
        var code: String

        var description: String { "\(file):\(line)" }

        /// A Swift host program: compiled and run by `SDKPackageTests`.
        var isHostProgram: Bool {
            language == "swift" && context == nil && code.hasPrefix("import ExtensionFoundation")
        }
    }

    /// Languages of fenced blocks that are not compiled here, and why: shell sessions and data
    /// are not programs; the Meson and CMake files need the installed package, and the packaging
    /// test builds with pkg-config the same way.
    static let uncompiled: Set<String> = ["sh", "console", "text", "json", "meson", "cmake"]

    static func snippets() throws -> [Snippet] {
        let root = BuiltProducts.packageRoot
        let documents =
            ["README.md"]
            + (try FileManager.default.contentsOfDirectory(atPath: root + "/Documentation")).filter { $0.hasSuffix(".md") }.sorted()
            .map { "Documentation/" + $0 }
        var snippets: [Snippet] = []
        for document in documents {
            let lines = try String(contentsOfFile: root + "/" + document, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false)
            var index = 0
            while index < lines.count {
                let line = lines[index]
                let trimmed = line.drop { $0 == " " }
                guard trimmed.hasPrefix("```"), trimmed.count > 3 else {
                    index += 1
                    continue
                }
                let indentation = line.count - trimmed.count
                let language = String(trimmed.dropFirst(3))
                let previous = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
                let context =
                    previous.hasPrefix("<!-- snippet: ") && previous.hasSuffix(" -->")
                    ? String(previous.dropFirst("<!-- snippet: ".count).dropLast(" -->".count)) : nil
                var body: [Substring] = []
                index += 1
                while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                    body.append(lines[index].dropFirst(min(indentation, lines[index].prefix { $0 == " " }.count)))
                    index += 1
                }
                snippets.append(
                    Snippet(
                        file: document, line: index - body.count, language: language, context: context,
                        code: body.joined(separator: "\n") + "\n"))
                index += 1
            }
        }
        return snippets
    }

    @Test("every fenced block is in a language this test knows")
    func languagesKnown() throws {
        let unknown = try Self.snippets().filter {
            !["swift", "c", "cpp", "rust", "go", "python"].contains($0.language) && !Self.uncompiled.contains($0.language)
        }
        #expect(unknown.isEmpty, "\(unknown.map { "\($0): \($0.language)" })")
    }

    @Test("Swift snippets type-check against ExtensionFoundation and PluginKit")
    func swift() async throws {
        let snippets = try Self.snippets().filter { $0.language == "swift" }
        #expect(snippets.count >= 12)
        #expect(snippets.contains { $0.isHostProgram })
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let modules = BuiltProducts.directory + "/Modules"
        var mapFiles: [String] = []
        for directory in [BuiltProducts.packageRoot + "/Sources", BuiltProducts.directory] {
            guard let walk = FileManager.default.enumerator(atPath: directory) else { continue }
            for case let path as String in walk where path.hasSuffix("module.modulemap") && !path.contains("/checkouts/") {
                // A map SwiftPM generated before the target got one of its own is left behind in
                // .build: the target's own wins.
                let target = path.split(separator: "/").first.map { String($0.dropLast(".build".count)) } ?? ""
                if directory == BuiltProducts.directory,
                    FileManager.default.fileExists(atPath: BuiltProducts.packageRoot + "/Sources/\(target)/include/module.modulemap")
                {
                    continue
                }
                mapFiles.append(directory + "/" + path)
            }
        }
        for snippet in snippets {
            let source = work.path + "/snippet.swift"
            let (text, asLibrary) = try Self.swiftSource(snippet)
            try Data(text.utf8).write(to: URL(fileURLWithPath: source))
            let arguments =
                ["swiftc", "-typecheck", "-swift-version", "6", "-I", modules, "-module-cache-path", work.path + "/cache"]
                + mapFiles.flatMap { ["-Xcc", "-fmodule-map-file=\($0)"] } + (asLibrary ? ["-parse-as-library"] : []) + [source]
            let checked = try await CommandRunner.run("/usr/bin/env", arguments, environment: ProcessInfo.processInfo.environment)
            #expect(checked.status == 0, "\(snippet) does not compile:\n\(checked.stderr)\n\(text)")
        }
    }

    @Test("C snippets compile against plugind.h and plugind_plugin.h")
    func c() async throws {
        let snippets = try Self.snippets().filter { $0.language == "c" }
        #expect(snippets.count >= 5)
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let glib = try await CommandRunner.run(
            "/usr/bin/env", ["pkg-config", "--cflags", "glib-2.0"], environment: ProcessInfo.processInfo.environment)
        #expect(glib.status == 0, "GLib's headers are missing (Scripts/setup.sh installs libglib2.0-dev): \(glib.stderr)")
        let root = BuiltProducts.packageRoot
        for snippet in snippets {
            let source = work.path + "/snippet.c"
            let text = try Self.cSource(snippet)
            try Data(text.utf8).write(to: URL(fileURLWithPath: source))
            let arguments =
                [
                    "cc", "-fsyntax-only", "-std=gnu11", "-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types",
                    "-Werror=int-conversion", "-I", root + "/Sources/CPlugindHostAPI/include", "-I",
                    root + "/Sources/PlugindPluginABI/include",
                ] + glib.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty } + [
                    source
                ]
            let checked = try await CommandRunner.run("/usr/bin/env", arguments, environment: ProcessInfo.processInfo.environment)
            #expect(checked.status == 0, "\(snippet) does not compile:\n\(checked.stderr)\n\(text)")
        }
    }

    @Test("C++ snippets compile against plugind_plugin.hpp, in C++17 and C++20")
    func cpp() async throws {
        let snippets = try Self.snippets().filter { $0.language == "cpp" }
        #expect(!snippets.isEmpty)
        let work = try TemporaryDirectory()
        defer { work.remove() }
        for snippet in snippets {
            let source = work.path + "/snippet.cpp"
            try Data(snippet.code.utf8).write(to: URL(fileURLWithPath: source))
            for standard in ["c++17", "c++20"] {
                let checked = try await CommandRunner.run(
                    "/usr/bin/env",
                    [
                        "g++", "-std=\(standard)", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I",
                        BuiltProducts.packageRoot + "/Sources/PlugindPluginABI/include", source,
                    ],
                    environment: ProcessInfo.processInfo.environment)
                #expect(checked.status == 0, "\(snippet) does not compile as \(standard):\n\(checked.stderr)")
            }
        }
    }

    @Test("Rust snippets build as plugins on the Rust kit (cargo, offline)")
    func rust() async throws {
        let snippets = try Self.snippets().filter { $0.language == "rust" }
        #expect(!snippets.isEmpty)
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let kit = BuiltProducts.packageRoot + "/Kits/Rust/plugind-plugin"
        for snippet in snippets {
            let crate = try work.subdirectory("crate")
            try FileManager.default.createDirectory(atPath: crate + "/src", withIntermediateDirectories: true)
            let manifest =
                "[package]\nname = \"snippet\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nplugind-plugin = { path = \"\(kit)\" }\n"
            try Data(manifest.utf8).write(to: URL(fileURLWithPath: crate + "/Cargo.toml"))
            try Data(snippet.code.utf8).write(to: URL(fileURLWithPath: crate + "/src/lib.rs"))
            let built = try await PluginKitBuild.cargo(
                ["build", "--offline", "--target-dir", PluginKitBuild.buildDirectory + "/rust-snippets"], in: crate)
            #expect(built.status == 0, "\(snippet) does not build:\n\(built.stderr)")
        }
    }

    @Test("Go snippets build as plugins on the Go kit (go build -buildmode=c-shared, offline)")
    func go() async throws {
        let snippets = try Self.snippets().filter { $0.language == "go" }
        #expect(!snippets.isEmpty)
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let kit = BuiltProducts.packageRoot + "/Kits/Go/plugind"
        for snippet in snippets {
            let module = try work.subdirectory("module")
            let goMod = "module local/snippet\n\ngo 1.19\n\nrequire plugind/kit v0.0.0\n\nreplace plugind/kit => \(kit)\n"
            try Data(goMod.utf8).write(to: URL(fileURLWithPath: module + "/go.mod"))
            try Data(snippet.code.utf8).write(to: URL(fileURLWithPath: module + "/main.go"))
            let built = try await PluginKitBuild.go(["build", "-buildmode=c-shared", "-o", work.path + "/libsnippet.so", "."], in: module)
            #expect(built.status == 0, "\(snippet) does not build:\n\(built.stderr)")
        }
    }

    @Test("Python snippets compile (top-level await allowed, as in asyncio's REPL)")
    func python() async throws {
        let snippets = try Self.snippets().filter { $0.language == "python" }
        #expect(!snippets.isEmpty)
        for snippet in snippets {
            let check = "import ast, sys; compile(sys.stdin.read(), 'snippet', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)"
            let checked = try await CommandRunner.run(
                "/usr/bin/env", ["python3", "-c", check], environment: ProcessInfo.processInfo.environment, input: Array(snippet.code.utf8))
            #expect(checked.status == 0, "\(snippet) does not compile:\n\(checked.stderr)")
        }
    }

    // MARK: Contexts

    /// The Swift file for `snippet`, and whether it is a library (no top-level code).
    static func swiftSource(_ snippet: Snippet) throws -> (String, Bool) {
        switch snippet.context {
        case nil:
            guard snippet.code.hasPrefix("import ") else {
                throw SnippetError("\(snippet) is neither a whole file (it has no import) nor in a context (<!-- snippet: … -->)")
            }
            return (snippet.code, snippet.code.hasPrefix("import PluginKit"))
        case "host":
            // What a host's code has around it: a defined point, a running process and its
            // connection, the input, and the types its Codable asks use.
            let prelude = """
                import ExtensionFoundation

                extension AppExtensionPoint {
                    @Definition
                    static var textFilters: AppExtensionPoint {
                        Name("text-filters")
                        Scope(restriction: .none)
                    }
                }

                struct Question: Codable, Sendable { var text: String }
                struct Answer: Codable, Sendable { var text: String }

                func snippet(
                    identity: AppExtensionIdentity, configuration: AppExtensionProcess.Configuration, process: AppExtensionProcess,
                    connection: AppExtensionConnection, input: [UInt8], lines: [String], currentUserName: String
                ) async throws {
                    var results: [[UInt8]] = []

                """
            return (prelude + snippet.code + "    _ = results\n}\n", true)
        case "plugin-method":
            return (
                "import PluginKit\n\nfinal class SnippetPlugin: Plugin {\n    init(host: PluginHost) {}\n\n" + snippet.code + "}\n", true
            )
        default:
            throw SnippetError("\(snippet) names the unknown Swift context '\(snippet.context ?? "")'")
        }
    }

    /// The C file for `snippet`.
    static func cSource(_ snippet: Snippet) throws -> String {
        switch snippet.context {
        case nil:
            return snippet.code
        case "c-main":
            // Statements of a host's function: its #includes go first, with the ones it uses
            // without saying (printf).
            let lines = snippet.code.split(separator: "\n", omittingEmptySubsequences: false)
            let includes = lines.filter { $0.hasPrefix("#include") }.joined(separator: "\n")
            let body = lines.filter { !$0.hasPrefix("#include") }.joined(separator: "\n")
            return "#include <stdio.h>\n#include <stdint.h>\n\(includes)\n\nint main(void) {\n\(body)\n    return 0;\n}\n"
        case "c-glib":
            return """
                #include <glib-unix.h>
                #include <plugind/plugind.h>

                static void rebuild_filter_menu(plugind_monitor *monitor) { (void)monitor; }

                """ + snippet.code
        case "c-plugin":
            return """
                #include <stdlib.h>
                #include <plugind_plugin.h>

                static const plugind_host *host;
                struct document { int lines; };
                static int too_many_editors(void) { return 0; }

                """ + snippet.code
        case "c-handler":
            return """
                #include <errno.h>
                #include <stddef.h>
                #include <plugind_plugin.h>

                static const plugind_host *host;
                static void use(const uint8_t *bytes, size_t length) { (void)bytes; (void)length; }
                static void report(int32_t code, const char *message) { (void)code; (void)message; }

                static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                    (void)state; (void)response;
                """ + snippet.code + "    return 0;\n}\n"
        default:
            throw SnippetError("\(snippet) names the unknown C context '\(snippet.context ?? "")'")
        }
    }

    struct SnippetError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
