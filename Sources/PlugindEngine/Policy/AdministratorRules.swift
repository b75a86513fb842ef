import FoundationEssentials
// fnmatch(3): identifier patterns match as the shell's do, by the C library's own matcher.
import Glibc
import PlugindBundle
import PlugindSystem

/// The administrator's rules (`rules.json` in the administrator's policy directory, trusted like
/// the policy): allow or deny plugins by publisher key, identifier pattern and extension point,
/// and optionally require signatures. A deny always wins, over the owner's approvals too;
/// an allow approves what it matches as it is.
///
///     { "formatVersion": 1, "requireSignatures": true,
///       "rules": [ { "name": "no-tools", "effect": "deny", "identifier": "com.example.tools.*" },
///                  { "name": "acme", "effect": "allow", "publisher": "ed25519:…", "extensionPoint": "com.example.editor.*" } ] }
package struct AdministratorRules: Codable, Sendable, Equatable {
    package static let fileName = "rules.json"

    package struct Rule: Codable, Sendable, Equatable {
        package enum Effect: String, Codable, Sendable {
            case allow, deny
        }

        package var name: String
        package var effect: Effect
        /// Glob (`*` and `?`) on the plugin's identifier.
        package var identifier: String?
        /// Glob on the extension point the plugin serves.
        package var extensionPoint: String?
        /// Key fingerprint ("ed25519:…"): matches only a valid signature by that key.
        package var publisher: String?

        /// Whether the rule applies to `entry`; `signer` (the fingerprint of a valid signature, or
        /// nil) is asked only by a rule that names a publisher.
        func matches(_ entry: CatalogEntry, signer: () -> String?) -> Bool {
            // Identifiers are reverse-DNS names, which differ by more than case or not at all: a
            // deny of `com.evil.*` must also stop `Com.Evil.tool`.
            func glob(_ pattern: String, _ name: String) -> Bool {
                fnmatch(pattern.lowercased(), name.lowercased(), 0) == 0
            }
            if let identifier, !glob(identifier, entry.identifier) { return false }
            if let extensionPoint, !glob(extensionPoint, entry.manifest.extensionPoint) { return false }
            if let publisher, publisher != signer() { return false }
            return true
        }
    }

    package var formatVersion = 1
    package var requireSignatures = false
    package var rules: [Rule] = []

    package init(requireSignatures: Bool = false, rules: [Rule] = []) {
        self.requireSignatures = requireSignatures
        self.rules = rules
    }

    private enum CodingKeys: String, CodingKey {
        case formatVersion, requireSignatures, rules
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        formatVersion = try container.decode(Int.self, forKey: .formatVersion)
        requireSignatures = try container.decodeIfPresent(Bool.self, forKey: .requireSignatures) ?? false
        rules = try container.decodeIfPresent([Rule].self, forKey: .rules) ?? []
    }

    /// What the rules say of `entry`: a denial or an allowance, with the rule's name, or nil.
    package enum Verdict: Sendable, Equatable {
        case denied(String)
        case allowed(String)
    }

    func verdict(for entry: CatalogEntry, hashes: ContentHashes, file: String) -> Verdict? {
        guard requireSignatures || !rules.isEmpty else { return nil }
        // The signature is checked (a digest and a verification) only when a rule needs it.
        var checked: BundleSignature.Status?
        func signature() -> BundleSignature.Status {
            if let checked { return checked }
            let status = hashes.signature(of: entry.bundle)
            checked = status
            return status
        }
        let signer = { signature().validKey?.fingerprint }
        if let rule = rules.first(where: { $0.effect == .deny && $0.matches(entry, signer: signer) }) {
            return .denied("denied by the administrator's rule '\(rule.name)' (\(file))")
        }
        if requireSignatures && !entry.root.isBundledWithHost && signer() == nil {
            let why = signature() == .unsigned ? "it is unsigned" : "its signature is invalid"
            return .denied("the administrator requires signed plugins (\(file)); \(why)")
        }
        if let rule = rules.first(where: { $0.effect == .allow && $0.matches(entry, signer: signer) }) {
            return .allowed("allowed by the administrator's rule '\(rule.name)' (\(file))")
        }
        return nil
    }

    /// Reads the rules of `directory`: none when there is no file; an error (and the caller
    /// fails closed) when it cannot be read, is malformed, or could have been written by another.
    /// Read at every launch and scan: decoded again only when the file's identity changed.
    package static func load(from directory: String) -> Result<AdministratorRules, PolicyFileError> {
        let path = directory + "/" + fileName
        // Most machines have no rules: one failed lstat, not a walk up the directories.
        if case .failure(.noSuchFileOrDirectory) = FileStatus.examining(path, followingLinks: false) {
            return .success(AdministratorRules())
        }
        if let problem = TrustedPath.problem(path) {
            return .failure(PolicyFileError(path: path, reason: "cannot be trusted: \(problem)"))
        }
        return decoded.value(at: path, decode: decode)
    }

    private static let decoded = DecodedFileCache<Result<AdministratorRules, PolicyFileError>>()

    private static func decode(_ path: String) -> DecodedFileCache<Result<AdministratorRules, PolicyFileError>>.Decoded {
        let bytes: [UInt8]
        do throws(RegularFileReadError) {
            // Bounded before it is read, not after: a FIFO or a file grown without end must not
            // stop every launch. TrustedPath vetted the links on the way.
            bytes = try FileDescriptor.readRegularFile(path, limit: maximumFileBytes, followingLinks: true)
        } catch .absent {
            return .contents(.success(AdministratorRules()))
        } catch .unreadable(let error) {
            return .unreadable(.failure(PolicyFileError(path: path, reason: "cannot be read: \(error)")))
        } catch {
            return .contents(.failure(PolicyFileError(path: path, reason: error.description)))
        }
        return .contents(decode(Data(bytes), path: path))
    }

    /// The most of the rules read: rules are a few lines each.
    static let maximumFileBytes = 1 << 20

    /// The rules in `bytes`, read from `path` (which errors name): what `load` makes of a file's
    /// bytes, and what the policy-files fuzz target feeds.
    package static func decode(_ bytes: [UInt8], path: String) -> Result<AdministratorRules, PolicyFileError> {
        decode(Data(bytes), path: path)
    }

    /// `decode(_:path:)` of the `Data` a file was read into, without copying it.
    static func decode(_ data: Data, path: String) -> Result<AdministratorRules, PolicyFileError> {
        func refused(_ reason: String) -> Result<AdministratorRules, PolicyFileError> {
            .failure(PolicyFileError(path: path, reason: reason))
        }
        guard data.count <= maximumFileBytes else { return refused("is larger than \(ByteCount(maximumFileBytes))") }
        let rules: AdministratorRules
        do {
            rules = try StrictJSONDecoder().decode(AdministratorRules.self, from: data)
        } catch {
            return refused("is malformed (\(error))")
        }
        guard rules.formatVersion == 1 else { return refused("has formatVersion \(rules.formatVersion); this plugind reads 1") }
        if let rule = rules.rules.first(where: { $0.identifier == nil && $0.extensionPoint == nil && $0.publisher == nil }) {
            return refused(
                "rule '\(rule.name)' names no identifier, extension point or publisher; write \"identifier\": \"*\" to mean every plugin")
        }
        return .success(rules)
    }
}
