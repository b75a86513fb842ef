package import FoundationEssentials
import Glibc
package import PlugindBundle
package import PlugindSystem
import PlugindWire

/// The contents of a policy file (`policy.json`): the owner's (or administrator's) decision for
/// each plugin identifier. Written only by the owner's tools (`plugind approve`, …), read by hosts.
package struct PolicyDocument: Codable, Sendable, Equatable {
    package static let fileName = "policy.json"
    /// Version 2 approvals pin every file of a bundle; version 1 files are read, and their
    /// approvals reported outdated.
    package static let currentVersion = 2
    static let readableVersions = 1...2
    /// The most of a policy file read: a file the owner (or administrator) alone can write, but
    /// which hosts read at every launch, so a FIFO or a file grown without end must not stop
    /// them. Generous, because an approval pins every file of its bundle: about 400 bytes a file,
    /// so a bundle of 1,024 files takes 400 KiB and forty of them fit. The editor writes no
    /// more than this (`PolicyEditor.EditError.tooLarge`).
    package static let maximumFileBytes = 16 << 20

    package var version: Int = PolicyDocument.currentVersion
    package var plugins: [String: PluginPolicy] = [:]
    /// Publishers whose validly signed plugins are approved without a decision per plugin, by
    /// key fingerprint.
    package var trustedPublishers: [String: TrustedPublisher] = [:]
    /// Confinement layers whose absence does not refuse a launch on this machine, by the names
    /// the worker reports (`ConfinementLayerName.all`): the worker still applies each one it
    /// can, reports it unavailable when it cannot, and the host says so. Empty: a missing layer
    /// refuses every launch of a host that requires every layer (the default). How the two
    /// files' lists combine: `MissingLayerAcceptance`.
    package var acceptMissingLayers: [String] = []
    /// In the administrator's file only: false when owners may not accept missing layers for
    /// themselves (their `acceptMissingLayers` is then not used). Nil: they may.
    package var ownersMayAcceptMissingLayers: Bool?

    package init() {}

    private enum CodingKeys: String, CodingKey {
        case version, plugins, trustedPublishers, acceptMissingLayers, ownersMayAcceptMissingLayers
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        plugins = try container.decodeIfPresent([String: PluginPolicy].self, forKey: .plugins) ?? [:]
        trustedPublishers = try container.decodeIfPresent([String: TrustedPublisher].self, forKey: .trustedPublishers) ?? [:]
        acceptMissingLayers = try container.decodeIfPresent([String].self, forKey: .acceptMissingLayers) ?? []
        ownersMayAcceptMissingLayers = try container.decodeIfPresent(Bool.self, forKey: .ownersMayAcceptMissingLayers)
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(plugins, forKey: .plugins)
        try container.encode(trustedPublishers, forKey: .trustedPublishers)
        // Absent unless stated, so that a policy without them reads as it did.
        if !acceptMissingLayers.isEmpty { try container.encode(acceptMissingLayers, forKey: .acceptMissingLayers) }
        try container.encodeIfPresent(ownersMayAcceptMissingLayers, forKey: .ownersMayAcceptMissingLayers)
    }

    /// Why `name` is not a layer `acceptMissingLayers` may name, naming the ones it may; nil
    /// when it is one.
    package static func unknownLayerProblem(_ name: String) -> String? {
        guard !ConfinementLayerName.all.contains(name) else { return nil }
        let mechanism = ConfinementLayerName.layers(ofMechanism: name).map {
            " (\(name) is a mechanism; its layers are " + $0.map { "'\($0)'" }.joined(separator: " and ") + ")"
        }
        return "'\(name)' is not a confinement layer\(mechanism ?? ""); the layers are "
            + ConfinementLayerName.all.joined(separator: ", ")
    }
}

/// A publisher the owner trusts for all of its plugins.
package struct TrustedPublisher: Codable, Sendable, Equatable {
    /// The raw Ed25519 public key, base64.
    package var publicKey: String
    /// When it was trusted (ISO 8601).
    package var addedAt: String

    package init(publicKey: String, addedAt: String) {
        self.publicKey = publicKey
        self.addedAt = addedAt
    }
}

/// The decision for one plugin.
package struct PluginPolicy: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable {
        case approved
        case disabled
    }

    package var state: State
    /// The bytes and permissions the owner approved. Kept when the plugin is disabled, so that
    /// enabling it again restores the same approval.
    package var approval: Approval?
    /// When the state last changed (ISO 8601).
    package var changedAt: String

    package init(state: State, approval: Approval?, changedAt: String) {
        self.state = state
        self.approval = approval
        self.changedAt = changedAt
    }
}

/// What an approval is pinned to: the digest of every entry of the bundle (`BundleDigest`), the
/// permissions asked for, and the owner's grants as resolved when they were approved.
package struct Approval: Codable, Sendable, Hashable {
    package var bundlePath: String
    /// `BundleDigest.digest` of the bundle approved. Nil in an approval written by an earlier
    /// plugind, which pinned only the library and the manifest: such an approval is outdated.
    package var bundleDigest: String?
    /// SHA-256 of each regular file of the bundle, by path relative to it.
    package var files: [String: String]
    /// The identity of each file when it was hashed: while one is unchanged, listing the plugin
    /// needs no hashing. A hint only; a launch hashes what it loads.
    package var fileIdentities: [String: FileIdentity]
    /// A system library named by soname (function-only bundles): the file and SHA-256 it was
    /// when approved, for `info`. Not a pin of those bytes: the approval holds while the soname
    /// resolves through files and directories only root can change (see README, Integrity).
    package var systemLibrary: PinnedFile?
    package var permissions: Manifest.Permissions
    /// Each path of `permissions.read` and `permissions.write` as resolved (symlinks followed)
    /// when the owner approved it: the worker binds these, so that a symlink planted later never
    /// redirects a grant.
    package var resolvedGrants: [String: String]
    /// The publisher's Ed25519 public key (raw, base64) when the approved bundle carried a valid
    /// signature: a later version signed by the same key that asks for no more stays approved.
    package var publisherKey: String?
    /// The limits the approved manifest asked for (nil: not recorded, by an older plugind); a
    /// publisher's update may ask for the same or lower.
    package var limits: [String: UInt64]?
    /// The version the owner approved (nil: not recorded, by an older plugind). Approvals are
    /// monotonic: a publisher's update keeps the approval only when it is strictly newer, so an
    /// older version with a known hole cannot be brought back without the owner noticing.
    package var version: String?

    package struct PinnedFile: Codable, Sendable, Hashable {
        package var path: String
        package var sha256: String
        package var identity: FileIdentity

        package init(path: String, sha256: String, identity: FileIdentity) {
            self.path = path
            self.sha256 = sha256
            self.identity = identity
        }
    }

    package init(
        bundlePath: String,
        bundleDigest: String,
        files: [String: String],
        fileIdentities: [String: FileIdentity],
        systemLibrary: PinnedFile?,
        permissions: Manifest.Permissions,
        resolvedGrants: [String: String],
        publisherKey: String? = nil,
        limits: [String: UInt64]? = nil,
        version: String? = nil
    ) {
        self.bundlePath = bundlePath
        self.bundleDigest = bundleDigest
        self.files = files
        self.fileIdentities = fileIdentities
        self.systemLibrary = systemLibrary
        self.permissions = permissions
        self.resolvedGrants = resolvedGrants
        self.publisherKey = publisherKey
        self.limits = limits
        self.version = version
    }

    private enum CodingKeys: String, CodingKey {
        case bundlePath, bundleDigest, files, fileIdentities, systemLibrary, permissions, resolvedGrants, publisherKey, limits, version
    }

    package init(from decoder: any Decoder) throws {
        // Approvals of an earlier plugind lack the bundle digest and the files; they decode, and
        // are reported outdated, rather than making the whole policy unreadable.
        let container = try decoder.container(keyedBy: CodingKeys.self)
        bundlePath = try container.decode(String.self, forKey: .bundlePath)
        bundleDigest = try container.decodeIfPresent(String.self, forKey: .bundleDigest)
        files = try container.decodeIfPresent([String: String].self, forKey: .files) ?? [:]
        fileIdentities = try container.decodeIfPresent([String: FileIdentity].self, forKey: .fileIdentities) ?? [:]
        systemLibrary = try container.decodeIfPresent(PinnedFile.self, forKey: .systemLibrary)
        permissions = try container.decode(Manifest.Permissions.self, forKey: .permissions)
        resolvedGrants = try container.decodeIfPresent([String: String].self, forKey: .resolvedGrants) ?? [:]
        publisherKey = try container.decodeIfPresent(String.self, forKey: .publisherKey)
        limits = try container.decodeIfPresent([String: UInt64].self, forKey: .limits)
        version = try container.decodeIfPresent(String.self, forKey: .version)
    }
}

/// Why a policy file could not be used.
package struct PolicyFileError: Error, Sendable, Equatable, CustomStringConvertible {
    package var path: String
    package var reason: String

    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    package var description: String { "policy file \(path) \(reason)" }
}

extension PolicyDocument {
    /// Reads `path`. A missing file is an empty policy; anything unreadable or malformed is an
    /// error (and the caller fails closed), and so is a file another user could have written or
    /// replaced (`TrustedPath`).
    package static func load(from path: String) -> Result<PolicyDocument, PolicyFileError> {
        if let problem = TrustedPath.problem(path) {
            return .failure(PolicyFileError(path: path, reason: "cannot be trusted: \(problem)"))
        }
        return decoded.value(at: path, decode: decode)
    }

    private static let decoded = DecodedFileCache<Result<PolicyDocument, PolicyFileError>>()

    private static func decode(_ path: String) -> DecodedFileCache<Result<PolicyDocument, PolicyFileError>>.Decoded {
        let bytes: [UInt8]
        do throws(RegularFileReadError) {
            // TrustedPath vetted the links on the way (an administrator may link /etc's policy).
            bytes = try FileDescriptor.readRegularFile(path, limit: maximumFileBytes, followingLinks: true)
        } catch .absent {
            return .contents(.success(PolicyDocument()))
        } catch .unreadable(let error) {
            return .unreadable(.failure(PolicyFileError(path: path, reason: "cannot be read: \(error)")))
        } catch {
            return .contents(.failure(PolicyFileError(path: path, reason: error.description)))
        }
        return .contents(decode(Data(bytes), path: path))
    }

    /// The policy in `bytes`, read from `path` (which errors name): what `load` makes of a file's
    /// bytes, and what the policy-files fuzz target feeds.
    package static func decode(_ bytes: [UInt8], path: String) -> Result<PolicyDocument, PolicyFileError> {
        decode(Data(bytes), path: path)
    }

    /// `decode(_:path:)` of the `Data` a file was read into, without copying it.
    static func decode(_ data: Data, path: String) -> Result<PolicyDocument, PolicyFileError> {
        do {
            let document = try StrictJSONDecoder().decode(PolicyDocument.self, from: data)
            guard readableVersions.contains(document.version) else {
                return .failure(
                    PolicyFileError(path: path, reason: "has version \(document.version); this plugind reads version \(currentVersion)"))
            }
            // A name this plugind does not know accepts nothing it could mean: the file is
            // refused (and approves nothing) until it is fixed, rather than read without it.
            if let problem = document.acceptMissingLayers.lazy.compactMap(unknownLayerProblem).first {
                return .failure(PolicyFileError(path: path, reason: "names an unknown layer in acceptMissingLayers: \(problem)"))
            }
            return .success(document)
        } catch {
            return .failure(PolicyFileError(path: path, reason: "is corrupt (\(Self.describe(error)))"))
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            // Not JSON: the parser's problem, with its line and column.
            return context.underlyingError.map { "\($0)" } ?? context.debugDescription
        case DecodingError.keyNotFound(let key, let context):
            return "missing key '\((context.codingPath + [key]).map(\.stringValue).joined(separator: "."))'"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type at '\(context.codingPath.map(\.stringValue).joined(separator: "."))'"
        default:
            return "\(error)"
        }
    }

    package func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self) + Data("\n".utf8)
    }
}
