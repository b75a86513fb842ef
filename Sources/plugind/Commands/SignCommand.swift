import Foundation
import Glibc
import PlugindBundle

/// `plugind sign`: a publisher's signature over every file of a bundle.
struct SignCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let key = CommandOption.value("key", "<file>", "The private key from 'plugind keygen'.")
        static let expires = CommandOption.value("expires", "<YYYY-MM-DD>", "The last day (UTC) the signature holds.")
    }

    static let description = CommandDescription(
        name: "sign",
        abstract: "Sign a plugin bundle with a publisher key.",
        usage: "<bundle> --key <file> [--expires <YYYY-MM-DD>]",
        discussion: """
            Checks the bundle as 'plugind verify' does (without running it), computes the digest of
            every file in it (the digest an approval pins) and writes the Ed25519 signature of that
            digest into the bundle as plugind-signature.json. Any later change to a file, or a file
            added or removed, makes the signature invalid, and so does the end of the --expires day
            (UTC): owners then see it expired, and 'plugind install' refuses the package. The key
            file must be readable by you alone (mode 0600).
            """,
        arguments: [("<bundle>", "The bundle directory.")],
        options: [Options.key, Options.expires]
    )

    let bundle: String
    let keyPath: String
    let expires: String?

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        bundle = try arguments.positionals(["bundle"])[0]
        guard let key = arguments.value(Options.key), !key.isEmpty else {
            throw UsageError(message: "sign needs --key <file>", command: "sign")
        }
        keyPath = key
        expires = arguments.value(Options.expires)
        if let expires, BundleSignature.endOfDay(expires) == nil {
            throw UsageError(message: "--expires takes a day such as 2027-12-31, got '\(expires)'", command: "sign")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let key = try Self.loadPrivateKey(keyPath)
        let (inspected, digest) = try SignedBundle.inspect(bundle, what: "\(bundle) cannot be signed")
        let signature: BundleSignature
        do {
            signature = try BundleSignature.sign(digest: digest.digest, with: key, expires: expires)
        } catch {
            throw CommandFailure(message: "cannot sign with \(keyPath.inert): \(error)", status: .failure)
        }
        let path = inspected.bundlePath + "/" + BundleContents.signatureFileName
        let temporary = inspected.bundlePath + "/.\(BundleContents.signatureFileName).\(getpid())"
        do {
            try signature.fileContents.write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        } catch {
            unlink(temporary)
            throw CommandFailure(message: "cannot write \(path.inert): \(error.localizedDescription)", status: .failure)
        }
        let publicKey = try? key.publicKey
        context.console.err(
            "Signed \(inspected.manifest.identifier.inert) (bundle digest \(digest.digest)) as \(publicKey?.fingerprint ?? "?").\n")
        return .success
    }

    /// Reads a private key file, refusing one that others may read or that is not the user's.
    static func loadPrivateKey(_ path: String) throws -> PublisherKeys.PrivateKey {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            throw CommandFailure(message: "cannot open the key \(path.inert): \(String(cString: strerror(errno)))", status: .failure)
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size < 1 << 16 else {
            throw CommandFailure(message: "\(path.inert) is not a key file", status: .failure)
        }
        guard status.st_uid == geteuid(), status.st_mode & 0o077 == 0 else {
            throw CommandFailure(
                message:
                    "the private key \(path.inert) may be read by others (mode \(String(status.st_mode & 0o777, radix: 8)), owner \(status.st_uid)); run 'chmod 600 \(path.inert)' as its owner",
                status: .failure)
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        guard read(fd, &bytes, bytes.count) == bytes.count else {
            throw CommandFailure(message: "cannot read \(path.inert)", status: .failure)
        }
        do {
            return try PublisherKeys.privateKey(pem: bytes)
        } catch {
            throw CommandFailure(message: "\(path.inert): \(error)", status: .failure)
        }
    }
}
