import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

/// Every plugin installed for a host at one moment, with the owner's decision about each: the
/// common ground of `AppExtensionPoint.Monitor` and the owner's tools (`plugind list`).
package struct Inventory: Sendable {
    /// One valid bundle (the winner for its identifier) and whether the host may use it.
    package struct Item: Sendable {
        package var entry: CatalogEntry
        package var decision: PolicyDecision
        package var quarantine: CrashLog.Quarantine?
        /// The administrator's rule that made it available, when one did.
        package var allowedBy: String? = nil

        /// Why it may or may not be used, said once for every place that says it.
        package var explanation: PolicyExplanation {
            PolicyExplanation(decision: decision, quarantine: quarantine, identifier: entry.identifier)
        }

        package var isAvailable: Bool { explanation.isAvailable }

        /// The identity a process of `host` is configured with; `requiresEnhancedSecurity` is
        /// that of the point it was found for, which the process keeps.
        package func identity(host: AppExtensionHost, requiresEnhancedSecurity: Bool = false) -> AppExtensionIdentity {
            AppExtensionIdentity(
                bundleIdentifier: entry.manifest.identifier,
                extensionPointIdentifier: entry.manifest.extensionPoint,
                localizedName: entry.manifest.localizedName(for: LanguagePreference(tags: host.preferredLanguages)),
                bundlePath: entry.bundle.bundlePath,
                capabilities: entry.manifest.capabilities,
                host: host,
                requiresEnhancedSecurity: requiresEnhancedSecurity
            )
        }

        /// A stable word for scripts: available, unapproved, disabled, denied,
        /// approval-outdated, quarantined.
        package var stateCode: String { explanation.stateCode }

        /// Why the item is not available, or nil when it is.
        package var diagnostic: AppExtensionDiagnostic? {
            let explanation = explanation
            guard let kind = explanation.kind, let message = explanation.listing else { return nil }
            return AppExtensionDiagnostic(
                kind: kind,
                path: entry.bundle.bundlePath,
                bundleIdentifier: entry.identifier,
                extensionPointIdentifier: entry.manifest.extensionPoint,
                message: message
            )
        }
    }

    package var items: [Item]
    /// Bundles that were rejected or shadowed, and unreadable policy files.
    package var problems: [AppExtensionDiagnostic]

    package func item(_ identifier: String) -> Item? {
        items.first { $0.entry.identifier == identifier }
    }

    /// Scans the host's search roots and evaluates the policy for each bundle found.
    package static func take(host: AppExtensionHost, catalog: Catalog = .shared) -> Inventory {
        let snapshot = catalog.scan(SearchRoot.roots(of: host), storeDirectory: host.stateDirectory.path)
        let policy = PolicySnapshot.read(for: host)
        let crashLog = CrashLog(host: host)
        let crashes = crashLog.read()
        var items: [Item] = []
        items.reserveCapacity(snapshot.entries.count)
        var versionProblems: [AppExtensionDiagnostic] = []
        for entry in snapshot.entries {
            if let reason = HostCompatibility.problem(entry, host: host) {
                versionProblems.append(
                    AppExtensionDiagnostic(
                        kind: .requiresNewerHost, path: entry.bundle.bundlePath, bundleIdentifier: entry.identifier,
                        extensionPointIdentifier: entry.manifest.extensionPoint, message: reason))
                continue
            }
            let evaluation = policy.evaluation(for: entry)
            items.append(
                Item(
                    entry: entry,
                    decision: evaluation.decision,
                    quarantine: crashLog.quarantine(of: entry.identifier, bundle: entry.bundle, document: crashes),
                    allowedBy: evaluation.allowedBy
                ))
        }
        let policyProblems = policy.errors.map { error in
            AppExtensionDiagnostic(
                kind: .policyUnreadable,
                path: error.path,
                bundleIdentifier: nil,
                extensionPointIdentifier: nil,
                message: "\(error); nothing installed outside the host is approved until it is fixed (the file is left untouched)"
            )
        }
        return Inventory(items: items, problems: snapshot.diagnostics + versionProblems + policyProblems)
    }
}
