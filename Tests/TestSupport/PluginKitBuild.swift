import Foundation
import PlugindSystem

/// The plugin kits other than C and Swift, and their probes' libraries: the C++ one is a product
/// of this build; the Rust and Go ones are built here with Debian's cargo and go, offline, into
/// a directory of this user's that later runs reuse.
package enum PluginKitBuild: String, CaseIterable, Sendable, CustomStringConvertible {
    case cpp, rust, go

    package var description: String { rawValue }

    /// The address space a plugin of the kit needs: the Go runtime reserves about 1 GiB at
    /// start-up (PROT_NONE: its page allocator's summaries and heap arena hints), which
    /// RLIMIT_AS counts, so a Go plugin asks for 3 GiB and its host must allow it.
    package var memoryBytes: UInt64? {
        self == .go ? 3 << 30 : nil
    }

    /// How the probe's "throw" request reaches the host.
    package var thrownDescription: String {
        switch self {
        case .cpp: "C++ exception: asked to throw"
        case .rust: "panicked: asked to panic"
        case .go: "panic: asked to panic"
        }
    }

    package struct BuildFailure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The probe's library.
    package func probeLibrary() async throws -> String {
        switch self {
        case .cpp:
            return try BuiltProducts.library("CppKitProbe")
        case .rust:
            let target = Self.buildDirectory + "/rust"
            let built = try await Self.cargo(
                ["build", "--release", "--offline", "--target-dir", target], in: BuiltProducts.packageRoot + "/Kits/Rust/probe")
            guard built.status == 0 else { throw BuildFailure(description: "cargo build of the Rust kit's probe failed:\n\(built.stderr)") }
            return target + "/release/libkit_probe.so"
        case .go:
            let output = Self.buildDirectory + "/go/libKitProbe.so"
            let built = try await Self.go(
                ["build", "-buildmode=c-shared", "-o", output, "."], in: BuiltProducts.packageRoot + "/Kits/Go/probe")
            guard built.status == 0 else { throw BuildFailure(description: "go build of the Go kit's probe failed:\n\(built.stderr)") }
            return output
        }
    }

    /// Debian's go (the one on PATH without it) and the variables it runs with: offline, with
    /// its caches under `buildDirectory`.
    package static var goToolchain: (executable: String, environment: [String: String]) {
        let environment = [
            "GOPROXY": "off", "GOFLAGS": "-mod=mod -buildvcs=false", "GOCACHE": buildDirectory + "/go-cache",
            "GOPATH": buildDirectory + "/go-path", "GOTOOLCHAIN": "local",
        ]
        return (FileManager.default.isExecutableFile(atPath: "/usr/bin/go") ? "/usr/bin/go" : "go", environment)
    }

    /// Debian's cargo with its rustc and rustdoc, whatever else is on PATH (the one on PATH
    /// without it), and the variables it runs with: offline, its home under `buildDirectory`.
    package static var cargoToolchain: (executable: String, environment: [String: String]) {
        var environment = ["CARGO_HOME": buildDirectory + "/cargo-home", "CARGO_NET_OFFLINE": "true"]
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/cargo") else { return ("cargo", environment) }
        environment["RUSTC"] = "/usr/bin/rustc"
        environment["RUSTDOC"] = "/usr/bin/rustdoc"
        return ("/usr/bin/cargo", environment)
    }

    /// Runs go in `directory`.
    package static func go(_ arguments: [String], in directory: String) async throws -> CommandRunner.Output {
        try await run(goToolchain, arguments, in: directory)
    }

    /// Runs cargo in `directory`. Nothing is fetched: the kits depend on the standard library only.
    package static func cargo(_ arguments: [String], in directory: String) async throws -> CommandRunner.Output {
        try await run(cargoToolchain, arguments, in: directory)
    }

    private static func run(
        _ toolchain: (executable: String, environment: [String: String]), _ arguments: [String], in directory: String
    ) async throws -> CommandRunner.Output {
        let environment = ProcessInfo.processInfo.environment.merging(toolchain.environment) { _, new in new }
        return try await CommandRunner.run(
            "/usr/bin/env", [toolchain.executable] + arguments, environment: environment, currentDirectory: directory)
    }

    /// `CARGO=…` and `GO=…` for a scaffold's Makefile: the same toolchains, through env(1).
    package static var makeVariables: [String] {
        [("CARGO", cargoToolchain), ("GO", goToolchain)].map { name, toolchain in
            "\(name)=env " + toolchain.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                + " " + toolchain.executable
        }
    }

    /// Where kit builds go: outside the checkout (which may be read-only for this user).
    package static var buildDirectory: String { "/tmp/plugind-kit-builds-\(getuid())" }
}
