package import Foundation
package import PlugindBundle
package import PlugindWire

/// The contents of a policy file (`policy.json`): the owner's (or administrator's) decision for
/// each plugin identifier. Written only by the owner's tools (`plugind approve`, …), read by hosts.
package struct PolicyDocument: Codable, Sendable, Equatable {
    package static let fileName = "policy.json"
    package static let currentVersion = 1

    package var version: Int = PolicyDocument.currentVersion
    package var plugins: [String: PluginPolicy] = [:]

    package init() {}
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

/// What an approval is pinned to.
package struct Approval: Codable, Sendable, Equatable {
    package var bundlePath: String
    package var libraryPath: String
    package var librarySHA256: String
    package var manifestSHA256: String
    /// File identities at approval time: while they are unchanged the bytes are too, and no
    /// hashing is needed to check the approval.
    package var libraryFile: FileIdentity
    package var manifestFile: FileIdentity
    package var permissions: Manifest.Permissions

    package init(
        bundlePath: String,
        libraryPath: String,
        librarySHA256: String,
        manifestSHA256: String,
        libraryFile: FileIdentity,
        manifestFile: FileIdentity,
        permissions: Manifest.Permissions
    ) {
        self.bundlePath = bundlePath
        self.libraryPath = libraryPath
        self.librarySHA256 = librarySHA256
        self.manifestSHA256 = manifestSHA256
        self.libraryFile = libraryFile
        self.manifestFile = manifestFile
        self.permissions = permissions
    }
}

/// Why a policy file could not be used.
package struct PolicyFileError: Error, Sendable, Equatable, CustomStringConvertible {
    package var path: String
    package var reason: String

    package var description: String { "policy file \(path) \(reason)" }
}

extension PolicyDocument {
    /// Reads `path`. A missing file is an empty policy; anything unreadable or malformed is an
    /// error (and the caller fails closed).
    package static func load(from path: String) -> Result<PolicyDocument, PolicyFileError> {
        decoded.value(at: path, decode: decode)
    }

    private static let decoded = DecodedFileCache<Result<PolicyDocument, PolicyFileError>>()

    private static func decode(_ path: String) -> DecodedFileCache<Result<PolicyDocument, PolicyFileError>>.Decoded {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch CocoaError.fileReadNoSuchFile {
            return .contents(.success(PolicyDocument()))
        } catch {
            if !FileManager.default.fileExists(atPath: path) { return .contents(.success(PolicyDocument())) }
            return .unreadable(.failure(PolicyFileError(path: path, reason: "cannot be read: \(error.localizedDescription)")))
        }
        do {
            let document = try JSONDecoder().decode(PolicyDocument.self, from: data)
            guard document.version == currentVersion else {
                return .contents(
                    .failure(
                        PolicyFileError(path: path, reason: "has version \(document.version); this plugind reads version \(currentVersion)")
                    ))
            }
            return .contents(.success(document))
        } catch {
            return .contents(.failure(PolicyFileError(path: path, reason: "is corrupt (\(Self.describe(error)))")))
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            let detail = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return detail ?? context.debugDescription
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
