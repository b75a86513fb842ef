import ExtensionFoundation
import Foundation
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
        EnhancedSecurity()
    }
}

@Suite("Extension point declarations")
struct ExtensionPointTests {
    @Test("a definition forms the full identifier from the host's")
    func identifiers() {
        let host = AppExtensionHost(identifier: "com.example.editor", environment: [:])
        #expect(AppExtensionPoint.textFilters.identifier(in: host) == "com.example.editor.text-filters")
        #expect(AppExtensionPoint.textFilters.name == "text-filters")
        #expect(AppExtensionPoint.textFilters.scopeRestriction == .none)
        #expect(AppExtensionPoint(identifier: "org.other.point").identifier(in: host) == "org.other.point")
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
