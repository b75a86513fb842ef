package import Foundation
package import PlugindBundle
package import PlugindEngine
import PlugindSystem
import PlugindWire

/// Changes the owner's (or, with write access, the administrator's) policy file. Used by the
/// owner's tools, never by the host API: a host cannot approve its own plugins.
package struct PolicyEditor: Sendable {
    package enum EditError: Error, Sendable, CustomStringConvertible {
        /// The existing file is unreadable or corrupt; it was left untouched.
        case corruptStore(PolicyFileError)
        /// The file or a directory above it could be changed by another user; nothing was written.
        case untrusted(PolicyFileError)
        /// `enable` needs an earlier approval.
        case neverApproved(String)
        case notInPolicy(String)
        case hashing(String)
        /// The policy would grow past what hosts read (`PolicyDocument.maximumFileBytes`); nothing
        /// was written.
        case tooLarge(path: String, bytes: Int)
        /// A name `acceptMissingLayers` may not hold; the text names the ones it may.
        case unknownLayer(String)
        case io(String)

        package var description: String {
            switch self {
            case .corruptStore(let error):
                "\(error); it was left untouched. Fix it by hand, or run 'plugind policy reset' to move it aside and start an empty one"
            case .untrusted(let error):
                "\(error); nothing was written"
            case .neverApproved(let identifier):
                "\(identifier) was never approved; run 'plugind approve \(identifier)'"
            case .notInPolicy(let identifier):
                "\(identifier) has no entry in the policy"
            case .hashing(let reason):
                "cannot hash the plugin's files: \(reason)"
            case .tooLarge(let path, let bytes):
                "policy file \(path) would grow to \(ByteCount(bytes)), past the \(ByteCount(PolicyDocument.maximumFileBytes)) hosts read; nothing was written. Revoke plugins you no longer use ('plugind revoke <identifier>') and try again"
            case .unknownLayer(let problem):
                "\(problem); nothing was written"
            case .io(let reason):
                reason
            }
        }
    }

    package let path: String
    /// The administrator's policy: every user's plugind reads it, so it is written 0644.
    package let readableByEveryone: Bool
    /// Where each decision is recorded for `plugind logs`; nil: nowhere.
    private let log: PluginLogWriter?

    package init(directory: URL, readableByEveryone: Bool = false) {
        path = directory.appendingPathComponent(PolicyDocument.fileName).path
        self.readableByEveryone = readableByEveryone
        self.log = nil
    }

    /// The editor of `host`'s administrator's policy (`administrator`) or of the owner's; each
    /// decision is recorded in the host's plugin log.
    package init(for host: AppExtensionHost, administrator: Bool) {
        path =
            (administrator ? host.administratorPolicyDirectory : host.policyDirectory)
            .appendingPathComponent(PolicyDocument.fileName).path
        readableByEveryone = administrator
        log = PluginLogWriter.forHost(host)
    }

    /// Records a decision that landed.
    private func decided(_ event: PluginLogEntry.Event, _ identifier: String, approval: Approval? = nil) {
        let whose = readableByEveryone ? "the administrator" : "the owner"
        let what: String =
            switch event {
            case .approve:
                "approved by \(whose)" + (approval.map { " (version \($0.version ?? "?"), \($0.bundleDigest ?? "no digest"))" } ?? "")
            case .disable: "disabled by \(whose)"
            case .enable: "enabled again by \(whose)"
            case .revoke: "approval revoked by \(whose)"
            default: event.rawValue
            }
        log?.submit(
            PluginLogEntry(
                priority: 5, event: event, message: what, plugin: identifier, pluginVersion: approval?.version,
                bundleDigest: approval?.bundleDigest, hostPID: getpid()))
    }

    /// Approves the entry's current bytes and permissions: a digest of every file of the bundle,
    /// and each grant as it resolves now.
    @discardableResult
    package func approve(_ entry: CatalogEntry) throws(EditError) -> Approval {
        let approval = try Self.approval(of: entry)
        try modify { document in
            document.plugins[entry.identifier] = PluginPolicy(state: .approved, approval: approval, changedAt: Self.now())
        }
        decided(.approve, entry.identifier, approval: approval)
        return approval
    }

    /// Writes an approval made earlier (the one a review showed the owner).
    package func record(_ approval: Approval, for identifier: String) throws(EditError) {
        try modify { document in
            document.plugins[identifier] = PluginPolicy(state: .approved, approval: approval, changedAt: Self.now())
        }
        decided(.approve, identifier, approval: approval)
    }

    /// What approving `entry` now would pin (`Approval.pinning`), as an edit's error.
    package static func approval(of entry: CatalogEntry) throws(EditError) -> Approval {
        do { return try Approval.pinning(entry) } catch { throw .hashing(error.message) }
    }

    /// Trusts `key` for every plugin it signs; returns its fingerprint.
    @discardableResult
    package func trust(_ key: PublisherKeys.PublicKey) throws(EditError) -> String {
        try modify { document in
            document.trustedPublishers[key.fingerprint] = TrustedPublisher(
                publicKey: Data(key.raw).base64EncodedString(), addedAt: Self.now())
        }
        return key.fingerprint
    }

    /// Stops trusting the publisher `fingerprint`; false when it was not trusted.
    package func distrust(_ fingerprint: String) throws(EditError) -> Bool {
        var removed = false
        try modify { document in removed = document.trustedPublishers.removeValue(forKey: fingerprint) != nil }
        return removed
    }

    /// Accepts `layers` (names `PolicyDocument.unknownLayerProblem` accepts) as missing on this
    /// machine: a launch no longer refuses for them. Returns those not accepted before.
    @discardableResult
    package func acceptMissing(_ layers: [String]) throws(EditError) -> [String] {
        if let problem = layers.lazy.compactMap(PolicyDocument.unknownLayerProblem).first { throw .unknownLayer(problem) }
        var added: [String] = []
        try modify { document in
            added = ConfinementLayerName.all.filter { layers.contains($0) && !document.acceptMissingLayers.contains($0) }
            // In the order the worker reports them, each once.
            document.acceptMissingLayers = ConfinementLayerName.all.filter {
                document.acceptMissingLayers.contains($0) || added.contains($0)
            }
        }
        return added
    }

    /// Stops accepting `layers` as missing: a launch refuses again when one is. Returns those
    /// that were accepted.
    @discardableResult
    package func refuseMissing(_ layers: [String]) throws(EditError) -> [String] {
        if let problem = layers.lazy.compactMap(PolicyDocument.unknownLayerProblem).first { throw .unknownLayer(problem) }
        var removed: [String] = []
        try modify { document in
            removed = document.acceptMissingLayers.filter { layers.contains($0) }
            document.acceptMissingLayers.removeAll { layers.contains($0) }
        }
        return removed
    }

    /// Disables a plugin, keeping its approval for a later `enable`.
    package func disable(_ identifier: String) throws(EditError) {
        try modify { document in
            let approval = document.plugins[identifier]?.approval
            document.plugins[identifier] = PluginPolicy(state: .disabled, approval: approval, changedAt: Self.now())
        }
        decided(.disable, identifier)
    }

    /// Re-enables a disabled plugin with the approval it had.
    package func enable(_ identifier: String) throws(EditError) {
        try modify { (document) throws(EditError) in
            guard let approval = document.plugins[identifier]?.approval else { throw .neverApproved(identifier) }
            document.plugins[identifier] = PluginPolicy(state: .approved, approval: approval, changedAt: Self.now())
        }
        decided(.enable, identifier)
    }

    /// Forgets every decision about a plugin: it is unapproved again.
    package func revoke(_ identifier: String) throws(EditError) {
        try modify { (document) throws(EditError) in
            guard document.plugins.removeValue(forKey: identifier) != nil else { throw .notInPolicy(identifier) }
        }
        decided(.revoke, identifier)
    }

    /// Moves an unreadable policy file aside (keeping it) so that a fresh one can be started.
    /// Returns where the old file went, or nil when there was nothing to move.
    package func moveCorruptStoreAside() throws(EditError) -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        if case .success = PolicyDocument.load(from: path) { return nil }
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let destination = "\(path).corrupt-\(stamp)"
        do {
            try FileManager.default.moveItem(atPath: path, toPath: destination)
        } catch {
            throw .io("cannot move \(path) aside: \(error.localizedDescription)")
        }
        return destination
    }

    private func modify(_ change: (inout PolicyDocument) throws(EditError) -> Void) throws(EditError) {
        do {
            try LockedFileUpdate.update(path, limit: PolicyDocument.maximumFileBytes, readableByEveryone: readableByEveryone) {
                existing -> (data: Data?, result: Void) in
                var document = PolicyDocument()
                // Approving into a file others can change would approve nothing of worth.
                if let problem = TrustedPath.problem(path) {
                    throw EditError.untrusted(PolicyFileError(path: path, reason: "cannot be trusted: \(problem)"))
                }
                if existing != nil {
                    switch PolicyDocument.load(from: path) {
                    case .success(let loaded): document = loaded
                    case .failure(let error) where error.reason.hasPrefix("cannot be trusted"): throw EditError.untrusted(error)
                    case .failure(let error): throw EditError.corruptStore(error)
                    }
                }
                try change(&document)
                document.version = PolicyDocument.currentVersion
                let encoded = try document.encoded()
                // A file hosts would refuse would unapprove every plugin at the next launch.
                guard encoded.count <= PolicyDocument.maximumFileBytes else { throw EditError.tooLarge(path: path, bytes: encoded.count) }
                return (encoded, ())
            }
        } catch let error as EditError {
            throw error
        } catch let error as LockedFileUpdate.Unreadable {
            // A FIFO or an oversized file where the policy goes: as a corrupt one, left untouched.
            throw .corruptStore(PolicyFileError(path: error.path, reason: error.reason.description))
        } catch {
            throw .io(String(describing: error))
        }
    }

    private static func now() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}
