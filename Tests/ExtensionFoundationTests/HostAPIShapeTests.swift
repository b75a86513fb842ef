import Foundation
import PlugindBundle
import PlugindSystem
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine
@testable import PlugindPolicyEditing

extension AppExtensionPoint {
    // Written as Apple's documentation writes a point: no Scope.
    @Definition
    static var hostsOwnPoint: AppExtensionPoint {
        Name("point")
    }

    @Definition
    static var openPoint: AppExtensionPoint {
        Name("point")
        Scope(restriction: .none)
    }

    @Definition
    static var unnamedPoint: AppExtensionPoint {
        Scope(restriction: .none)
    }

    @Definition
    static var badlyNamedPoint: AppExtensionPoint {
        Name("text filters")
    }

    @Definition
    static var versionedPoint: AppExtensionPoint {
        Name("point")
        Version("2.1")
    }

    @Definition
    static var describedPoint: AppExtensionPoint {
        Name("described")
        Scope(restriction: .none)
        EnhancedSecurity(true)
        Description("Filters that change the selected text")
        Version("2.1")
    }

    @Definition
    static var securePoint: AppExtensionPoint {
        Name("point")
        Scope(restriction: .none)
        EnhancedSecurity(true)
    }
}

/// The parts of the host API whose meaning follows Apple's: the Scope default, identities that
/// remember their host and point, the host's version, and the macOS 13 discovery calls.
@Suite("The host API in Apple's shape", .tags(.process), .timeLimit(.minutes(5)))
struct HostAPIShapeTests {
    /// A host of identifier "org.plugind.tests" with an approved external Echo ("foreign") and
    /// a bundled one ("own"), both for "org.plugind.tests.point".
    func hostWithOwnAndForeignPlugins() throws -> TestHost {
        let test = try TestHost(identifier: "org.plugind.tests")
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.own"), bundled: true)
        let foreign = PluginFixture(library: "Echo", identifier: "org.plugind.tests.foreign")
        try test.install(foreign, bundled: false)
        let entry = try #require(Inventory.take(host: test.host).item(foreign.identifier)?.entry)
        _ = try PolicyEditor(directory: test.host.policyDirectory).approve(entry)
        return test
    }

    @Test("without Scope only the host's own plugins bind, with no approval; Scope(.none) admits approved external ones")
    func scopeDefault() async throws {
        let test = try hostWithOwnAndForeignPlugins()
        defer { test.remove() }
        let own = AppExtensionPoint.Monitor(host: test.host)
        try await own.addAppExtensionPoint(.hostsOwnPoint)
        #expect(own.identities.map(\.bundleIdentifier) == ["org.plugind.tests.own"])
        #expect(own.diagnostics.map(\.kind) == [.outsideScope])
        #expect(own.diagnostics.first?.bundleIdentifier == "org.plugind.tests.foreign")

        let open = AppExtensionPoint.Monitor(host: test.host)
        try await open.addAppExtensionPoint(.openPoint)
        #expect(Set(open.identities.map(\.bundleIdentifier)) == ["org.plugind.tests.own", "org.plugind.tests.foreign"])
    }

    @Test("an identity remembers the host and point of its monitor: Apple's Configuration needs no global")
    func identityRemembersHost() async throws {
        let test = try hostWithOwnAndForeignPlugins()
        defer { test.remove() }
        #expect(AppExtensionHost.current != test.host)
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(.hostsOwnPoint)
        let identity = try #require(monitor.identities.first)

        // Exactly as on Apple platforms: the host is nowhere in the call.
        let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity, onInterruption: {})
        #expect(configuration.host == test.host)
        #expect(!configuration.requiresEnhancedSecurity)
        let process = try await AppExtensionProcess(configuration: configuration)
        #expect(try await process.makeConnection().send(Array("hello".utf8)) == Array("hello".utf8))
        await process.invalidateAndWait()

        let secure = AppExtensionPoint.Monitor(host: test.host)
        try await secure.addAppExtensionPoint(.securePoint)
        let secureIdentity = try #require(secure.identities.first)
        #expect(AppExtensionProcess.Configuration(appExtensionIdentity: secureIdentity, onInterruption: {}).requiresEnhancedSecurity)
    }

    @Test("a plugin that needs a newer host is not listed, says why, and does not launch")
    func hostVersion() async throws {
        var test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", extra: ["minimumHostVersion": "2.1.0"])
        try test.install(fixture)
        test.host.version = "2.1.0"
        let identity = try test.identity(fixture.identifier)

        test.host.version = "2.0.9"
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(.hostsOwnPoint)
        #expect(monitor.identities.isEmpty)
        #expect(monitor.diagnostics.map(\.kind) == [.requiresNewerHost])
        #expect(monitor.diagnostics.first?.message == "needs host version 2.1.0 or later; org.plugind.tests is 2.0.9")

        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity, onInterruption: {})
        configuration.host = test.host
        let error = await #expect(throws: AppExtensionError.self) { try await AppExtensionProcess(configuration: configuration) }
        #expect(error?.code == .unsupported)
        #expect(error?.reason.contains("needs host version 2.1.0") == true)
    }

    @Test("matching(appExtensionPointIDs:) and availabilityUpdates follow installs, approvals and disables")
    func macOS13Discovery() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo")
        try test.install(fixture, bundled: false)
        let host = test.host
        let identities = AppExtensionIdentity.Identities(
            points: [try AppExtensionPoint(identifier: fixture.extensionPoint, scope: .none)], host: host)
        let availability = AppExtensionIdentity.availabilityUpdates(host: host)
        let entry = try #require(Inventory.take(host: host).item(fixture.identifier)?.entry)
        let editor = PolicyEditor(directory: host.policyDirectory)
        let identifier = fixture.identifier
        try await Deadline.wait("each change to arrive") {
            var listed = identities.makeAsyncIterator()
            var counts = availability.makeAsyncIterator()
            #expect(await listed.next() == [])
            func numbers(_ availability: AppExtensionIdentity.Availability?) -> [Int]? {
                availability.map { [$0.unapprovedCount, $0.disabledCount, $0.enabledCount, $0.totalCount] }
            }
            #expect(numbers(await counts.next()) == [1, 0, 0, 1])
            _ = try editor.approve(entry)
            #expect(await listed.next()?.map(\.bundleIdentifier) == [identifier])
            let enabled = await counts.next()
            #expect(numbers(enabled) == [0, 0, 1, 1])
            #expect(enabled?.description == "1 plugin(s): 1 enabled, 0 disabled, 0 waiting for approval")
            try editor.disable(identifier)
            #expect(await listed.next() == [])
            #expect(numbers(await counts.next()) == [0, 1, 0, 1])
        }
    }

    @Test("Apple's shorter forms: a configuration without a closure, the synchronous initializer on a thread of the host's")
    func synchronousLaunch() async throws {
        let test = try hostWithOwnAndForeignPlugins()
        defer { test.remove() }
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(.hostsOwnPoint)
        let identity = try #require(monitor.identities.first)
        let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity)
        // As a host's main thread would call it: outside any task, blocking until it is loaded.
        let process = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AppExtensionProcess, any Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result { try AppExtensionProcess(configuration: configuration) })
            }
        }
        #expect(try await process.makeConnection().send(Array("sync".utf8)) == Array("sync".utf8))
        await process.invalidateAndWait()
    }

    @Test("AppExtensionPoint.Error where it applies: no name, a host without identifier, an identifier no plugin could declare")
    func pointErrors() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        await #expect(throws: AppExtensionPoint.Error.unspecifiedAppExtensionPointName) {
            try await monitor.addAppExtensionPoint(.unnamedPoint)
        }
        await #expect(throws: AppExtensionPoint.Error.invalidAppExtensionPoint) {
            try await monitor.addAppExtensionPoint(.badlyNamedPoint)
        }
        var nameless = test.host
        nameless.identifier = "my app"
        await #expect(throws: AppExtensionPoint.Error.hostMustHaveBundleIdentifier) {
            try await AppExtensionPoint.Monitor(host: nameless).addAppExtensionPoint(.hostsOwnPoint)
        }
        #expect(monitor.appExtensionPoints.isEmpty)
        #expect(Self.catchesLikeApplesSamples("not a point"))
        #expect(AppExtensionPoint.Error.invalidAppExtensionPoint.description.contains("reverse-DNS"))
    }

    /// The catch Apple's samples write. In a function of its own: written inline in the async
    /// test beside `#expect(throws:)` over the same typed error, Swift 6.3.1's compiler crashes
    /// (SIL ownership verification); the same catch in an ordinary async host function compiles.
    static func catchesLikeApplesSamples(_ identifier: String) -> Bool {
        do {
            _ = try AppExtensionPoint(identifier: identifier)
            return false
        } catch AppExtensionPoint.Error.invalidAppExtensionPoint {
            return true
        } catch {
            return false
        }
    }

    @Test("localizedName follows the host's languages, falling back to the manifest's name")
    func localizedName() async throws {
        var test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo", name: "Upper", extra: ["localizedNames": ["de": "Groß", "pt-BR": "Maiúsculas"]]))
        for (languages, expected) in [(["de_AT", "de"], "Groß"), (["pt_BR", "pt"], "Maiúsculas"), (["fr"], "Upper"), ([], "Upper")] {
            test.host.preferredLanguages = languages
            let monitor = AppExtensionPoint.Monitor(host: test.host)
            try await monitor.addAppExtensionPoint(.hostsOwnPoint)
            #expect(monitor.identities.map(\.localizedName) == [expected], "\(languages)")
        }
        #expect(AppExtensionHost(identifier: "x.y", environment: ["LANG": "de_DE.UTF-8"]).preferredLanguages == ["de_DE", "de"])
    }

    @Test("a point's version: plugins whose range leaves it out are not listed, and say why; one without a range is")
    func pointVersions() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        try test.install(
            PluginFixture(
                library: "Echo", identifier: "org.plugind.tests.v2", extra: ["extensionPointVersions": ["minimum": "2.0", "below": "3.0"]]))
        try test.install(
            PluginFixture(library: "Echo", identifier: "org.plugind.tests.v3", extra: ["extensionPointVersions": ["minimum": "3.0"]]))
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.any"))
        let monitor = AppExtensionPoint.Monitor(host: test.host)
        try await monitor.addAppExtensionPoint(.versionedPoint)
        #expect(Set(monitor.identities.map(\.bundleIdentifier)) == ["org.plugind.tests.v2", "org.plugind.tests.any"])
        let refused = monitor.diagnostics.filter { $0.kind == .incompatiblePointVersion }
        #expect(refused.map(\.bundleIdentifier) == ["org.plugind.tests.v3"])
        #expect(refused.first?.message == "supports versions 3.0 or later of the extension point; the host declares 2.1")
        // A point without a version takes every plugin, whatever range it states.
        let unversioned = AppExtensionPoint.Monitor(host: test.host)
        try await unversioned.addAppExtensionPoint(.hostsOwnPoint)
        #expect(unversioned.identities.count == 3)
        #expect(throws: AppExtensionPoint.Error.invalidAppExtensionPoint) {
            try AppExtensionPoint(identifier: "org.plugind.tests.point", version: "two")
        }
    }

    @Test("a point that requires capabilities lists only the plugins implementing all of them; identities carry them")
    func capabilities() async throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        for (name, capabilities) in [("markdown", ["text/markdown", "text/plain"]), ("plain", ["text/plain"]), ("none", [])] {
            try test.install(
                PluginFixture(library: "Echo", identifier: "org.plugind.tests.\(name)", extra: ["capabilities": capabilities]),
                bundled: true)
        }
        let markdown = AppExtensionPoint.Monitor(host: test.host)
        try await markdown.addAppExtensionPoint(.hostsOwnPoint.implementing("text/markdown"))
        #expect(markdown.identities.map(\.bundleIdentifier) == ["org.plugind.tests.markdown"])
        #expect(markdown.identities.first?.capabilities == ["text/markdown", "text/plain"])
        #expect(markdown.diagnostics.isEmpty, "a plugin the host did not ask for is not a problem")
        // All of them, not any.
        let both = AppExtensionPoint.Monitor(host: test.host)
        try await both.addAppExtensionPoint(.hostsOwnPoint.implementing("text/plain", "text/x-rust"))
        #expect(both.identities.isEmpty)
        // The same point twice, with different requirements: each plugin once.
        let either = AppExtensionPoint.Monitor(host: test.host)
        try await either.addAppExtensionPoint(.hostsOwnPoint.implementing("text/markdown"))
        try await either.addAppExtensionPoint(.hostsOwnPoint.implementing("text/plain"))
        #expect(either.identities.map(\.bundleIdentifier).sorted() == ["org.plugind.tests.markdown", "org.plugind.tests.plain"])
        // Without a requirement, every plugin of the point.
        let all = AppExtensionPoint.Monitor(host: test.host)
        try await all.addAppExtensionPoint(.hostsOwnPoint)
        #expect(all.identities.count == 3)
        #expect(Set(all.identities.map(\.capabilities)) == [["text/markdown", "text/plain"], ["text/plain"], []])
    }

    @Test("a host installs its points' descriptors with one call: what plugind reads back, rewritten only when changed, removable")
    func pointDescriptors() throws {
        let test = try TestHost(identifier: "org.plugind.tests")
        defer { test.remove() }
        let written = try test.host.installExtensionPointDescriptors([.describedPoint, .hostsOwnPoint])
        let directory = test.host.extensionPointDirectories[0]
        #expect(written.map(\.lastPathComponent) == ["org.plugind.tests.described.json", "org.plugind.tests.point.json"])
        #expect(written.allSatisfy { $0.deletingLastPathComponent().path == directory.path })
        let declared = test.host.declaredExtensionPoints
        #expect(declared.problems.isEmpty)
        let described = try #require(declared["org.plugind.tests.described"]?.descriptor)
        #expect(
            described
                == ExtensionPointDescriptor(
                    identifier: "org.plugind.tests.described", host: "org.plugind.tests", scope: "none", enhancedSecurity: true,
                    description: "Filters that change the selected text", version: "2.1"))
        #expect(declared["org.plugind.tests.point"]?.descriptor.scope == "application")
        let attributes = try FileManager.default.attributesOfItem(atPath: written[0].path)
        #expect((attributes[.posixPermissions] as? Int) == 0o644, "other users' plugind reads a system host's points")
        // Unchanged: not rewritten.
        let modified = attributes[.modificationDate] as? Date
        let inode = attributes[.systemFileNumber] as? Int
        _ = try test.host.installExtensionPointDescriptors([.describedPoint])
        let again = try FileManager.default.attributesOfItem(atPath: written[0].path)
        #expect(again[.systemFileNumber] as? Int == inode && again[.modificationDate] as? Date == modified)
        // The first directory wins for a point declared twice; a bad file is a problem, not a crash.
        let system = test.host.extensionPointDirectories[1]
        _ = try test.host.installExtensionPointDescriptors([try AppExtensionPoint(identifier: "org.plugind.tests.described")], in: system)
        try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
        try Data("{".utf8).write(to: system.appendingPathComponent("org.plugind.tests.broken.json"))
        try Data(
            ExtensionPointDescriptor(
                identifier: "org.plugind.tests.other", host: "org.plugind.tests", scope: "none", enhancedSecurity: false, description: nil,
                version: nil
            ).encoded()
        )
        .write(to: system.appendingPathComponent("org.plugind.tests.misnamed.json"))
        let both = test.host.declaredExtensionPoints
        #expect(both["org.plugind.tests.described"]?.descriptor.description == "Filters that change the selected text")
        #expect(
            both.problems.map(\.path).map { ($0 as NSString).lastPathComponent }.sorted() == [
                "org.plugind.tests.broken.json", "org.plugind.tests.misnamed.json",
            ])
        #expect(
            both.problems.contains { $0.reason == "declares 'org.plugind.tests.other', so its name must be org.plugind.tests.other.json" })
        #expect(try test.host.removeExtensionPointDescriptors([.describedPoint]).count == 1)
        #expect(test.host.declaredExtensionPoints["org.plugind.tests.described"]?.descriptor.scope == "application", "the system's remains")
        // A host without an identifier cannot declare a defined point.
        var anonymous = test.host
        anonymous.identifier = "no identifier"
        #expect(throws: AppExtensionPoint.Error.hostMustHaveBundleIdentifier) {
            try anonymous.installExtensionPointDescriptors([.describedPoint])
        }
    }

    @Test("the modules hosts link import FoundationEssentials, never all of Foundation (whose ICU data would triple libplugind)")
    func foundationEssentialsOnly() throws {
        let root = BuiltProducts.packageRoot + "/Sources/"
        var offending: [String] = []
        for module in [
            "PlugindTypes", "PlugindSystem", "PlugindWire", "PlugindBundle", "PlugindEngine", "ExtensionFoundation", "PlugindHost",
        ] {
            let enumerator = FileManager.default.enumerator(atPath: root + module)
            while let file = enumerator?.nextObject() as? String {
                guard file.hasSuffix(".swift") else { continue }
                let text = try String(contentsOfFile: root + module + "/" + file, encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let words = line.split(separator: " ")
                    if words.contains("import"), words.last == "Foundation" { offending.append("\(module)/\(file): \(line)") }
                }
            }
        }
        #expect(offending.isEmpty, "\(offending)")
    }

    @Test("the public API re-exports only the modules of its own value types")
    func reexports() throws {
        // FunctionValue and PluginLogLevel come with `import ExtensionFoundation` alone.
        let value: FunctionValue = .int32(7)
        let level: PluginLogLevel = .warning
        #expect(value.description.contains("7") && level.description == "warning")
        let sources = try FileManager.default.contentsOfDirectory(atPath: BuiltProducts.packageRoot + "/Sources/ExtensionFoundation")
        var exported: [String] = []
        for file in sources where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: BuiltProducts.packageRoot + "/Sources/ExtensionFoundation/\(file)", encoding: .utf8)
            exported += text.split(separator: "\n").filter { $0.hasPrefix("@_exported") }.map(String.init)
        }
        #expect(Set(exported) == ["@_exported public import PlugindTypes", "@_exported public import PlugindEngine"])
        // The engine's public declarations are the host's value types (HostModel/), nothing else:
        // its API for the CLI and the tests is `package`.
        let engine = BuiltProducts.packageRoot + "/Sources/PlugindEngine"
        let enumerator = FileManager.default.enumerator(atPath: engine)
        var publicOutside: [String] = []
        while let file = enumerator?.nextObject() as? String {
            guard file.hasSuffix(".swift"), !file.hasPrefix("HostModel/") else { continue }
            let text = try String(contentsOfFile: engine + "/" + file, encoding: .utf8)
            let lines = text.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("public ") }
            publicOutside += lines.map { "\(file): \($0)" }
        }
        #expect(publicOutside.isEmpty, "public outside PlugindEngine/HostModel: \(publicOutside)")
    }
}
