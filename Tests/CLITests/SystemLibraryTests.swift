import Foundation
import Glibc
import TestSupport
import Testing

/// Typed calls into libraries that no one here wrote, each named by its soname as a manifest
/// would (most sonames are symlinks to a versioned file, in directories reached through `/lib`),
/// checked against values known independently of this project; and the refusals of libraries
/// reached through something another user could change.
@Suite("system libraries named by soname", .tags(.process, .root), .serialized, .timeLimit(.minutes(5)))
struct SystemLibraryTests {
    struct Call: Sendable {
        var function: String
        var arguments: [String]
        /// Checks what `plugind call` printed (without the newline); nil when it holds.
        var check: @Sendable (String) -> String?
    }

    struct Library: Sendable, CustomTestStringConvertible {
        var soname: String
        /// Name, argument types, return type.
        var declarations: [(String, [String], String)]
        var calls: [Call]
        var testDescription: String { soname }

        init(_ soname: String, _ declarations: [(String, [String], String)], _ calls: [Call]) {
            self.soname = soname
            self.declarations = declarations
            self.calls = calls
        }

        var functions: [[String: Any]] {
            declarations.map { ["name": $0.0, "arguments": $0.1, "returns": $0.2] }
        }
    }

    static func equals(_ expected: String) -> @Sendable (String) -> String? {
        { $0 == expected ? nil : "expected \(expected), got \($0)" }
    }

    static func matches(_ pattern: String) -> @Sendable (String) -> String? {
        { $0.range(of: pattern, options: .regularExpression) != nil ? nil : "\($0) does not match \(pattern)" }
    }

    /// Known values: CRC-32 and Adler-32 of "hello" (as Python's zlib computes them), libm's exact
    /// results, libc's string functions; versions checked for their form, and one version
    /// function against another of the same library.
    static let libraries: [Library] = [
        Library(
            "libz.so.1",
            [
                ("zlibVersion", [], "string"), ("crc32", ["uint64", "string", "uint32"], "uint64"),
                ("adler32", ["uint64", "string", "uint32"], "uint64"),
            ],
            [
                Call(function: "zlibVersion", arguments: [], check: matches(#"^1\.[0-9]+\.[0-9]+"#)),
                Call(function: "crc32", arguments: ["0", "hello", "5"], check: equals("907060870")),
                Call(function: "adler32", arguments: ["1", "hello", "5"], check: equals("103547413")),
            ]),
        Library(
            "libsqlite3.so.0",
            [("sqlite3_libversion", [], "string"), ("sqlite3_libversion_number", [], "int32")],
            [
                Call(function: "sqlite3_libversion", arguments: [], check: matches(#"^3\.[0-9]+\.[0-9]+$"#)),
                Call(function: "sqlite3_libversion_number", arguments: [], check: matches(#"^3[0-9]{6}$"#)),
            ]),
        Library(
            "libcrypto.so.3",
            [("OpenSSL_version_num", [], "uint64"), ("OpenSSL_version", ["int32"], "string")],
            [
                // 0xMNN00PP0: major 3 for libcrypto.so.3.
                Call(
                    function: "OpenSSL_version_num", arguments: [],
                    check: { UInt64($0).map { $0 >> 28 == 3 } == true ? nil : "\($0) is not 3.x" }),
                Call(function: "OpenSSL_version", arguments: ["0"], check: matches(#"^OpenSSL 3\.[0-9]+\.[0-9]+"#)),
            ]),
        Library(
            "libm.so.6",
            [("cos", ["double"], "double"), ("pow", ["double", "double"], "double"), ("sqrt", ["double"], "double")],
            [
                Call(function: "cos", arguments: ["0"], check: equals("1.0")),
                Call(function: "pow", arguments: ["2", "10"], check: equals("1024.0")),
                Call(function: "sqrt", arguments: ["2.25"], check: equals("1.5")),
            ]),
        Library(
            "libc.so.6",
            [("strlen", ["string"], "uint64"), ("abs", ["int32"], "int32"), ("strtol", ["string", "uint64", "int32"], "int64")],
            [
                Call(function: "strlen", arguments: ["hello"], check: equals("5")),
                Call(function: "abs", arguments: ["-7"], check: equals("7")),
                Call(function: "strtol", arguments: ["ff", "0", "16"], check: equals("255")),
            ]),
    ]

    /// Writes a function-only bundle naming `soname` and approves it.
    static func approvedBundle(_ library: Library, in test: TestHost) async throws -> String {
        let identifier = "org.plugind.tests.system." + library.soname.filter { $0.isLetter || $0.isNumber }
        let bundle = test.externalRoot + "/\(library.soname).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": library.soname, "version": "1",
            "extensionPoint": "org.plugind.tests.functions", "library": library.soname, "functions": library.functions,
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let approval = try await plugind("approve", identifier, "--yes", in: test)
        guard approval.status == 0 else { throw CLIFailure(message: "approve \(identifier): \(approval.stderr)") }
        return identifier
    }

    @Test("each library's functions answer with the known values", arguments: libraries)
    func conformance(_ library: Library) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let identifier = try await Self.approvedBundle(library, in: test)
        for call in library.calls {
            let result = try await plugind(["call", identifier, call.function] + call.arguments, in: test)
            #expect(result.status == 0, "\(library.soname) \(call.function): \(result.stderr)")
            let printed = result.stdout.hasSuffix("\n") ? String(result.stdout.dropLast()) : result.stdout
            if let problem = call.check(printed) { Issue.record("\(library.soname) \(call.function): \(problem)") }
        }
        let info = try await plugind("info", identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("(system library \(library.soname), root-owned, updated by the system"), "\(info.stdout)")
    }

    @Test("a system library's approval follows the system's updates of its bytes")
    func updateKeepsApproval() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let library = Self.libraries[0]
        let identifier = try await Self.approvedBundle(library, in: test)
        // The approval as an older zlib would have left it: another file, other bytes.
        let policyPath = test.directory.path + "/config/plugind/policy.json"
        var text = try String(contentsOfFile: policyPath, encoding: .utf8)
        let pinned = try #require(text.range(of: #""sha256" *: *"[0-9a-f]{64}""#, options: .regularExpression))
        text.replaceSubrange(pinned, with: "\"sha256\": \"\(String(repeating: "0", count: 64))\"")
        text = text.replacingOccurrences(of: "libz.so.1.", with: "libz.so.0.")
        try Data(text.utf8).write(to: URL(fileURLWithPath: policyPath))
        let call = try await plugind("call", identifier, "crc32", "0", "hello", "5", in: test)
        #expect(call.status == 0, "\(call.stderr)")
        #expect(call.stdout == "907060870\n")
    }

    /// A function-only bundle whose library needs `libdep.so` from `directory`, outside the bundle,
    /// through its run path.
    static func dependentBundle(in test: TestHost, directory: String) async throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await CCompiler.sharedLibrary(
            "int dependency_value(void) { return 42; }", output: directory + "/libdep.so.1", flags: ["-Wl,-soname,libdep.so"])
        let bundle = test.externalRoot + "/dependent.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory + "/libdep.so", withDestinationPath: "libdep.so.1")
        try await CCompiler.sharedLibrary(
            "int dependency_value(void);\nint answer(void) { return dependency_value(); }",
            output: bundle + "/libmain.so", flags: ["-L\(directory)", "-ldep", "-Wl,-rpath,\(directory)"])
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.dependent", "name": "Dependent", "version": "1",
            "extensionPoint": "org.plugind.tests.functions", "library": "libmain.so",
            "functions": [["name": "answer", "arguments": [String](), "returns": "int32"]],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let approval = try await plugind("approve", "org.plugind.tests.dependent", "--yes", in: test)
        guard approval.status == 0 else { throw CLIFailure(message: "approve: \(approval.stderr)") }
        return "org.plugind.tests.dependent"
    }

    @Test("a dependency reached through a directory every user may write is refused; nothing is loaded")
    func writableDependencyDirectory() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let directory = test.directory.path + "/libraries"
        let identifier = try await Self.dependentBundle(in: test, directory: directory)
        // The positive control: the same bundle, the directory as its owner made it.
        #expect(chmod(directory, 0o755) == 0)
        let loaded = try await plugind("call", identifier, "answer", in: test)
        #expect(loaded.stdout == "42\n", "\(loaded.stderr)")

        #expect(chmod(directory, 0o777) == 0)
        let refused = try await plugind("call", identifier, "answer", in: test)
        #expect(refused.status != 0)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.contains("libmain.so needs libdep.so, which is refused"), "\(refused.stderr)")
        #expect(refused.stderr.contains("the directory \(directory) is writable by every user"), "\(refused.stderr)")
        #expect(refused.stderr.contains("mode 777"), "\(refused.stderr)")
        #expect(refused.stderr.contains("nothing was loaded"), "\(refused.stderr)")
        let verified = try await plugind("verify", test.externalRoot + "/dependent.appex", in: test)
        #expect(verified.status != 0)
        #expect(verified.stdout.contains("libdep.so, needed by libmain.so, is refused"), "\(verified.stdout)")
    }

    @Test(
        "a dependency reached through a symlink another user owns is refused",
        .enabled(if: geteuid() == 0, "making a file owned by another user needs root"))
    func foreignSymlink() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let directory = test.directory.path + "/libraries"
        let identifier = try await Self.dependentBundle(in: test, directory: directory)
        #expect(chmod(directory, 0o755) == 0)
        #expect(try await plugind("call", identifier, "answer", in: test).stdout == "42\n")
        #expect(lchown(directory + "/libdep.so", 65534, 65534) == 0)
        let refused = try await plugind("call", identifier, "answer", in: test)
        #expect(refused.status != 0)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.contains("the symlink \(directory)/libdep.so is owned by uid 65534"), "\(refused.stderr)")
    }
}
