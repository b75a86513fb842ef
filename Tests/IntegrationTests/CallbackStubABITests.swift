import Foundation
import TestSupport
import Testing

/// The worker's callback stubs (Sources/CPlugindCallbacks, assembly for x86-64 and AArch64) called
/// as C calls a function pointer: Tests/Fixtures/CallbackStubs/stub_abi.c built with them for this
/// machine, and for AArch64 and run under qemu-user — the AArch64 stubs have no other test on an
/// x86-64 machine. With BTI and pointer authentication enforced, a stub pool whose landing pads are
/// removed must fault, so that the pool passing there shows its landing pads are what BTI checks.
@Suite("Callback stubs: the calling conventions of x86-64 and AArch64", .tags(.process), .timeLimit(.minutes(5)))
struct CallbackStubABITests {
    static let sources = BuiltProducts.packageRoot + "/Sources/CPlugindCallbacks"
    static let checks = BuiltProducts.packageRoot + "/Tests/Fixtures/CallbackStubs/stub_abi.c"
    /// The cross compiler and emulator Scripts/setup.sh installs.
    static let crossCompiler = "/usr/bin/aarch64-linux-gnu-gcc"
    static let emulator = "/usr/bin/qemu-aarch64"
    static let aarch64Root = "/usr/aarch64-linux-gnu"

    static func run(_ executable: String, _ arguments: [String]) async throws -> CommandRunner.Output {
        try await CommandRunner.run(executable, arguments, environment: ["PATH": "/usr/bin:/bin"])
    }

    static func compile(_ compiler: String, _ arguments: [String]) async throws {
        let built = try await run(
            compiler, ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I\(sources)/include", "-I\(sources)"] + arguments)
        try #require(built.status == 0, "\(compiler) \(arguments.joined(separator: " ")): \(built.stderr)")
    }

    static func requireCrossTools() throws {
        for tool in [crossCompiler, emulator] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is missing: apt install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (Scripts/setup.sh)")
        }
    }

    @Test("on this machine: every argument register, a float returned, qsort through a stub, a thread of its own")
    func native() async throws {
        try await Self.buildAndCheck(compiler: "/usr/bin/cc") { program in try await Self.run(program, []) }
    }

    @Test("on AArch64 under qemu-user: the same checks")
    func aarch64() async throws {
        try Self.requireCrossTools()
        try await Self.buildAndCheck(compiler: Self.crossCompiler) { program in
            try await Self.run(Self.emulator, ["-L", Self.aarch64Root, program])
        }
    }

    /// Builds the checks with the stubs by `compiler`, runs the program with `run`, and expects
    /// every check to pass.
    static func buildAndCheck(compiler: String, run: (String) async throws -> CommandRunner.Output) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let program = directory.path + "/stub_abi"
        try await compile(compiler, ["-o", program, checks, sources + "/callbacks.c", sources + "/callback_stubs.S"])
        let ran = try await run(program)
        #expect(ran.status == 0, "\(ran.stdout)\(ran.stderr)")
        #expect(ran.stdout.hasPrefix("ok "), "\(ran.stdout)")
    }

    @Test("on AArch64 with BTI and PAC enforced: the stubs pass; without their landing pads they fault")
    func aarch64BranchProtection() async throws {
        try Self.requireCrossTools()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // The checks in a shared object of their own, without the C runtime's start files (Debian
        // does not build those for BTI, and the linker drops the property when any input lacks
        // it), so that the loader maps this object's code with BTI on.
        let checks = try String(contentsOfFile: Self.checks, encoding: .utf8)
            .replacingOccurrences(of: "\nint main(void) {", with: "\nint plugind_stub_abi_checks(void) {")
        try #require(checks.contains("int plugind_stub_abi_checks(void) {"))
        try Data(checks.utf8).write(to: URL(fileURLWithPath: directory.path + "/checks.c"))
        try Data("int plugind_stub_abi_checks(void);\nint main(void) { return plugind_stub_abi_checks(); }\n".utf8)
            .write(to: URL(fileURLWithPath: directory.path + "/main.c"))
        let stubs = try String(contentsOfFile: Self.sources + "/callback_stubs.S", encoding: .utf8)
        let withoutLandingPads = stubs.replacingOccurrences(of: "hint\t#34\t\t\t/* bti c */", with: "nop")
        try #require(withoutLandingPads != stubs, "the AArch64 stubs' landing pad is no longer spelled as this test expects")
        try Data(withoutLandingPads.utf8).write(to: URL(fileURLWithPath: directory.path + "/stubs_without_bti.S"))

        for (name, stubSource, passes) in [
            ("with", Self.sources + "/callback_stubs.S", true), ("without", directory.path + "/stubs_without_bti.S", false),
        ] {
            let library = directory.path + "/libchecks_\(name).so"
            try await Self.compile(
                Self.crossCompiler,
                [
                    "-fPIC", "-shared", "-nostartfiles", "-mbranch-protection=standard", "-o", library, directory.path + "/checks.c",
                    Self.sources + "/callbacks.c", stubSource,
                ])
            let notes = try await Self.run("/usr/bin/readelf", ["-n", library])
            #expect(notes.stdout.contains("AArch64 feature: BTI, PAC"), "\(name): \(notes.stdout)")
            let program = directory.path + "/main_\(name)"
            try await Self.compile(
                Self.crossCompiler, ["-o", program, directory.path + "/main.c", library, "-Wl,-rpath,\(directory.path)"])
            let ran = try await Self.run(Self.emulator, ["-cpu", "max", "-L", Self.aarch64Root, program])
            if passes {
                #expect(ran.status == 0 && ran.stdout.hasPrefix("ok "), "\(ran.stdout)\(ran.stderr)")
            } else {
                #expect(
                    ran.status != 0 && ran.stderr.contains("signal 4"), "a stub without its landing pad ran: \(ran.stdout)\(ran.stderr)")
            }
        }
    }
}
