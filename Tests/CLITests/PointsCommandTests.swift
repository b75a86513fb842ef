import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Extension-point descriptors at a shell: `plugind points` declares and lists them; `list
/// --all`, `verify` and `info` say which host a plugin is for, and when none is installed.
@Suite("plugind points, and what list, verify and info make of them", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct PointsCommandTests {
    struct Declared: Decodable {
        var identifier: String
        var host: String
        var scope: String
        var enhancedSecurity: Bool
        var description: String?
        var version: String?
        var path: String
    }

    /// `points list --json`.
    struct DeclaredPoints: Decodable {
        var formatVersion: Int
        var points: [Declared]
    }

    struct Listed: Decodable {
        struct Plugin: Decodable {
            var identifier: String
            var state: String
            var reason: String?
            var declaredBy: String?
        }
        var plugins: [Plugin]
    }

    @Test("points add writes a descriptor, list shows it, remove takes it away; bad input is refused with the reason")
    func addListRemove() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let added = try await plugind(
            "points", "add", "org.plugind.tests.filters", "--scope", "none", "--description", "Filters for text", "--version", "2.1",
            in: test)
        #expect(added.status == 0, "\(added.stderr)")
        let path = test.host.extensionPointDirectories[0].path + "/org.plugind.tests.filters.json"
        #expect(added.stderr.contains("Declared org.plugind.tests.filters for org.plugind.tests in \(path)"))
        let listed = try JSONDecoder().decode(
            DeclaredPoints.self, from: Data(try await plugind("points", "list", "--json", in: test).standardOutput)
        ).points
        #expect(listed.count == 1)
        #expect(listed.first?.host == "org.plugind.tests" && listed.first?.scope == "none" && listed.first?.version == "2.1")
        #expect(listed.first?.description == "Filters for text" && listed.first?.path == path)
        let text = try await plugind("points", "list", in: test)
        #expect(
            text.stdout == "org.plugind.tests.filters  declared by org.plugind.tests  (version 2.1, scope none)\n    Filters for text\n")

        let badVersion = try await plugind("points", "add", "org.plugind.tests.other", "--version", "two", in: test)
        #expect(
            badVersion.status == 64 && badVersion.stderr.contains("version must be a version such as 2.1, found 'two'"),
            "\(badVersion.stderr)")
        let badScope = try await plugind("points", "add", "org.plugind.tests.other", "--scope", "everyone", in: test)
        #expect(badScope.status == 64 && badScope.stderr.contains("--scope is application or none"))
        let badIdentifier = try await plugind("points", "add", "not a point", in: test)
        #expect(badIdentifier.status == 64 && badIdentifier.stderr.contains("is not a reverse-DNS point identifier"))

        #expect(try await plugind("points", "remove", "org.plugind.tests.filters", in: test).status == 0)
        #expect(try await plugind("points", "list", in: test).stdout == "No installed host declares an extension point.\n")
        let again = try await plugind("points", "remove", "org.plugind.tests.filters", in: test)
        #expect(again.status == 69 && again.stderr.contains("does not exist"))
    }

    @Test(
        "list --all and verify say when no installed host declares a plugin's point; a version the host does not support hides the plugin")
    func declarationsInListings() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo", identifier: "org.plugind.tests.echo")
        let old = PluginFixture(library: "Echo", identifier: "org.plugind.tests.old", extra: ["extensionPointVersions": ["below": "2.0"]])
        try await installApproved(echo, in: test)
        try await installApproved(old, in: test)
        let bundle = try echo.install(in: try test.directory.subdirectory("loose"))

        // Nothing declared yet: both listed, --all says no host declares the point.
        #expect(try await plugind("list", in: test).stdout.split(separator: "\n").count == 2)
        let undeclared = try await plugind("list", "--all", in: test)
        #expect(undeclared.stdout.contains("    no installed host declares org.plugind.tests.point"), "\(undeclared.stdout)")
        let unverified = try await plugind("verify", bundle, in: test)
        #expect(unverified.status == 0, "a warning, not a problem of the bundle")
        #expect(unverified.stdout.contains("  warning: no installed host declares org.plugind.tests.point"), "\(unverified.stdout)")

        // The host declares version 2.1 of its point.
        #expect(
            try await plugind("points", "add", "org.plugind.tests.point", "--description", "Echoes for tests", "--version", "2.1", in: test)
                .status == 0)
        #expect(try await plugind("list", in: test).stdout.hasPrefix("org.plugind.tests.echo  "))
        #expect(!(try await plugind("list", in: test).stdout.contains("org.plugind.tests.old")))
        let all = try JSONDecoder().decode(Listed.self, from: Data(try await plugind("list", "--all", "--json", in: test).standardOutput))
        let listedOld = try #require(all.plugins.first { $0.identifier == old.identifier })
        #expect(listedOld.state == "incompatible-point-version")
        #expect(listedOld.reason == "supports versions before 2.0 of the extension point; org.plugind.tests declares 2.1")
        #expect(all.plugins.first { $0.identifier == echo.identifier }?.declaredBy == "org.plugind.tests")
        let verified = try await plugind("verify", bundle, in: test)
        #expect(!verified.stdout.contains("warning: no installed host"), "\(verified.stdout)")
        let info = try await plugind("info", echo.identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("  declared:        declared by org.plugind.tests: Echoes for tests"), "\(info.stdout)")
    }
}
