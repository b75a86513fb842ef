import Foundation
import Glibc
import TestSupport
import Testing

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
