import ExtensionFoundation
import PlugindBundle
import PlugindEngine

/// Why a plugin is usable when its publisher's key, not an approval of the plugin itself, made
/// it so: the owner or the administrator trusts the key (`plugind trust`), or an allow rule of
/// the administrator's names it. `list --all`, `info` and their `--json` say it, so that the owner
/// sees why a plugin they never approved runs, and what would stop it.
struct PublisherTrust: Encodable, Equatable {
    /// Whose trust it is.
    enum Truster: String, Encodable {
        case owner
        case administrator
    }

    /// The key's fingerprint ("ed25519:…"), as `plugind trust list` and rules name it.
    var fingerprint: String
    /// "owner" or "administrator"; the administrator's when both trust the key, since the
    /// owner's `trust remove` would not stop the plugin.
    var trustedBy: Truster
    /// The administrator's allow rule that names the key, when a rule made the plugin usable.
    var rule: String?

    /// What `list --all` and `info` say: which key, whose trust, and how to end it.
    func sentence(allowedBy: String?) -> String {
        if let rule {
            return (allowedBy ?? "allowed by the administrator's rule '\(rule)'") + ", which names its publisher \(fingerprint)"
        }
        switch trustedBy {
        case .owner: return "its publisher \(fingerprint) is trusted by the owner; 'plugind trust remove \(fingerprint)' ends it"
        case .administrator: return "its publisher \(fingerprint) is trusted by the administrator"
        }
    }

    /// The trust that makes `item` usable under `policy`, or nil when something else does (the
    /// owner's or the administrator's approval of the plugin, its host bundling it, a rule that
    /// names no publisher) or it is not usable.
    static func of(_ item: Inventory.Item, policy: PolicySnapshot, hashes: ContentHashes = .shared) -> PublisherTrust? {
        guard case .available(bundledWithHost: false) = item.decision else { return nil }
        let entry = item.entry
        if let allowedBy = item.allowedBy {
            // The rule that allowed it is the first allow rule that matches; the reason names it.
            guard let rule = policy.rules.rules.first(where: { $0.effect == .allow && allowedBy.contains("rule '\($0.name)' (") }),
                let publisher = rule.publisher, hashes.signature(of: entry.bundle).validKey?.fingerprint == publisher
            else { return nil }
            return PublisherTrust(fingerprint: publisher, trustedBy: .administrator, rule: rule.name)
        }
        let (owner, administrator) = (policy.user.trustedPublishers, policy.administrator.trustedPublishers)
        guard !owner.isEmpty || !administrator.isEmpty, let key = policy.approval(for: entry, hashes: hashes)?.publisherKey else {
            return nil
        }
        let byAdministrator = administrator.first { $0.value.publicKey == key }?.key
        let byOwner = owner.first { $0.value.publicKey == key }?.key
        guard let fingerprint = byAdministrator ?? byOwner else { return nil }
        // Usable without any trust (an approval of its own, or of an earlier version by the same
        // key): then the trust is not why.
        var untrusted = policy
        untrusted.user.trustedPublishers = [:]
        untrusted.administrator.trustedPublishers = [:]
        untrusted.rules = AdministratorRules()
        guard !untrusted.decision(for: entry, hashes: hashes).isAvailable else { return nil }
        return PublisherTrust(fingerprint: fingerprint, trustedBy: byAdministrator != nil ? .administrator : .owner)
    }
}
