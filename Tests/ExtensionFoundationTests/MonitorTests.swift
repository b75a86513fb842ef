import Foundation
import Observation
import PlugindSystem
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine
@testable import PlugindPolicyEditing

@Suite("AppExtensionPoint.Monitor", .tags(.unit), .serialized, .timeLimit(.minutes(2)))
struct MonitorTests {
    /// Waits until `monitor.state` satisfies `condition`.
    func state(
        of monitor: AppExtensionPoint.Monitor,
        _ what: String,
        where condition: @escaping @Sendable (AppExtensionPoint.Monitor.State) -> Bool
    ) async throws -> AppExtensionPoint.Monitor.State {
        try await Deadline.wait(what) {
            for await state in Observations({ monitor.state }) where condition(state) {
                return state
            }
            throw Deadline.Expired(what: what)
        }
    }

    @Test("Apple's two snippets follow install, approve, disable, enable, changed bytes and removal")
    func appleSnippets() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        // The process-wide host, for Apple's snippets that name none; given back after.
        let previous = AppExtensionHost.current
        defer { AppExtensionHost.current = previous }
        AppExtensionHost.current = test.host
        let someExtensionPoint = AppExtensionPoint.textFilters
        let editor = PolicyEditor(directory: test.host.policyDirectory)

        // Get a snapshot of available extensions.
        let identitiesSnapshot = try await AppExtensionPoint.Monitor(someExtensionPoint).identities
        #expect(identitiesSnapshot.isEmpty)

        let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: someExtensionPoint)
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.echo", extensionPoint: "org.plugind.tests.text-filters")
        let bundle = try test.install(fixture, bundled: false)
        let installed = try await state(of: monitor, "the installed bundle to count as unapproved") { $0.unapprovedCount == 1 }
        #expect(installed.identities.isEmpty)
        #expect(monitor.diagnostics.map(\.kind) == [.unapproved])

        let identifier = fixture.identifier
        let entry = try #require(Inventory.take(host: test.host).item(identifier)?.entry)
        try await Deadline.wait("the monitor to follow every step") {
            var step = 0
            for await identities in Observations({ monitor.identities }) {
                switch step {
                case 0:
                    #expect(identities.isEmpty)
                    try editor.approve(entry)
                case 1:
                    #expect(identities.map(\.bundleIdentifier) == [identifier])
                    #expect(identities.first?.localizedName == "Echo")
                    #expect(identities.first?.extensionPointIdentifier == "org.plugind.tests.text-filters")
                    try editor.disable(identifier)
                case 2:
                    #expect(identities.isEmpty)
                    #expect(monitor.state.disabledCount == 1)
                    #expect(monitor.diagnostics.map(\.kind) == [.disabled])
                    try editor.enable(identifier)
                case 3:
                    #expect(identities.map(\.bundleIdentifier) == [identifier])
                    #expect(monitor.state.disabledCount == 0)
                    // Replace the library's bytes with another library.
                    let replacement = try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("CTextFilter")))
                    try replacement.write(to: URL(fileURLWithPath: bundle + "/libEcho.so"))
                default:
                    #expect(identities.isEmpty)
                    let diagnostic = try #require(monitor.diagnostics.first)
                    #expect(diagnostic.kind == .approvalOutdated)
                    #expect(diagnostic.message.contains("the approval no longer matches"))
                    #expect(diagnostic.message.contains("SHA-256 no longer matches"))
                    #expect(monitor.state.unapprovedCount == 1)
                    return
                }
                step += 1
            }
        }
        try FileManager.default.removeItem(atPath: bundle)
        let removed = try await state(of: monitor, "the removal") { $0.unapprovedCount == 0 }
        #expect(removed.identities.isEmpty)
        #expect(monitor.diagnostics.isEmpty)
    }

    @Test("add and remove are idempotent; identities span every monitored point")
    func points() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.a", extensionPoint: "org.plugind.tests.one"))
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.b", extensionPoint: "org.plugind.tests.two"))
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        #expect(monitor.identities.isEmpty)
        let one = try AppExtensionPoint(identifier: "org.plugind.tests.one")
        try await monitor.addAppExtensionPoint(one)
        try await monitor.addAppExtensionPoint(one)
        #expect(monitor.identities.map(\.bundleIdentifier) == ["org.plugind.tests.a"])
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: "org.plugind.tests.two"))
        #expect(Set(monitor.identities.map(\.bundleIdentifier)) == ["org.plugind.tests.a", "org.plugind.tests.b"])
        try await monitor.removeAppExtensionPoint(one)
        try await monitor.removeAppExtensionPoint(one)
        #expect(monitor.identities.map(\.bundleIdentifier) == ["org.plugind.tests.b"])
        #expect(monitor.appExtensionPoints.count == 1)
    }

    @Test("a point restricted to the application accepts only the host's own plugins")
    func applicationScope() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        try test.install(
            PluginFixture(library: "Echo", identifier: "org.plugind.tests.own", extensionPoint: "org.plugind.tests.own"), bundled: true)
        let external = PluginFixture(library: "Echo", identifier: "org.plugind.tests.foreign", extensionPoint: "org.plugind.tests.own")
        try test.install(external, bundled: false)
        let entry = try #require(Inventory.take(host: test.host).item(external.identifier)?.entry)
        try PolicyEditor(directory: test.host.policyDirectory).approve(entry)
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(.ownPlugins)
        #expect(monitor.identities.map(\.bundleIdentifier) == ["org.plugind.tests.own"])
        #expect(monitor.diagnostics.map(\.kind) == [.outsideScope])
    }

    @Test("a burst of file events produces one update")
    func burstCoalescing() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: "org.plugind.tests.point"))
        let updates = UpdateCounter()
        let observer = Task {
            for await state in Observations({ monitor.state }) {
                updates.record(state)
            }
        }
        defer { observer.cancel() }
        // 20 bundles copied in as fast as possible.
        let staging = try test.directory.subdirectory("staging")
        for index in 0..<20 {
            try PluginFixture(library: "Echo", identifier: "org.plugind.tests.burst\(index)").install(in: staging)
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: staging) {
            try FileManager.default.moveItem(atPath: staging + "/" + name, toPath: test.bundledRoot + "/" + name)
        }
        _ = try await state(of: monitor, "all 20 bundles") { $0.identities.count == 20 }
        // The initial value, then the burst: a handful of updates at most, never one per file.
        #expect(updates.count <= 4, "\(updates.count) updates for one burst")
    }
}

final class UpdateCounter: Sendable {
    private let counted = Locked(0)
    func record(_ state: AppExtensionPoint.Monitor.State) { counted.withLock { $0 += 1 } }
    var count: Int { counted.withLock { $0 } }
}
