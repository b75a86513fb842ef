import Foundation
import TestSupport
import Testing

/// The kits' own unit tests, from the README's test command (and as an ordinary user): the C++
/// kit's (Tests/Kits/cpp_kit_test.cpp, in C++17 and C++20), the Rust crate's `cargo test` (its
/// layouts against the header, panic messages, errors) and the Go package's `go test`.
/// The time limit is a backstop: cargo test and go test build first, for many minutes on a
/// loaded small machine.
@Suite("The plugin kits' own unit tests", .tags(.process, .slow), .serialized, .timeLimit(.minutes(20)))
struct KitUnitTests {
    @Test(
        "the C++ kit: answers, asks, the binding note, exceptions and oversized answers through a fake host", arguments: ["c++17", "c++20"])
    func cpp(standard: String) async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let root = BuiltProducts.packageRoot
        let compiled = try await CommandRunner.run(
            "/usr/bin/env",
            [
                "g++", "-std=\(standard)", "-Wall", "-Wextra", "-Werror", "-I", root + "/Sources/PlugindPluginABI/include",
                root + "/Tests/Kits/cpp_kit_test.cpp", "-o", work.path + "/cpp_kit_test",
            ], environment: ProcessInfo.processInfo.environment)
        #expect(compiled.status == 0, "\(compiled.stderr)")
        let ran = try await CommandRunner.run(work.path + "/cpp_kit_test", [], environment: [:])
        #expect(ran.status == 0 && ran.stdout == "cpp kit ok\n", "\(ran.stdout)\(ran.stderr)")
    }

    @Test("the Rust kit's cargo test")
    func rust() async throws {
        let tested = try await PluginKitBuild.cargo(
            ["test", "--offline", "--target-dir", PluginKitBuild.buildDirectory + "/rust-kit"],
            in: BuiltProducts.packageRoot + "/Kits/Rust/plugind-plugin")
        #expect(tested.status == 0, "\(tested.stdout)\n\(tested.stderr)")
        #expect(tested.stdout.contains("test result: ok. 6 passed"), "\(tested.stdout)")
    }

    @Test("the Go kit's go test")
    func go() async throws {
        let tested = try await PluginKitBuild.go(["test", "-count=1", "./..."], in: BuiltProducts.packageRoot + "/Kits/Go/plugind")
        #expect(tested.status == 0, "\(tested.stdout)\n\(tested.stderr)")
        #expect(tested.stdout.contains("ok  \tplugind/kit"), "\(tested.stdout)")
    }
}
