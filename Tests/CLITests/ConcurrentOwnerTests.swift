import ExtensionFoundation
import Foundation
import Observation
import PlugindEngine
import TestSupport
import Testing

/// Many owner processes at once: 16 `plugind` processes deciding about 16 plugins (and installing
/// and removing them) in parallel while a Monitor watches. No decision is lost to another
/// process's write (the policy file's lock serialises the read-modify-write), and the Monitor
/// converges to what the last decision of each plugin says, as does the next process.
@Suite("Concurrent owners", .tags(.process), .timeLimit(.minutes(5)))
struct ConcurrentOwnerTests {
    static let point = "org.plugind.tests.point"

    /// The plugins' states as the next process lists them, by identifier.
    static func listedStates(_ test: TestHost) async throws -> [String: String] {
        let list = try await plugind("list", "--all", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(list.standardOutput)) as? [String: Any]
        var states: [String: String] = [:]
        for plugin in document?["plugins"] as? [[String: Any]] ?? [] {
            if let identifier = plugin["identifier"] as? String { states[identifier] = plugin["state"] as? String }
        }
        return states
    }

    /// Waits until the Monitor lists exactly `available` and counts `disabled` and `unapproved`.
    static func converge(_ monitor: AppExtensionPoint.Monitor, available: Set<String>, disabled: Int, unapproved: Int) async throws {
        try await Deadline.wait("the Monitor to converge") {
            for await state in Observations({ monitor.state })
            where Set(state.identities.map(\.bundleIdentifier)) == available && state.disabledCount == disabled
                && state.unapprovedCount == unapproved
            {
                return
            }
        }
    }

    /// Runs each list of commands in a process of its own, one after another, all lists at once;
    /// returns every failure.
    static func runAtOnce(_ lists: [[[String]]], in test: TestHost) async throws -> [String] {
        try await withThrowingTaskGroup(of: [String].self) { group in
            for commands in lists {
                group.addTask {
                    var failures: [String] = []
                    for arguments in commands {
                        let run = try await plugind(arguments, in: test)
                        if run.status != 0 { failures.append("\(arguments.joined(separator: " ")): \(run.status) \(run.stderr)") }
                    }
                    return failures
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }

    @Test("16 processes approving, disabling, enabling and revoking 16 plugins at once: every last decision holds, the Monitor converges")
    func decisionsAtOnce() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let plugins = (0..<16).map { PluginFixture(library: "Echo", identifier: "org.plugind.tests.owner\($0)") }
        for plugin in plugins { try test.install(plugin, bundled: false) }
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: Self.point, scope: .none))
        try await Self.converge(monitor, available: [], disabled: 0, unapproved: 16)

        // Four walks, each ending in another state.
        let walks: [(steps: [String], final: String)] = [
            (["approve", "disable", "enable"], "available"),
            (["approve", "disable"], "disabled"),
            (["approve", "disable", "enable", "revoke"], "unapproved"),
            (["approve", "revoke", "approve", "disable", "enable"], "available"),
        ]
        let lists = plugins.enumerated().map { index, plugin in
            walks[index % walks.count].steps.map { step in
                step == "approve" ? [step, plugin.identifier, "--yes"] : [step, plugin.identifier]
            }
        }
        let failures = try await Self.runAtOnce(lists, in: test)
        #expect(failures.isEmpty, "\(failures)")

        var expected: [String: String] = [:]
        for (index, plugin) in plugins.enumerated() { expected[plugin.identifier] = walks[index % walks.count].final }
        #expect(try await Self.listedStates(test) == expected)
        let available = Set(expected.filter { $0.value == "available" }.keys)
        try await Self.converge(
            monitor, available: available, disabled: expected.values.filter { $0 == "disabled" }.count,
            unapproved: expected.values.filter { $0 == "unapproved" }.count)
    }

    @Test("16 processes installing 16 plugins at once, then 8 uninstalling: each lands or leaves whole, the Monitor converges")
    func installsAtOnce() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let work = try test.directory.subdirectory("work")
        let plugins = (0..<16).map { PluginFixture(library: "Echo", identifier: "org.plugind.tests.installed\($0)") }
        let bundles = try plugins.map { try $0.install(in: work) }
        // The Monitor's host looks where plugind install puts bundles (the CLI's XDG_DATA_HOME).
        let directory = test.directory.path + "/data/plugind/plugins"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var host = test.host
        host.searchPaths = [URL(fileURLWithPath: directory)]
        let monitor = AppExtensionPoint.Monitor(host: host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: Self.point, scope: .none))

        var failures = try await Self.runAtOnce(bundles.map { [["install", $0]] }, in: test)
        #expect(failures.isEmpty, "\(failures)")
        #expect(try await Self.listedStates(test) == Dictionary(uniqueKeysWithValues: plugins.map { ($0.identifier, "unapproved") }))
        try await Self.converge(monitor, available: [], disabled: 0, unapproved: 16)

        let removed = plugins.enumerated().filter { $0.offset.isMultiple(of: 2) }.map(\.element.identifier)
        failures = try await Self.runAtOnce(removed.map { [["uninstall", $0]] }, in: test)
        #expect(failures.isEmpty, "\(failures)")
        let kept = plugins.map(\.identifier).filter { !removed.contains($0) }
        #expect(try await Self.listedStates(test) == Dictionary(uniqueKeysWithValues: kept.map { ($0, "unapproved") }))
        try await Self.converge(monitor, available: [], disabled: 0, unapproved: kept.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == kept.map { $0 + ".appex" }.sorted())
    }
}
