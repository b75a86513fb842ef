import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@Suite("plugind list, approve, disable, enable, revoke", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct PolicyCommandTests {
    struct ListDocument: Decodable {
        struct Plugin: Decodable {
            var identifier: String
            var name: String
            var version: String
            var extensionPoint: String
            var capabilities: [String]
            var bundlePath: String
            var libraryPath: String
            var state: String
            var reason: String?
            var bundledWithHost: Bool
            var functions: [String]
        }

        struct Problem: Decodable {
            var kind: String
            var path: String
            var identifier: String?
            var message: String
        }

        var formatVersion: Int
        var plugins: [Plugin]
        var problems: [Problem]
    }

    @Test("list --json follows the documented format, with --all adding unavailable plugins and their reasons")
    func listJSON() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let pending = PluginFixture(library: "CTextFilter")
        try test.install(pending, bundled: false)
        try FileManager.default.createDirectory(atPath: test.externalRoot + "/broken", withIntermediateDirectories: true)
        try Data("{".utf8).write(to: URL(fileURLWithPath: test.externalRoot + "/broken/manifest.json"))

        let available = try JSONDecoder().decode(
            ListDocument.self, from: Data(try await plugind("list", "--json", in: test).standardOutput))
        #expect(available.formatVersion == 1)
        #expect(available.plugins.map(\.identifier) == [echo.identifier])
        #expect(available.plugins[0].state == "available")
        #expect(available.problems.isEmpty)

        let all = try JSONDecoder().decode(
            ListDocument.self, from: Data(try await plugind("list", "--all", "--json", in: test).standardOutput))
        #expect(Set(all.plugins.map(\.identifier)) == [echo.identifier, pending.identifier])
        let unapproved = try #require(all.plugins.first { $0.identifier == pending.identifier })
        #expect(unapproved.state == "unapproved")
        #expect(unapproved.reason?.contains("plugind approve") == true)
        #expect(all.problems.map(\.kind) == ["invalid-manifest"])
        #expect(all.problems[0].path == test.externalRoot + "/broken")

        let text = try await plugind("list", in: test)
        #expect(text.stdout.hasPrefix("\(echo.identifier)  1.0.0  Echo  [org.plugind.tests.point]"))
        #expect(text.stderr.contains("2 more installed plugin(s) are not available; see 'plugind list --all'"))
    }

    @Test("list --capability keeps the plugins implementing every capability named; info and --json show them")
    func listByCapability() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let markdown = PluginFixture(
            library: "Echo", identifier: "org.plugind.tests.markdown", extra: ["capabilities": ["text/markdown", "text/plain"]])
        let plain = PluginFixture(library: "Echo", identifier: "org.plugind.tests.plain", extra: ["capabilities": ["text/plain"]])
        try await installApproved(markdown, in: test)
        try await installApproved(plain, in: test)
        func listed(_ arguments: String...) async throws -> [String] {
            let output = try await plugind(["list", "--json"] + arguments, in: test)
            return try JSONDecoder().decode(ListDocument.self, from: Data(output.standardOutput)).plugins.map(\.identifier).sorted()
        }
        #expect(try await listed("--capability", "text/plain") == [markdown.identifier, plain.identifier])
        #expect(try await listed("--capability", "text/markdown") == [markdown.identifier])
        #expect(try await listed("--capability", "text/plain", "--capability", "text/html").isEmpty)
        let document = try JSONDecoder().decode(
            ListDocument.self, from: Data(try await plugind("list", "--json", in: test).standardOutput))
        #expect(document.plugins.first { $0.identifier == markdown.identifier }?.capabilities == ["text/markdown", "text/plain"])
        let info = try await plugind("info", markdown.identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("  capabilities:    text/markdown, text/plain"), "\(info.stdout)")
    }

    @Test("two approve processes at the same time for different plugins both land on disk")
    func concurrentApprovals() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let first = PluginFixture(library: "Echo", identifier: "org.plugind.tests.first")
        let second = PluginFixture(library: "Echo", identifier: "org.plugind.tests.second")
        for round in 0..<5 {
            try test.install(first, bundled: false)
            try test.install(second, bundled: false)
            let (firstID, secondID) = (first.identifier, second.identifier)
            async let a = plugind("approve", firstID, "--yes", in: test)
            async let b = plugind("approve", secondID, "--yes", in: test)
            let (resultA, resultB) = try await (a, b)
            #expect(resultA.status == 0 && resultB.status == 0, "round \(round): \(resultA.stderr) \(resultB.stderr)")
            let policy =
                try JSONSerialization.jsonObject(with: Data(contentsOf: test.host.policyDirectory.appendingPathComponent("policy.json")))
                as? [String: Any]
            let plugins = policy?["plugins"] as? [String: Any] ?? [:]
            #expect(Set(plugins.keys) == [first.identifier, second.identifier], "round \(round)")
            _ = try await plugind("revoke", first.identifier, in: test)
            _ = try await plugind("revoke", second.identifier, in: test)
        }
    }

    @Test("a truncated policy file: nothing external runs, the file is unchanged, list names it, approve refuses")
    func truncatedPolicy() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let policy = test.host.policyDirectory.appendingPathComponent("policy.json")
        let bytes = try Data(contentsOf: policy)
        let truncated = bytes.prefix(40)
        try truncated.write(to: policy)

        let run = try await plugind("run", echo.identifier, "x", in: test)
        #expect(run.status == 77)
        let list = try await plugind("list", "--all", in: test)
        #expect(list.stdout.contains("policy-unreadable"))
        #expect(list.stdout.contains(policy.path))
        let approve = try await plugind("approve", echo.identifier, "--yes", in: test)
        #expect(approve.status == 1)
        #expect(approve.stderr.contains("is corrupt"))
        #expect(approve.stderr.contains("plugind policy reset"))
        #expect(try Data(contentsOf: policy) == truncated)

        let reset = try await plugind("policy", "reset", in: test)
        #expect(reset.status == 0)
        #expect(reset.stderr.contains("policy.json.corrupt-"))
        #expect(try await plugind("approve", echo.identifier, "--yes", in: test).status == 0)
        #expect(try await plugind("run", echo.identifier, "ok", in: test).stdout == "ok")
    }

    @Test("disable, enable and revoke change what runs")
    func stateChanges() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        #expect(try await plugind("disable", echo.identifier, in: test).status == 0)
        let disabled = try await plugind("run", echo.identifier, "x", in: test)
        #expect(disabled.status == 77)
        #expect(disabled.stderr.contains("is disabled"))
        #expect(try await plugind("enable", echo.identifier, in: test).status == 0)
        #expect(try await plugind("run", echo.identifier, "x", in: test).stdout == "x")
        #expect(try await plugind("revoke", echo.identifier, in: test).status == 0)
        #expect(try await plugind("run", echo.identifier, "x", in: test).status == 77)
        let never = try await plugind("enable", echo.identifier, in: test)
        #expect(never.status == 1)
        #expect(never.stderr.contains("was never approved"))
    }

    @Test("approve without --yes and without a terminal refuses and asks for --yes")
    func approveNeedsConfirmation() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try test.install(echo, bundled: false)
        let result = try await plugind("approve", echo.identifier, in: test)
        #expect(result.status == 64)
        #expect(result.stderr.contains("bundle digest:"))
        #expect(result.stderr.contains("libEcho.so  "))
        #expect(result.stderr.contains("permissions:     none"))
        #expect(result.stderr.contains("pass --yes"))
    }
}
