import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// One line of the browser's list: a plugin, or a bundle that was rejected.
struct BrowserEntry: Equatable {
    var identifier: String
    var name: String
    var version: String
    var extensionPoint: String
    /// A word: available, unapproved, disabled, approval-outdated, quarantined, rejected.
    var state: String
    var reason: String?
    /// Bundles are not signed yet: every plugin shows "unsigned".
    var publisher: String
    var isPlugin: Bool
}

extension BrowserEntry {
    /// `publisher`: the publisher's key and whether the signature holds, or "unsigned".
    init(_ item: Inventory.Item, publisher: String) {
        let manifest = item.entry.manifest
        identifier = manifest.identifier
        name = manifest.localizedName(for: .current)
        version = manifest.version
        extensionPoint = manifest.extensionPoint
        state = item.stateCode
        reason = Self.reason(item)
        self.publisher = publisher
        isPlugin = true
    }

    /// Why the plugin is not available, naming the key that acts on it where the diagnostic
    /// names a command.
    private static func reason(_ item: Inventory.Item) -> String? {
        item.explanation.browser
    }

    /// The publisher in a few columns: the start of the key's fingerprint, "unsigned", or the
    /// fingerprint marked INVALID.
    var shortPublisher: String {
        guard publisher.hasPrefix("ed25519:") else {
            return publisher.isEmpty ? "" : publisher.split(separator: " ").first.map(String.init) ?? ""
        }
        let key = String(publisher.prefix("ed25519:".count + 12))
        return publisher.contains("INVALID") ? key + " INVALID" : key
    }

    /// A bundle that is not a usable plugin, keyed by its path (an identifier may be shadowed or
    /// unreadable).
    init(_ problem: AppExtensionDiagnostic) {
        identifier = problem.path
        name = problem.bundleIdentifier ?? (problem.path as NSString).lastPathComponent
        version = ""
        extensionPoint = problem.extensionPointIdentifier ?? ""
        switch problem.kind {
        case .shadowed: state = "shadowed"
        case .policyUnreadable: state = "policy-unreadable"
        default: state = "rejected"
        }
        reason = problem.message
        publisher = ""
        isPlugin = false
    }
}
