import ExtensionFoundation
import Foundation
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
}
