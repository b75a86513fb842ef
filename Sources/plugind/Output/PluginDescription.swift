import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import PlugindSystem
import PlugindWire

/// The lines that describe a plugin to its owner: what it is, where it lives, every file of its
/// bundle with its digest, what it asks for and how its limits are enforced. Shared by `info`,
/// `approve` and `browse`, so that the owner reviews the same facts everywhere. Every value that
/// came from the bundle is shown inert.
enum PluginDescription {
    /// "name version (identifier)" and the lines about the bundle and its request.
    static func lines(
        entry: CatalogEntry, digest: BundleDigest?, host: AppExtensionHost, approval: Approval? = nil
    ) -> [String] {
        let manifest = entry.manifest
        let bundle = entry.bundle
        let languages = LanguagePreference(tags: host.preferredLanguages)
        var lines = [
            "\(manifest.localizedName(for: languages).inert) \(manifest.version.inert) (\(manifest.identifier.inert))",
            "  extension point: \(manifest.extensionPoint.inert)"
                + (manifest.extensionPointVersions.map { " (versions \($0))" } ?? ""),
        ]
        lines.append("  declared:        \(PointDeclaration(of: manifest, in: host.declaredExtensionPoints).sentence.inert)")
        if !manifest.capabilities.isEmpty {
            lines.append("  capabilities:    \(manifest.capabilities.joined(separator: ", ").inert)")
        }
        if let text = manifest.localizedDescription(for: languages) { lines.append("  description:     \(text.inert)") }
        lines.append(
            "  bundle:          \(bundle.bundlePath.inert)" + (entry.root.isBundledWithHost ? " (bundled with the host)" : ""))
        lines.append(
            "  library:         \(bundle.libraryPath.inert)"
                + (bundle.usesSystemLibrary
                    ? " (system library \(manifest.library.inert), root-owned, updated by the system: the approval follows its updates)"
                    : ""))
        if let digest {
            lines.append("  bundle digest:   \(digest.digest)")
            let publisher = BundleSignature.status(ofBundleAt: bundle.bundlePath, digest: digest.digest)
            lines.append("  publisher:       \(publisher.description.inert)")
            lines.append("  files:")
            for file in bundle.contents.entries {
                switch file.kind {
                case .directory:
                    continue
                case .file(let isLoadable):
                    let sha = digest.files[file.path] ?? "unreadable"
                    let size = ByteCount(file.status.identity.size)
                    lines.append("    \(file.path.inert)  \(size)  sha256:\(sha)" + (isLoadable ? "  (library, loaded sealed)" : ""))
                case .symlink(let target):
                    lines.append("    \(file.path.inert) -> \(target.inert)")
                }
            }
        }
        let permissions = approval?.permissions ?? manifest.permissions
        lines.append("  permissions:     \(permissions.summary.inert)")
        for path in permissions.read + permissions.write {
            let resolved = approval?.resolvedGrants[path] ?? path
            if resolved != path { lines.append("    \(path.inert) resolves to \(resolved.inert)") }
        }
        if geteuid() == 0 && !(permissions.read + permissions.write).isEmpty {
            lines.append("    (this host runs as root: the plugin runs as nobody, and reaches a granted path only as nobody may)")
        }
        let limits = EffectiveLimits(LaunchPlan(entry: entry, host: host, approval: approval), requested: entry.manifest.limits)
        lines.append("  limits:          \(limits.summary)")
        if let capped = limits.cappedSummary { lines.append("    \(capped)") }
        let enforcement = LimitEnforcement(permissions: permissions, host: host)
        lines.append("    memory:        \(enforcement.memory)")
        lines.append("    CPU:           \(enforcement.cpu)")
        lines.append("    threads:       \(enforcement.threads)")
        if let warning = enforcement.warning { lines.append("  warning:         \(warning)") }
        return lines
    }

    /// What approving grants, exactly as it will be pinned, and what changed since an earlier
    /// approval: the text `approve` prints and `browse` shows before asking.
    static func reviewLines(_ review: ApprovalReview, host: AppExtensionHost) -> [String] {
        var lines = lines(
            entry: review.entry, digest: BundleDigest(digest: review.approval.bundleDigest ?? "", files: review.approval.files),
            host: host, approval: review.approval)
        // What changed comes first, under the name: it is what a returning owner reads for.
        var changes: [String]
        if review.previous != nil {
            changes = review.changes.map { "    \($0.inert)" }
            changes.insert(changes.isEmpty ? "  since the last approval: nothing changed" : "  since the last approval:", at: 0)
        } else {
            changes = ["  since the last approval: never approved before"]
        }
        lines.insert(contentsOf: changes, at: min(1, lines.count))
        return lines
    }
}
