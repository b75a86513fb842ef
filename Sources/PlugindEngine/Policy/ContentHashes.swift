package import PlugindBundle
package import PlugindSystem
import PlugindWire

/// SHA-256 digests of files, remembered by file identity: a file whose identity (including its
/// change time) is unchanged has unchanged bytes and is not hashed again.
package final class ContentHashes: Sendable {
    private let digests = Locked<[FileIdentity: String]>([:])

    package init() {}

    package static let shared = ContentHashes()

    /// The digest of `path`, whose current identity is `identity`.
    package func digest(ofFileAtPath path: String, identity: FileIdentity) throws -> String {
        if let known = digests.withLock({ $0[identity] }) { return known }
        let digest = try SHA256Digest.hex(ofFileAtPath: path)
        // Only remember it if the file did not change while it was read.
        if FileStatus(path: path)?.identity == identity {
            digests.withLock { $0[identity] = digest }
        }
        return digest
    }

    /// The whole-bundle digest of `bundle` as it is now (`BundleDigest`): only files whose
    /// identity changed since they were hashed are read.
    package func digest(of bundle: InspectedBundle) throws -> BundleDigest {
        try BundleDigest.compute(bundle.contents) { file in
            try digest(ofFileAtPath: bundle.bundlePath + "/" + file.path, identity: file.status.identity)
        }
    }

    /// What `bundle`'s publisher signature says of its bytes as they are now.
    package func signature(of bundle: InspectedBundle) -> BundleSignature.Status {
        guard let digest = try? digest(of: bundle) else { return .invalid("a file of the bundle cannot be read", nil) }
        return BundleSignature.status(ofBundleAt: bundle.bundlePath, digest: digest.digest)
    }
}
