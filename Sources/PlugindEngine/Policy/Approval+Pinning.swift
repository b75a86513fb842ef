import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

extension Approval {
    /// A bundle whose files could not be read to pin them.
    package struct PinningFailure: Error, Sendable {
        package var message: String
    }

    /// What approving `entry` now would pin, with the publisher's key when its signature holds.
    package static func pinning(_ entry: CatalogEntry) throws(PinningFailure) -> Approval {
        let bundle = entry.bundle
        do {
            let digest = try ContentHashes.shared.digest(of: bundle)
            var identities: [String: FileIdentity] = [:]
            for file in bundle.contents.regularFiles { identities[file.path] = file.status.identity }
            let systemLibrary =
                try bundle.usesSystemLibrary
                ? Approval.PinnedFile(
                    path: bundle.libraryPath,
                    sha256: ContentHashes.shared.digest(ofFileAtPath: bundle.libraryPath, identity: bundle.libraryStatus.identity),
                    identity: bundle.libraryStatus.identity) : nil
            let permissions = bundle.manifest.permissions
            var grants: [String: String] = [:]
            for path in permissions.read + permissions.write { grants[path] = GrantResolution.resolve(path) }
            return Approval(
                bundlePath: bundle.bundlePath,
                bundleDigest: digest.digest,
                files: digest.files,
                fileIdentities: identities,
                systemLibrary: systemLibrary,
                permissions: permissions,
                resolvedGrants: grants,
                publisherKey: BundleSignature.status(ofBundleAt: bundle.bundlePath, digest: digest.digest).validKey.map {
                    Data($0.raw).base64EncodedString()
                },
                limits: bundle.manifest.limits.recorded,
                version: bundle.manifest.version
            )
        } catch {
            throw PinningFailure(message: ErrorText.describe(error))
        }
    }
}
