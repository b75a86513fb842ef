import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine
import TestSupport
import Testing

extension AppExtensionPoint {
    @Definition
    static var textFilters: AppExtensionPoint {
        Name("text-filters")
        Scope(restriction: .none)
    }

    @Definition
    static var ownPlugins: AppExtensionPoint {
        Name("own")
        Scope(.application)
        UserInterface(false)
        EnhancedSecurity(true)
    }

    // As Apple's sample writes a point with no Scope.
    @Definition
    static var unscoped: AppExtensionPoint {
        Name("unscoped")
    }
}

@Suite("Extension point declarations", .tags(.unit))
struct ExtensionPointTests {
    @Test("a definition forms the full identifier from the host's")
    func identifiers() throws {
        let host = AppExtensionHost(identifier: "com.example.editor", environment: [:])
        #expect(AppExtensionPoint.textFilters.identifier(in: host) == "com.example.editor.text-filters")
        #expect(AppExtensionPoint.textFilters.name == "text-filters")
        #expect(AppExtensionPoint.textFilters.scopeRestriction == .none)
        #expect(try AppExtensionPoint(identifier: "org.other.point").identifier(in: host) == "org.other.point")
    }

    @Test("without Scope a point accepts only the host's own plugins, as on Apple platforms")
    func applicationScopeByDefault() throws {
        #expect(AppExtensionPoint.unscoped.scopeRestriction == .application)
        #expect(AppExtensionPoint.Scope().restriction == .application)
        #expect(try AppExtensionPoint(identifier: "org.other.point").scopeRestriction == .application)
        #expect(try AppExtensionPoint(identifier: "org.other.point", scope: .none).scopeRestriction == .none)
        #expect(AppExtensionPoint.unscoped.requiresEnhancedSecurity == false)
    }

    @Test(
        "an identifier no plugin could declare is refused",
        arguments: ["", "filters", "com..example", "com.example.fil ters", "com.example.\u{1B}[8m"])
    func invalidIdentifier(_ identifier: String) {
        #expect(throws: AppExtensionPoint.Error.invalidAppExtensionPoint) {
            try AppExtensionPoint(identifier: identifier)
        }
    }

    @Test("points are Identifiable by their full identifier, whatever host is current; a defined one by its name")
    func identifiable() throws {
        let point = try AppExtensionPoint(identifier: "org.other.point")
        #expect(point.id == "org.other.point")
        #expect(Set([point, point].map(\.id)).count == 1)
        // Not the full identifier, which depends on the host (the global one is not changed
        // here: other suites read it).
        let defined = AppExtensionPoint.ownPlugins
        #expect(defined.id == "own")
        #expect(defined.identifier(in: AppExtensionHost(identifier: "org.other.host")) == "org.other.host.own")
    }

    @Test("identities are equal exactly when their ids are")
    func identityEqualityAgreesWithID() {
        let identity = AppExtensionIdentity(
            bundleIdentifier: "org.example.p", extensionPointIdentifier: "org.example.point", localizedName: "P", bundlePath: "/a/P.appex")
        let moved = AppExtensionIdentity(
            bundleIdentifier: "org.example.p", extensionPointIdentifier: "org.example.point", localizedName: "P", bundlePath: "/b/P.appex")
        let same = AppExtensionIdentity(
            bundleIdentifier: "org.example.p", extensionPointIdentifier: "org.example.point", localizedName: "P", bundlePath: "/a/P.appex")
        #expect((identity == moved) == (identity.id == moved.id))
        #expect(identity != moved)
        #expect(identity == same && identity.id == same.id)
        #expect(Set([identity, moved, same].map(\.id)).count == 2)
    }

    @Test("scope, user interface and enhanced security are recorded")
    func parts() {
        let point = AppExtensionPoint.ownPlugins
        #expect(point.scopeRestriction == .application)
        #expect(point.presentsUserInterface == false)
        #expect(point.requiresEnhancedSecurity)
    }

    @Test("the host configuration follows the XDG variables and PLUGIND_PATH")
    func hostDefaults() {
        let host = AppExtensionHost(
            identifier: "h.h",
            environment: ["HOME": "/home/u", "PLUGIND_PATH": "/a:/b", "XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/st"]
        )
        #expect(
            host.searchPaths.map(\.path) == [
                "/a", "/b", "/home/u/.local/share/plugind/plugins", "/usr/local/lib/plugind/plugins", "/usr/lib/plugind/plugins",
            ])
        #expect(host.policyDirectory.path == "/cfg/plugind")
        #expect(host.stateDirectory.path == "/st/plugind")
        #expect(host.administratorPolicyDirectory.path == "/etc/plugind")
        #expect(host.userPluginsDirectory.path == "/home/u/.local/share/plugind/plugins")
    }

    @Test("descriptors that are a FIFO, a link or larger than 64 KiB are refused at once, each naming why; the others are read")
    func hostileDescriptors() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("points")
        let elsewhere = try scratch.subdirectory("elsewhere")
        func descriptor(_ identifier: String) -> ExtensionPointDescriptor {
            ExtensionPointDescriptor(
                identifier: identifier, host: "org.example.host", scope: "none", enhancedSecurity: false, description: nil, version: nil)
        }
        try descriptor("org.example.host.kept").install(in: directory)
        let linked = try descriptor("org.example.host.linked").install(in: elsewhere)
        #expect(symlink(linked, directory + "/org.example.host.linked.json") == 0)
        #expect(symlink("/dev/zero", directory + "/org.example.host.zero.json") == 0)
        let fifo = directory + "/org.example.host.fifo.json"
        try HostileFile.makeFIFO(at: fifo)
        try HostileFile.makeSparse(
            at: directory + "/org.example.host.large.json", size: ExtensionPointDescriptor.maximumFileBytes + 1)

        let loaded = try await HostileFile.readPromptly("the descriptors to be read", unblocking: [fifo]) {
            DeclaredExtensionPoints.load(from: [directory])
        }
        #expect(loaded.declarations.keys.sorted() == ["org.example.host.kept"])
        let reasons = Dictionary(uniqueKeysWithValues: loaded.problems.map { ($0.path, $0.reason) })
        #expect(reasons[fifo] == "is a FIFO, not a regular file", "\(reasons)")
        #expect(reasons[directory + "/org.example.host.linked.json"]?.hasPrefix("is a symbolic link") == true, "\(reasons)")
        #expect(reasons[directory + "/org.example.host.zero.json"]?.hasPrefix("is a symbolic link") == true, "\(reasons)")
        #expect(reasons[directory + "/org.example.host.large.json"] == "is larger than 64 KiB, the most read of it", "\(reasons)")
        #expect(loaded.problems.count == 4)
        #expect(throws: ExtensionPointDescriptor.Problem.self) { try ExtensionPointDescriptor.read(atPath: fifo) }
    }

    @Test("a directory of more entries than a host installs is not read, and says so")
    func crowdedDirectory() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("points")
        try ExtensionPointDescriptor(
            identifier: "org.example.host.kept", host: "org.example.host", scope: "none", enhancedSecurity: false, description: nil,
            version: nil
        ).install(in: directory)
        #expect(DeclaredExtensionPoints.load(from: [directory])["org.example.host.kept"] != nil)
        for index in 0..<DeclaredExtensionPoints.maximumDirectoryEntries {
            let made = open(directory + "/filler-\(index)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            try #require(made >= 0)
            close(made)
        }
        let loaded = DeclaredExtensionPoints.load(from: [directory])
        #expect(loaded.declarations.isEmpty)
        #expect(loaded.problems.map(\.path) == [directory])
        #expect(loaded.problems.first?.reason.hasPrefix("holds more than 4096 entries") == true)
    }
}
