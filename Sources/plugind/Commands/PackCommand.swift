import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindSystem

/// `plugind pack`: one file to hand out, from a signed bundle.
struct PackCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let output = CommandOption.value("output", "<file>", "The package to write, conventionally <name>.plugin.")
    }

    static let description = CommandDescription(
        name: "pack",
        abstract: "Pack a signed bundle into a single .plugin file.",
        usage: "<bundle> --output <file>",
        discussion: """
            Writes the bundle's regular files and directories, and its signature, into one
            gzip-compressed POSIX tar archive (through libarchive): no owners, no times, only the
            execute bit. The bundle must pass 'plugind verify' and carry a valid signature ('plugind
            sign'); 'plugind install <file>' checks both again before anything lands.
            """,
        arguments: [("<bundle>", "The signed bundle directory.")],
        options: [Options.output]
    )

    let bundle: String
    let output: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        bundle = try arguments.positionals(["bundle"])[0]
        guard let output = arguments.value(Options.output), !output.isEmpty else {
            throw UsageError(message: "pack needs --output <file>", command: "pack")
        }
        self.output = output
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let (inspected, key) = try SignedBundle.check(bundle)
        do {
            try PluginPackage.write(bundleAt: inspected.bundlePath, contents: inspected.contents, to: output)
        } catch {
            throw CommandFailure(
                message: "cannot pack \(inspected.manifest.identifier.inert): \(error.description.inert)", status: .failure)
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0
        context.console.err(
            "Packed \(inspected.manifest.identifier.inert) \(inspected.manifest.version.inert), signed by \(key.fingerprint), into \(output.inert) (\(ByteCount(UInt64(size)))).\n"
        )
        return .success
    }
}

/// A bundle that passes inspection and carries a valid publisher signature.
enum SignedBundle {
    /// The inspected bundle at `path` and its publisher's key; throws naming the problem.
    static func check(_ path: String, what: String? = nil) throws -> (InspectedBundle, PublisherKeys.PublicKey) {
        let name = what ?? path
        let (inspected, digest) = try inspect(path, what: name)
        let identifier = inspected.manifest.identifier.inert
        switch BundleSignature.status(ofBundleAt: inspected.bundlePath, digest: digest.digest) {
        case .valid(let key):
            return (inspected, key)
        case .unsigned:
            throw CommandFailure(
                message: "\(identifier) (\(name.inert)) is not signed; sign it with 'plugind sign <bundle> --key <file>'", status: .failure)
        case .invalid(let reason, let key):
            throw CommandFailure(
                message:
                    "\(identifier) (\(name.inert)): the signature\(key.map { " by \($0.fingerprint)" } ?? "") is invalid: \(reason.inert)",
                status: .failure)
        }
    }

    /// The bundle at `path`, checked as `verify` does, and the digest of its files as they are.
    static func inspect(_ path: String, what name: String) throws -> (InspectedBundle, BundleDigest) {
        let inspected: InspectedBundle
        switch BundleInspector.inspect(bundleAt: path) {
        case .success(let result): inspected = result
        case .failure(let problem): throw CommandFailure(message: "\(name.inert): \(problem.message.inert)", status: .failure)
        }
        do {
            return (inspected, try ContentHashes.shared.digest(of: inspected))
        } catch {
            throw CommandFailure(message: "cannot read \(name.inert): \(error.localizedDescription)", status: .failure)
        }
    }
}
