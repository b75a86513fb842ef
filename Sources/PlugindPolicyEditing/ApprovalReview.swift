import Foundation
import PlugindBundle
package import PlugindEngine

/// What approving a plugin now would pin, and how that differs from the approval it had before:
/// what `plugind approve` (and the browser's review screen) shows the owner before asking, and
/// exactly what is written once the owner agrees, so that nothing read after the review can slip
/// into the approval.
package struct ApprovalReview: Sendable {
    package var entry: CatalogEntry
    /// The approval to write.
    package var approval: Approval
    /// The approval the owner gave before, if any (even an outdated one).
    package var previous: Approval?

    /// Reads and hashes every file of `entry`'s bundle now.
    package init(entry: CatalogEntry, previous: Approval?) throws(PolicyEditor.EditError) {
        self.entry = entry
        self.approval = try PolicyEditor.approval(of: entry)
        self.previous = previous
    }

    /// The approval the owner's policy (or, with `administrator`, the administrator's) holds for
    /// the plugin, approved or disabled.
    package static func previousApproval(of identifier: String, host: AppExtensionHost, administrator: Bool = false) -> Approval? {
        let snapshot = PolicySnapshot.read(for: host)
        return (administrator ? snapshot.administrator : snapshot.user).plugins[identifier]?.approval
    }

    /// What changed since `previous`, one phrase each; empty when there was none or nothing did.
    package var changes: [String] {
        guard let previous else { return [] }
        guard previous.bundleDigest != nil else {
            return ["the earlier approval (by an older plugind) pinned only the library and the manifest"]
        }
        var changes: [String] = []
        let paths = Set(previous.files.keys).union(approval.files.keys).sorted()
        for path in paths {
            switch (previous.files[path], approval.files[path]) {
            case (nil, _?): changes.append("\(path) added")
            case (_?, nil): changes.append("\(path) removed")
            case (let before?, let now?) where before != now: changes.append("\(path) changed")
            default: break
            }
        }
        if changes.isEmpty && previous.bundleDigest != approval.bundleDigest {
            changes.append("directories, symlinks or file modes changed")
        }
        let added = approval.permissions.additions(beyond: previous.permissions)
        changes += added.map { "also asks for \($0)" }
        changes += previous.permissions.additions(beyond: approval.permissions).map { "no longer asks for \($0)" }
        for (path, resolved) in approval.resolvedGrants.sorted(by: { $0.key < $1.key }) {
            if let before = previous.resolvedGrants[path], before != resolved {
                changes.append("\(path) now resolves to \(resolved) (was \(before))")
            }
        }
        return changes
    }
}
