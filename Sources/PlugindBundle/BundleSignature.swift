package import FoundationEssentials
import Glibc
import PlugindSystem

/// A publisher's signature of a bundle, kept in the bundle as `plugind-signature.json` (which
/// the digest leaves out): the public key, the whole-bundle digest it signs, and the Ed25519
/// signature of "plugind-bundle-signature 1\n<digest>\n".
package struct BundleSignature: Codable, Sendable, Hashable {
    package var format = 1
    package var algorithm = "ed25519"
    /// The raw public key, base64.
    package var publicKey: String
    /// `BundleDigest.digest` of the signed bundle.
    package var bundleDigest: String
    /// Base64.
    package var signature: String
    /// The last day the signature holds (YYYY-MM-DD, UTC), when the publisher set one; signed
    /// with the digest.
    package var expires: String?

    /// What a bundle's signature says about it.
    package enum Status: Sendable, Hashable {
        case unsigned
        case valid(PublisherKeys.PublicKey)
        /// A signature that does not hold, with the reason (and the key it names, if readable).
        case invalid(String, PublisherKeys.PublicKey?)

        /// The key, when the signature holds.
        package var validKey: PublisherKeys.PublicKey? {
            if case .valid(let key) = self { return key }
            return nil
        }

        /// "ed25519:… (signature valid)", "unsigned", or why the signature does not hold.
        package var description: String {
            switch self {
            case .unsigned: "unsigned"
            case .valid(let key): "\(key.fingerprint) (signature valid)"
            case .invalid(let reason, let key): "\(key.map { $0.fingerprint + " " } ?? "")(signature INVALID: \(reason))"
            }
        }
    }

    /// A signature file larger than this is not read.
    package static let maximumBytes = 16 << 10

    static func message(digest: String, expires: String?) -> [UInt8] {
        Array(("plugind-bundle-signature 1\n\(digest)\n" + (expires.map { "expires \($0)\n" } ?? "")).utf8)
    }

    /// Signs the bundle whose digest is `digest`, valid through `expires` (YYYY-MM-DD) if given.
    package static func sign(digest: String, with key: PublisherKeys.PrivateKey, expires: String? = nil) throws(PublisherKeys.Failure)
        -> BundleSignature
    {
        BundleSignature(
            publicKey: Data(try key.publicKey.raw).base64EncodedString(), bundleDigest: digest,
            signature: Data(try key.sign(message(digest: digest, expires: expires))).base64EncodedString(), expires: expires)
    }

    /// The end of `day` (YYYY-MM-DD, UTC), or nil when it is not such a date.
    package static func endOfDay(_ day: String) -> Date? {
        let digits = day.utf8.enumerated().allSatisfy { index, byte in
            index == 4 || index == 7 ? byte == UInt8(ascii: "-") : (byte >= 0x30 && byte <= 0x39)
        }
        guard day.utf8.count == 10, digits, let start = try? Date(day + "T00:00:00Z", strategy: .iso8601) else { return nil }
        return start.addingTimeInterval(86_400)
    }

    /// The JSON written into the bundle.
    package var fileContents: Data {
        get throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            return try encoder.encode(self) + Data("\n".utf8)
        }
    }

    /// Checks the signature of the bundle at `bundlePath` against `digest`, the digest of its
    /// contents as they are now. The file is read beneath the bundle, never through a symlink.
    package static func status(ofBundleAt bundlePath: String, digest: String) -> Status {
        let data: Data
        switch read(bundlePath) {
        case .none: return .unsigned
        case .failure(let reason): return .invalid(reason, nil)
        case .success(let bytes): data = bytes
        }
        guard let signature = try? StrictJSONDecoder().decode(BundleSignature.self, from: data) else {
            return .invalid("\(BundleContents.signatureFileName) is not a plugind signature", nil)
        }
        return signature.check(digest: digest)
    }

    /// Whether this signature is a valid signature of a bundle whose digest is `digest`.
    package func check(digest: String) -> Status {
        // The signature file is the publisher's: its strings reach the reason escaped, so that
        // none adds a line to what the owner reads.
        guard format == 1, algorithm == "ed25519" else {
            return .invalid("unknown signature format \(format) / \(InertText.escape(algorithm))", nil)
        }
        guard let raw = Data(base64Encoded: publicKey), let key = try? PublisherKeys.PublicKey(raw: [UInt8](raw)) else {
            return .invalid("the signature's public key is malformed", nil)
        }
        guard let signatureBytes = Data(base64Encoded: signature),
            key.verifies([UInt8](signatureBytes), of: Self.message(digest: bundleDigest, expires: expires))
        else {
            return .invalid("the signature does not match its key", key)
        }
        if let expires {
            guard let end = Self.endOfDay(expires) else {
                return .invalid("the signature's expiry '\(InertText.escape(expires))' is not a date", key)
            }
            if end <= Date() { return .invalid("the signature expired on \(InertText.escape(expires))", key) }
        }
        guard bundleDigest == digest else {
            return .invalid("the bundle changed after it was signed (a file was changed, added or removed)", key)
        }
        return .valid(key)
    }

    private enum ReadResult {
        case success(Data)
        case failure(String)
    }

    private static func read(_ bundlePath: String) -> ReadResult? {
        let directory: FileDescriptor
        do {
            directory = try FileDescriptor.open(bundlePath, O_RDONLY | O_DIRECTORY)
        } catch {
            return .failure("cannot open the bundle: \(error)")
        }
        defer { directory.close() }
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(beneath: directory, BundleContents.signatureFileName, O_RDONLY | O_NONBLOCK)
        } catch let error where error.errno == Errno(rawValue: ENOENT) {
            return nil
        } catch {
            return .failure("cannot open \(BundleContents.signatureFileName): \(error)")
        }
        defer { file.close() }
        var status = stat()
        guard fstat(file.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            return .failure("\(BundleContents.signatureFileName) is not a regular file")
        }
        guard status.st_size <= maximumBytes else {
            return .failure("\(BundleContents.signatureFileName) is larger than \(maximumBytes) bytes")
        }
        do {
            return .success(Data(try file.readToEnd(limit: maximumBytes)))
        } catch {
            return .failure("cannot read \(BundleContents.signatureFileName): \(error)")
        }
    }
}
