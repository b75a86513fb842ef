import Foundation
import Observation
import PlugindSystem
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Monitor engine", .tags(.unit), .serialized, .timeLimit(.minutes(3)))
struct MonitorEngineTests {
    @Test("a manifest written into a directory that appeared empty is still noticed")
    func bundleCopiedInPieces() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let engine = MonitorEngine(host: test.host)
        defer { engine.stop() }
        let (inventories, continuation) = AsyncStream.makeStream(of: Inventory.self)
        engine.onInventory = { continuation.yield($0) }
        try await engine.refreshNow()
        // The bundle's directory first, empty, as `cp -r` or an unpacking installer makes it.
        let identifier = PluginFixture(library: "Echo").identifier
        let root = test.bundledRoot
        let bundle = root + "/\(identifier).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: false)
        let identifiers = try await Deadline.wait("the monitor to follow the bundle") {
            var filled = false
            for await inventory in inventories {
                if !filled && engine.watchedPaths.contains(bundle) {
                    // Only now its contents: no event on the root announces them.
                    try PluginFixture(library: "Echo").install(in: root)
                    filled = true
                }
                if filled && !inventory.items.isEmpty { return inventory.items.map(\.entry.identifier) }
            }
            return []
        }
        #expect(identifiers == [identifier])
    }
}
