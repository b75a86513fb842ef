import Foundation
import Glibc
import TestSupport
import Testing

// The time limit is a backstop: a scaffold's build (swift build, cargo, go) takes many minutes
// on a loaded small machine.
@Suite("Plugin development kit: new, build, verify, install, approve, run", .tags(.process, .slow), .serialized, .timeLimit(.minutes(30)))
struct DevelopmentKitTests {
    func make(_ directory: String, _ arguments: String...) async throws -> CommandRunner.Output {
        try await make(directory, arguments)
    }

    /// `make` with Debian's cargo and go (their caches in this user's kit build directory), as
    /// an author would run it: the scaffolds' Makefiles take CARGO and GO.
    func make(_ directory: String, _ arguments: [String]) async throws -> CommandRunner.Output {
        let toolchains = PluginKitBuild.makeVariables
        return try await CommandRunner.run(
            "/usr/bin/env", ["make", "-C", directory] + toolchains + arguments, environment: ProcessInfo.processInfo.environment)
    }

    @Test("a new plugin goes from scaffold to answer, in C, C++, Rust, Go and Swift", arguments: ["c", "cpp", "rust", "go", "swift"])
    func scaffoldToAnswer(language: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let name = "Greeter" + language.prefix(1).uppercased() + language.dropFirst()
        // The kits' greeters ask their host whom to greet; the Go runtime needs more address space
        // than the default cap (it reserves about 1 GiB at start-up).
        let asks = ["cpp", "rust", "go"].contains(language)
        let extra = language == "go" ? ["PLUGIND_MEMORY_LIMIT": String(3 << 30)] : [:]
        let projects = try test.directory.subdirectory("projects")
        let created = try await plugind("new", name, "--lang", language, "--dir", projects, in: test)
        #expect(created.status == 0, "\(created.stderr)")
        let project = projects + "/" + name
        #expect(FileManager.default.fileExists(atPath: project + "/Makefile"))

        let built = try await make(project)
        #expect(built.status == 0, "\(built.stdout)\n\(built.stderr)")
        let bundle = project + "/build/\(name).appex"

        let verified = try await plugind("verify", bundle, in: test)
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(verified.stdout.contains(": ok ("))
        #expect(verified.stdout.contains("abi (2)"))
        // The extension point the code states is recorded in the library and matches the manifest.
        #expect(verified.stdout.contains("binding"), "\(verified.stdout)")
        let loaded = try await plugind("verify", "--load", bundle, in: test)
        #expect(loaded.stdout.contains("load (plugin ABI 2)"), "\(loaded.stdout)")

        // The signed single file an author hands out.
        let key = try test.directory.subdirectory("keys") + "/author"
        #expect(try await plugind("keygen", "--output", key, in: test).status == 0)
        let unkeyed = try await make(project, "package")
        #expect(unkeyed.status != 0)
        #expect(unkeyed.stderr.contains("make package needs KEY="), "\(unkeyed.stderr)")
        let packaged = try await make(project, "package", "KEY=\(key)")
        #expect(packaged.status == 0, "\(packaged.stdout)\n\(packaged.stderr)")
        let installed = try await plugind("install", project + "/build/\(name).plugin", in: test)
        #expect(installed.status == 0, "\(installed.stderr)")
        let identifier = "local.\(name.lowercased())"
        #expect(installed.stderr.contains("Installed \(identifier)"))
        #expect(try await plugind("approve", identifier, "--yes", in: test).status == 0)
        let answer = try await plugind(["run", identifier, "world"] + (asks ? ["--answer", "Ada"] : []), in: test, environment: extra)
        #expect(answer.status == 0, "\(answer.stderr)")
        #expect(answer.stdout == (asks ? "Hello, Ada: world" : "Hello from \(name): world"))
        if asks {
            // An empty request is the greeter's own error, with its message; nothing crashes.
            let empty = try await plugind(["run", identifier, ""] + ["--answer", "Ada"], in: test, environment: extra)
            #expect(empty.status == 1 && empty.stderr.contains("nothing to greet: the request is empty"), "\(empty.stderr)")
        }

        // Installing the same bytes again changes nothing; uninstall removes it.
        #expect(try await plugind("install", bundle, in: test).stderr.contains("already installed"))
        #expect(try await plugind("uninstall", identifier, in: test).status == 0)
        #expect(try await plugind("run", identifier, "world", in: test).status == 69)
    }

    @Test("install refuses to replace a different build of the same plugin without --force")
    func installForce() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let staging = try test.directory.subdirectory("staging")
        let first = try PluginFixture(library: "Echo", identifier: "org.plugind.tests.same").install(in: staging, bundleName: "one")
        let second = try PluginFixture(library: "CTextFilter", identifier: "org.plugind.tests.same").install(in: staging, bundleName: "two")
        #expect(try await plugind("install", first, in: test).status == 0)
        let refused = try await plugind("install", second, in: test)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("a different build of org.plugind.tests.same is installed"))
        // The reason in words, not a Swift value's description (the soak found "(NotAnUpdate(reason: ...))").
        #expect(refused.stderr.contains("(one of them carries no valid publisher signature); pass --force"), "\(refused.stderr)")
        #expect(try await plugind("install", second, "--force", in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.same", "--yes", in: test).status == 0)
        #expect(try await plugind("run", "org.plugind.tests.same", "abc", in: test).stdout == "ABC")
    }

    @Test("a Swift extension's binding lives in its code: make writes it into the manifest, verify catches a manifest that disagrees")
    func bindingFromCode() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let projects = try test.directory.subdirectory("projects")
        #expect(
            try await plugind("new", "Bound", "--lang", "swift", "--point", "com.example.first.point", "--dir", projects, in: test).status
                == 0)
        let project = projects + "/Bound"
        let source = project + "/Sources/Bound/Bound.swift"
        // The author moves the binding to another point and states two capabilities (a name
        // and a type of the extension's own), in code only.
        let code =
            try String(contentsOfFile: source, encoding: .utf8)
            .replacingOccurrences(
                of: #"AppExtensionPoint.Identifier(host: "com.example.first", name: "point")"#,
                with: """
                    AppExtensionPoint.Identifier(host: "com.example.second", name: "filters")
                            Implementing {
                                AppExtensionPoint.Supports("text/plain")
                                Markdown()
                            }
                    """)
                + """

                struct Markdown: AppExtensionPoint.Capability {
                    var id: String { "text/markdown" }
                }

                """
        try Data(code.utf8).write(to: URL(fileURLWithPath: source))
        let stale = try await plugind("bind", project, "--target", "Bound", "--check", in: test)
        #expect(stale.status == 1)
        #expect(stale.stderr.contains("com.example.second.filters"), "\(stale.stderr)")

        let built = try await make(project)
        #expect(built.status == 0, "\(built.stdout)\n\(built.stderr)")
        let manifest = try String(contentsOfFile: project + "/manifest.json", encoding: .utf8)
        #expect(manifest.contains(#""extensionPoint": "com.example.second.filters""#))
        #expect(manifest.contains(#""capabilities": ["text/plain", "text/markdown"]"#), "\(manifest)")
        #expect(manifest.contains(#""description": "Greets its input.""#), "the rest of the manifest is kept")
        let bundle = project + "/build/Bound.appex"
        let passed = try await plugind("verify", bundle, in: test)
        #expect(passed.stdout.contains("binding") && passed.stdout.contains("capabilities"), "\(passed.stdout)")

        // A manifest that claims a capability the code does not implement is caught.
        let bundledManifest = bundle + "/manifest.json"
        let original = try String(contentsOfFile: bundledManifest, encoding: .utf8)
        try Data(original.replacingOccurrences(of: #""text/markdown""#, with: #""text/html""#).utf8)
            .write(to: URL(fileURLWithPath: bundledManifest))
        let claimed = try await plugind("verify", bundle, in: test)
        #expect(claimed.status == 1)
        #expect(
            claimed.stdout.contains(
                "[capabilities] the code implements text/markdown, which the manifest leaves out; the manifest claims text/html, which the code does not implement"
            ), "\(claimed.stdout)")
        try Data(original.utf8).write(to: URL(fileURLWithPath: bundledManifest))

        // A hand edit of the bundle's manifest now disagrees with the library.
        let bundled = bundle + "/manifest.json"
        let edited = try String(contentsOfFile: bundled, encoding: .utf8)
            .replacingOccurrences(of: "com.example.second.filters", with: "com.example.third.filters")
        try Data(edited.utf8).write(to: URL(fileURLWithPath: bundled))
        let verified = try await plugind("verify", bundle, in: test)
        #expect(verified.status == 1)
        #expect(
            verified.stdout.contains(
                "[binding] the code binds to the extension point 'com.example.second.filters' but the manifest says 'com.example.third.filters'"
            ), "\(verified.stdout)")

        // Apple's 26.2 short form inside the extension is read too; a longer name ending in
        // "Identifier(" is not a binding.
        let short = """
            import PluginKit
            let unrelated = MyIdentifier("com.example.other.point")
            struct Bound: AppExtension {
                @Bind
                var extensionPoint: AppExtensionPoint {
                    Identifier(host: "com.example.second", name: "filters")
                    Implementing { Supports("text/plain"); Markdown() }
                }
            }
            struct Markdown: AppExtensionPoint.Capability { let id = "text/markdown" }
            """
        try Data(short.utf8).write(to: URL(fileURLWithPath: source))
        let checked = try await plugind("bind", project, "--target", "Bound", "--check", in: test)
        #expect(checked.status == 0, "\(checked.stderr)")

        // Sources without a binding are refused with the reason.
        try Data("import PluginKit\n".utf8).write(to: URL(fileURLWithPath: source))
        let unbound = try await plugind("bind", project, "--target", "Bound", in: test)
        #expect(unbound.status == 1)
        #expect(unbound.stderr.contains("no AppExtensionPoint.Identifier(host:name:)"), "\(unbound.stderr)")
    }
}
