import Foundation
import TestSupport
import Testing

/// A host vendor's SDK, two extensions written against it and a host, each its own package
/// depending on plugind by path (Tests/Fixtures/TextTransformSDK): the extension side refines
/// `AppExtension`, the host side calls the extensions' method through a connection.
/// The time limit is a backstop: building plugind afresh as a dependency takes many minutes
/// on a loaded small machine.
@Suite("A third-party SDK in Apple's shape", .tags(.process, .slow), .timeLimit(.minutes(30)))
struct SDKPackageTests {
    /// Copies the fixture packages into `directory` with the path and identity of this plugind.
    func copyFixtures(to directory: String) throws -> String {
        let source = BuiltProducts.packageRoot + "/Tests/Fixtures/TextTransformSDK"
        let destination = directory + "/TextTransformSDK"
        // Contents only: copyItem would also copy the owner, which an ordinary user cannot set.
        let files = try FileManager.default.subpathsOfDirectory(atPath: source)
        for file in files {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: source + "/" + file, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            let target = destination + "/" + file
            try FileManager.default.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(contentsOf: URL(fileURLWithPath: source + "/" + file)).write(to: URL(fileURLWithPath: target))
        }
        let root = BuiltProducts.packageRoot
        for package in ["TextTransformKit", "Uppercase", "Reverse", "TransformHost"] {
            let manifest = destination + "/" + package + "/Package.swift"
            let text = try String(contentsOfFile: manifest, encoding: .utf8)
                .replacingOccurrences(of: "@PLUGIND_ROOT@", with: root)
                .replacingOccurrences(of: "@PLUGIND_PACKAGE@", with: (root as NSString).lastPathComponent.lowercased())
            try Data(text.utf8).write(to: URL(fileURLWithPath: manifest))
        }
        return destination
    }

    func build(_ package: String) async throws -> String {
        let built = try await CommandRunner.run(
            "/usr/bin/env", ["swift", "build", "--package-path", package], environment: ProcessInfo.processInfo.environment)
        #expect(built.status == 0, "\(built.stdout)\n\(built.stderr)")
        let binPath = try await CommandRunner.run(
            "/usr/bin/env", ["swift", "build", "--package-path", package, "--show-bin-path"],
            environment: ProcessInfo.processInfo.environment)
        return binPath.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("extensions that write only `transform` answer a host that calls `transform` through the SDK")
    func sdkExtensionsAndHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let packages = try copyFixtures(to: test.directory.path)
        for name in ["Uppercase", "Reverse"] {
            let products = try await build(packages + "/" + name)
            let bundle = try test.directory.subdirectory("bundles/\(name).appex")
            for (file, from) in [("manifest.json", packages + "/\(name)"), ("lib\(name).so", products)] {
                try Data(contentsOf: URL(fileURLWithPath: from + "/" + file)).write(to: URL(fileURLWithPath: bundle + "/" + file))
            }
            let installed = try await plugind("install", bundle, in: test)
            #expect(installed.status == 0, "\(installed.stderr)")
        }
        // The documentation's whole host programs become executables of the host package, so
        // that plugind is built once for all of them.
        let programs = try DocumentationSnippetTests.snippets().filter(\.isHostProgram)
        for (index, program) in programs.enumerated() {
            let directory = packages + "/TransformHost/Sources/Snippet\(index)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(program.code.utf8).write(to: URL(fileURLWithPath: directory + "/main.swift"))
        }
        let products = try await build(packages + "/TransformHost")
        let host = products + "/TransformHost"
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()

        let before = try await CommandRunner.run(host, ["hello"], environment: environment)
        #expect(before.status == 0, "\(before.stderr)")
        #expect(before.stdout == "unapproved: 2\n")

        for identifier in ["com.example.transforms.uppercase", "com.example.transforms.reverse"] {
            #expect(try await plugind("approve", identifier, "--yes", in: test).status == 0)
        }
        let after = try await CommandRunner.run(host, ["hello", "world"], environment: environment)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(after.stdout == "Reverse: dlrow olleh\nUppercase: HELLO WORLD\nunapproved: 0\n")
        // nil crosses the connection as nil.
        let empty = try await CommandRunner.run(host, [], environment: environment)
        #expect(empty.stdout.contains("Reverse: (nothing)\n"), "\(empty.status) \(empty.stdout) \(empty.stderr)")

        // The host written from Apple's documentation, with only the connection changed.
        environment["PLUGIND_HOST_IDENTIFIER"] = "com.example.transformer"
        let apple = try await CommandRunner.run(products + "/AppleDocumentationHost", [], environment: environment)
        #expect(apple.status == 0, "\(apple.stderr)")
        #expect(
            apple.stdout == """
                matching: Reverse, Uppercase
                availability: 2 of 2 enabled, 0 unapproved
                invalid point refused
                async: elppa
                sync: scod

                """, "\(apple.stdout)\n\(apple.stderr)")

        // The documentation's host programs, against the C text filter at the point they use
        // (their host is com.example.editor): each prints the filter's answer to its input.
        try await installApproved(
            PluginFixture(
                library: "CTextFilter", identifier: "com.example.editor.upper", extensionPoint: "com.example.editor.text-filters"),
            in: test)
        environment["PLUGIND_HOST_IDENTIFIER"] = "com.example.editor"
        #expect(programs.count >= 2)
        for (index, program) in programs.enumerated() {
            let ran = try await CommandRunner.run(products + "/Snippet\(index)", [], environment: environment)
            let input = try #require(program.code.firstMatch(of: /Array\("([^"]+)"\.utf8\)/)?.1, "\(program) sends no literal input")
            #expect(ran.status == 0, "\(program): \(ran.stderr)")
            #expect(ran.stdout.contains(input.uppercased()), "\(program) printed: \(ran.stdout)")
        }
    }
}
