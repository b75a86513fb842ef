import Foundation
import Glibc
import PlugindBundle

/// `plugind keygen`: a publisher's Ed25519 key pair.
struct KeygenCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let output = CommandOption.value("output", "<file>", "Where to write the private key (the public key goes to <file>.pub).")
    }

    static let description = CommandDescription(
        name: "keygen",
        abstract: "Make a publisher key pair for signing plugins.",
        usage: "--output <file>",
        discussion: """
            Writes an Ed25519 private key to <file> (PEM PKCS#8, mode 0600; an existing file is
            never overwritten) and its public key to <file>.pub, and prints the key's fingerprint.
            The private key is never printed. Sign bundles with 'plugind sign <bundle> --key
            <file>'; hand out <file>.pub so owners can trust you ('plugind trust add').
            """,
        options: [Options.output]
    )

    let output: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        guard let output = arguments.value(Options.output), !output.isEmpty else {
            throw UsageError(message: "keygen needs --output <file>", command: "keygen")
        }
        self.output = output
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let pair: (privatePEM: String, publicKey: PublisherKeys.PublicKey)
        do {
            pair = try PublisherKeys.generate()
        } catch {
            throw CommandFailure(message: "cannot make a key: \(error)", status: .failure)
        }
        try Self.create(output, contents: pair.privatePEM, mode: 0o600)
        do {
            try Self.create(output + ".pub", contents: try pair.publicKey.pem, mode: 0o644)
        } catch {
            unlink(output)
            throw error
        }
        context.console.err("Wrote the private key \(output.inert) (mode 0600) and the public key \(output.inert).pub.\n")
        context.console.out("\(pair.publicKey.fingerprint)\n")
        return .success
    }

    /// Creates `path` with `mode`, refusing to replace anything already there.
    static func create(_ path: String, contents: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            let reason = errno == EEXIST ? "it already exists (keys are never overwritten)" : String(cString: strerror(errno))
            throw CommandFailure(message: "cannot write \(path): \(reason)", status: .failure)
        }
        defer { close(fd) }
        // The mode asked for, whatever the umask.
        fchmod(fd, mode)
        let bytes = Array(contents.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            unlink(path)
            throw CommandFailure(message: "cannot write \(path): \(String(cString: strerror(errno)))", status: .failure)
        }
    }
}
