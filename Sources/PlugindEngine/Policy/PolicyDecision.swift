import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

/// Whether the host may use a catalog entry, and if not, why.
package enum PolicyDecision: Sendable, Equatable {
    /// Usable. `bundledWithHost` when no approval was needed.
    case available(bundledWithHost: Bool)
    case unapproved
    case disabled(byAdministrator: Bool)
    /// Refused by the administrator's rules (`rules.json`); the text names the rule.
    case denied(String)
    /// Approved once, but what was approved changed; the text says what.
    case approvalOutdated(String)

    package var isAvailable: Bool {
        if case .available = self { return true }
        return false
    }

    package var isDisabled: Bool {
        if case .disabled = self { return true }
        return false
    }
}

/// The owner's and the administrator's policy files as read at one moment, and the decisions
/// that follow from them. A file that cannot be read approves nothing (fails closed) and is
/// reported.
package struct PolicySnapshot: Sendable {
    package var user: PolicyDocument
    package var administrator: PolicyDocument
    package var rules = AdministratorRules()
    /// Where `rules` came from, for the reasons that name a rule.
    package var rulesPath = ""
    package var errors: [PolicyFileError]

    package static func read(for host: AppExtensionHost) -> PolicySnapshot {
        var errors: [PolicyFileError] = []
        let files = HostFiles.of(host)
        func load(_ path: String) -> PolicyDocument {
            switch PolicyDocument.load(from: path) {
            case .success(let document): return document
            case .failure(let error):
                errors.append(error)
                return PolicyDocument()
            }
        }
        let user = load(files.userPolicyFile)
        let administrator = load(files.administratorPolicyFile)
        var snapshot = PolicySnapshot(user: user, administrator: administrator, errors: errors)
        snapshot.rulesPath = files.administratorPolicyDirectory + "/" + AdministratorRules.fileName
        switch AdministratorRules.load(from: files.administratorPolicyDirectory) {
        case .success(let rules): snapshot.rules = rules
        case .failure(let error): snapshot.errors.append(error)
        }
        return snapshot
    }

    /// The decision for `entry`. Administrator denials win over everything; then the owner's.
    package func decision(for entry: CatalogEntry, hashes: ContentHashes = .shared) -> PolicyDecision {
        evaluate(entry, hashes: hashes).decision
    }

    /// The approval that makes `entry` available, if one does: what a launch loads and grants.
    package func approval(for entry: CatalogEntry, hashes: ContentHashes = .shared) -> Approval? {
        evaluate(entry, hashes: hashes).approval
    }

    /// The decision, the approval that makes `entry` available if one does, and the
    /// administrator's rule that allowed it if one did.
    package func evaluation(for entry: CatalogEntry, hashes: ContentHashes = .shared) -> (
        decision: PolicyDecision, approval: Approval?, allowedBy: String?
    ) {
        evaluate(entry, hashes: hashes)
    }

    private func evaluate(_ entry: CatalogEntry, hashes: ContentHashes) -> (
        decision: PolicyDecision, approval: Approval?, allowedBy: String?
    ) {
        let verdict = rules.verdict(for: entry, hashes: hashes, file: rulesPath)
        if case .denied(let reason) = verdict { return (.denied(reason), nil, nil) }
        let (decision, approval) = evaluateApprovals(entry, hashes: hashes)
        guard !decision.isAvailable, case .allowed(let rule) = verdict,
            !decision.isDisabled, let allowed = try? Approval.pinning(entry)
        else { return (decision, approval, nil) }
        return (.available(bundledWithHost: false), allowed, rule)
    }

    private func evaluateApprovals(_ entry: CatalogEntry, hashes: ContentHashes) -> (decision: PolicyDecision, approval: Approval?) {
        let identifier = entry.identifier
        let adminPolicy = administrator.plugins[identifier]
        let userPolicy = user.plugins[identifier]
        if adminPolicy?.state == .disabled { return (.disabled(byAdministrator: true), nil) }
        if userPolicy?.state == .disabled { return (.disabled(byAdministrator: false), nil) }
        if entry.root.isBundledWithHost { return (.available(bundledWithHost: true), nil) }
        // A policy file that cannot be read approves nothing external.
        if !errors.isEmpty { return (.unapproved, nil) }

        var outdated: String?
        for policy in [userPolicy, adminPolicy] {
            guard let policy, policy.state == .approved, let approval = policy.approval else { continue }
            guard let change = Self.changeSinceApproval(approval, entry: entry, hashes: hashes) else {
                return (.available(bundledWithHost: false), approval)
            }
            // Another version of an approved publisher's plugin: approved as it is if it asks
            // for no more, else the reason names the publisher or what it adds.
            switch PublisherUpdate.successor(of: approval, for: entry, hashes: hashes) {
            case .success(let successor)?: return (.available(bundledWithHost: false), successor)
            case .failure(let refusal)?: outdated = outdated ?? refusal.reason
            case nil: outdated = outdated ?? change
            }
        }
        // A publisher the owner (or administrator) trusts for all of its plugins.
        if let trusted = trustedApproval(for: entry, hashes: hashes) { return (.available(bundledWithHost: false), trusted) }
        if let outdated { return (.approvalOutdated(outdated), nil) }
        return (.unapproved, nil)
    }

    /// An approval of `entry` as it is now when its signature holds and its key is trusted.
    private func trustedApproval(for entry: CatalogEntry, hashes: ContentHashes) -> Approval? {
        let trusted = Set(user.trustedPublishers.values.map(\.publicKey) + administrator.trustedPublishers.values.map(\.publicKey))
        guard !trusted.isEmpty, !entry.bundle.usesSystemLibrary,
            let approval = try? Approval.pinning(entry), let key = approval.publisherKey, trusted.contains(key)
        else { return nil }
        return approval
    }

    /// What differs between an approval and the bundle as it is now, or nil when nothing does.
    /// Files whose identity is unchanged since they were hashed are taken as unchanged here, for
    /// listing; a launch hashes what it loads and refuses other bytes.
    package static func changeSinceApproval(_ approval: Approval, entry: CatalogEntry, hashes: ContentHashes) -> String? {
        let bundle = entry.bundle
        guard let approvedDigest = approval.bundleDigest else {
            return "it was approved by an earlier plugind, which pinned only its library and manifest"
        }
        let added = bundle.manifest.permissions.additions(beyond: approval.permissions)
        if approval.permissions != bundle.manifest.permissions {
            let detail =
                added.isEmpty ? "now: \(bundle.manifest.permissions.summary)" : "it now also asks for " + added.joined(separator: ", ")
            return "its requested permissions changed (approved: \(approval.permissions.summary); \(detail))"
        }
        let files = bundle.contents.regularFiles
        if let new = files.first(where: { approval.files[$0.path] == nil }) {
            return "\(new.path) was added to the bundle since it was approved"
        }
        let present = Set(files.map(\.path))
        if let gone = approval.files.keys.sorted().first(where: { !present.contains($0) }) {
            return "\(gone) was removed from the bundle since it was approved"
        }
        var digests: [String: String] = [:]
        for file in files {
            let path = bundle.bundlePath + "/" + file.path
            let identity = file.status.identity
            let approved = approval.files[file.path]
            if approval.fileIdentities[file.path] == identity {
                digests[file.path] = approved
            } else {
                digests[file.path] = try? hashes.digest(ofFileAtPath: path, identity: identity)
            }
            if digests[file.path] != approved {
                return "\(file.path) changed since it was approved (SHA-256 no longer matches)"
            }
        }
        // Directories, symlinks and execute bits: the listing as a whole.
        let listing = BundleDigest.listing(bundle.contents, files: digests)
        if SHA256Digest.hex(of: Data(listing.utf8)) != approvedDigest {
            return "its directories, symlinks or file modes changed since it was approved"
        }
        // A system library is pinned by its soname (in the manifest, which the digest covers)
        // and by who may change it: root, through the package manager. Its bytes are not pinned,
        // so a security update keeps the plugin usable; inspection refused the bundle already if
        // anything on the way to the file could be changed by another user.
        if let pinned = approval.systemLibrary {
            guard bundle.usesSystemLibrary else {
                return "its library is no longer the system library \(pinned.path)"
            }
        } else if bundle.usesSystemLibrary {
            return "its library is now the system library \(bundle.libraryPath)"
        }
        return nil
    }
}
