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

@Suite("plugind verify", .tags(.process), .serialized, .timeLimit(.minutes(2)))
struct VerifyCommandTests {
    func bundle(_ test: TestHost, _ fixture: PluginFixture) throws -> String {
        try fixture.install(in: try test.directory.subdirectory("bundles"))
    }

    /// Replaces the first occurrence of `old` in the file with `new`, of the same length.
    func patch(_ path: String, _ old: String, _ new: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let needle = Array(old.utf8)
        guard let start = (0...(bytes.count - needle.count)).first(where: { Array(bytes[$0..<$0 + needle.count]) == needle }) else {
            throw CLIFailure(message: "\(old) not found in \(path)")
        }
        bytes.replaceSubrange(start..<start + needle.count, with: Array(new.utf8))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("each broken bundle is named with its problem and a fix")
    func brokenBundles() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let missingDependency = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.dependency"))
        try patch(missingDependency + "/libEcho.so", "libc.so.6", "libq.so.6")
        let wrongMachine = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.machine"))
        var elf = [UInt8](try Data(contentsOf: URL(fileURLWithPath: wrongMachine + "/libEcho.so")))
        elf[18] = 183
        elf[19] = 0
        try Data(elf).write(to: URL(fileURLWithPath: wrongMachine + "/libEcho.so"))
        let missingSymbol = try bundle(test, PluginFixture(library: "FaultyNoEntry", identifier: "org.plugind.tests.symbol"))
        let wrongABI = try bundle(test, PluginFixture(library: "FaultyWrongABI", identifier: "org.plugind.tests.abi"))
        let typeError = try bundle(
            test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.types", extra: ["limits": ["openFiles": "many"]]))
        let missingFunction = try bundle(
            test,
            PluginFixture(
                library: "Echo", identifier: "org.plugind.tests.function",
                extra: ["functions": [["name": "absent", "arguments": [], "returns": "void"]]])
        )
        let good = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.good"))

        let result = try await plugind(
            "verify", missingDependency, wrongMachine, missingSymbol, wrongABI, typeError, missingFunction, good, in: test)
        #expect(result.status == 1)
        let text = result.stdout
        #expect(text.contains("error: [dependencies] libq.so.6, needed by libEcho.so, is not found"))
        #expect(text.contains("fix: install the package that provides libq.so.6"))
        #expect(text.contains("error: [elf] the library \(wrongMachine)/libEcho.so is built for AArch64, this host is x86-64"))
        #expect(text.contains("error: [entry-point] libFaultyNoEntry.so does not export plugind_plugin_entry"))
        #expect(text.contains("error: [abi] libFaultyWrongABI.so was built for plugin ABI 999; this plugind supports 1"))
        #expect(
            text.contains("error: [manifest] \(typeError)/manifest.json: key 'limits.openFiles' must be a positive integer, found string"))
        #expect(text.contains("error: [functions] function 'absent' declared in the manifest is not exported by libEcho.so"))
        #expect(
            text.contains(
                "org.plugind.tests.good (\(good)): ok (manifest, contents, library, permissions, elf, dependencies, entry-point, abi (2))"
            ))

        let json = try await plugind("verify", good, missingSymbol, "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let reports = document?["reports"] as? [[String: Any]] ?? []
        #expect(reports.map { $0["ok"] as? Bool } == [true, false])
        let problems = reports[1]["problems"] as? [[String: Any]] ?? []
        #expect(problems.first?["check"] as? String == "entry-point")
        #expect(problems.first?["fix"] as? String != nil)
    }
}

// The time limit is a backstop: cargo and go builds take many minutes on a loaded small machine.
@Suite("plugind verify on kits' bundles built wrong", .tags(.process, .slow), .serialized, .timeLimit(.minutes(20)))
struct KitBuildMistakeTests {
    /// A bundle of `library` with a minimal manifest.
    func bundle(_ library: String, in test: TestHost) throws -> String {
        try PluginFixture(library: "Wrong", identifier: "local.wrong", libraryPath: library).install(
            in: try test.directory.subdirectory("bundles"))
    }

    @Test("a Go library without the kit, and a Rust cdylib without export_plugin!, are named with the kit's fix")
    func missingEntry() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let work = try test.directory.subdirectory("work")

        // Go: a c-shared library that never imports plugind/kit.
        let goModule = try test.directory.subdirectory("work/go")
        try Data("module local/wrong\n\ngo 1.19\n".utf8).write(to: URL(fileURLWithPath: goModule + "/go.mod"))
        try Data("package main\n\nimport \"C\"\n\nfunc main() {}\n".utf8).write(to: URL(fileURLWithPath: goModule + "/main.go"))
        let goBuilt = try await PluginKitBuild.go(["build", "-buildmode=c-shared", "-o", work + "/libgo.so", "."], in: goModule)
        #expect(goBuilt.status == 0, "\(goBuilt.stderr)")
        let goVerified = try await plugind("verify", try bundle(work + "/libgo.so", in: test), in: test)
        #expect(goVerified.status == 1)
        #expect(goVerified.stdout.contains("[entry-point]"), "\(goVerified.stdout)")
        #expect(goVerified.stdout.contains("fix: import plugind/kit and call kit.Register"), "\(goVerified.stdout)")

        // Rust: a cdylib on the kit that forgot export_plugin!.
        let crate = try test.directory.subdirectory("work/rust")
        try FileManager.default.createDirectory(atPath: crate + "/src", withIntermediateDirectories: true)
        let kit = BuiltProducts.packageRoot + "/Kits/Rust/plugind-plugin"
        try Data(
            "[package]\nname = \"wrong\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nplugind-plugin = { path = \"\(kit)\" }\n"
                .utf8
        ).write(to: URL(fileURLWithPath: crate + "/Cargo.toml"))
        try Data("pub use plugind_plugin::Plugin;\n".utf8).write(to: URL(fileURLWithPath: crate + "/src/lib.rs"))
        let rustBuilt = try await PluginKitBuild.cargo(["build", "--offline", "--target-dir", work + "/cargo"], in: crate)
        #expect(rustBuilt.status == 0, "\(rustBuilt.stderr)")
        let rustVerified = try await plugind("verify", try bundle(work + "/cargo/debug/libwrong.so", in: test), in: test)
        #expect(rustVerified.status == 1)
        #expect(rustVerified.stdout.contains("does not export plugind_plugin_entry"), "\(rustVerified.stdout)")
        #expect(rustVerified.stdout.contains("export_plugin! in Rust"), "\(rustVerified.stdout)")

        // A Go program built without -buildmode=c-shared is not a library at all.
        let executable = try await PluginKitBuild.go(["build", "-o", work + "/libexe.so", "."], in: goModule)
        #expect(executable.status == 0, "\(executable.stderr)")
        let notLibrary = try await plugind("verify", try bundle(work + "/libexe.so", in: test), in: test)
        #expect(notLibrary.stdout.contains("is not a shared library"), "\(notLibrary.stdout)")
        #expect(notLibrary.stdout.contains("go build -buildmode=c-shared in Go"), "\(notLibrary.stdout)")
    }
}

@Suite("Progress under a terminal", .tags(.process), .serialized, .timeLimit(.minutes(1)))
struct ProgressTerminalTests {
    @Test("plugind run draws a progress bar when stderr is a terminal")
    func progressBar() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Countdown")
        try await installApproved(fixture, in: test)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        // script(1) (util-linux) runs the command on a pseudo-terminal and copies what it drew.
        let command = "'\(try BuiltProducts.plugind())' run \(fixture.identifier) 4"
        let result = try await CommandRunner.run(
            "/usr/bin/script", ["--quiet", "--return", "--command", command, "/dev/null"], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let screen = result.stdout
        #expect(screen.contains("\r[------------------------------]   0% (0/4)"), "\(screen.debugDescription)")
        #expect(screen.contains("\r[##############################] 100% (4/4)"), "\(screen.debugDescription)")
        #expect(screen.contains("counted down 4 steps"))
        #expect(!screen.contains("progress: "))
    }

}
