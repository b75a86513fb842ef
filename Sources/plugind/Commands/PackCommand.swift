import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindPackages
import PlugindSystem

/// `plugind pack`: one file to hand out, from a signed bundle.
struct PackCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let output = CommandOption.value(
            "output", "<file>", "The package to write, conventionally <name>.plugin (for deb: <package>_<version>_<arch>.deb here).")
        static let format = CommandOption.value("format", "plugin|deb", "plugin (the default) or deb, a Debian package.")
        static let maintainer = CommandOption.value(
            "maintainer", "<name-and-email>", "For deb: the Maintainer field, e.g. 'Tools Team <tools@example.com>'.")
    }

    enum Format: String {
        case plugin, deb
    }

    static let description = CommandDescription(
        name: "pack",
        abstract: "Pack a signed bundle into a single .plugin file, or a Debian package.",
        usage: "<bundle> --output <file> | <bundle> --format deb [--output <file>] [--maintainer <name-and-email>]",
        discussion: """
            Writes the bundle's regular files and directories, and its signature, into one
            gzip-compressed POSIX tar archive (through libarchive): no owners, no times, only the
            execute bit. The bundle must pass 'plugind verify' and carry a valid signature ('plugind
            sign'); 'plugind install <file>' checks both again before anything lands.

            With --format deb it writes a Debian package (through dpkg-deb) that installs the
            signed bundle in /usr/lib/plugind/plugins/<identifier>/, named
            plugind-plugin-<identifier>, for the architecture of the library's ELF header, and
            depending on plugind and on the Debian packages of the system libraries the plugin
            needs (found by dpkg-shlibdeps, from dpkg-dev). The identifier is spelled in the
            characters of a Debian package name, one-to-one: lower-case letters, digits, '.' and
            '-' as they are, an upper-case letter as '+' and the letter in lower case, '_' as '++'
            (com.Example.my_tool: plugind-plugin-com.+example.my++tool), so two plugins never share
            a package. Publish it in an apt repository and every machine installs the same
            plugin; see Documentation/Packaging.md.
            """,
        arguments: [("<bundle>", "The signed bundle directory.")],
        options: [Options.output, Options.format, Options.maintainer]
    )

    let bundle: String
    let output: String?
    let format: Format
    let maintainer: String?

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        bundle = try arguments.positionals(["bundle"])[0]
        let formatName = arguments.value(Options.format) ?? Format.plugin.rawValue
        guard let format = Format(rawValue: formatName) else {
            throw UsageError(message: "pack knows the formats plugin and deb, not '\(formatName)'", command: "pack")
        }
        self.format = format
        output = arguments.value(Options.output).flatMap { $0.isEmpty ? nil : $0 }
        if format == .plugin && output == nil {
            throw UsageError(message: "pack needs --output <file>", command: "pack")
        }
        maintainer = arguments.value(Options.maintainer)
        if maintainer != nil && format != .deb {
            throw UsageError(message: "--maintainer is for --format deb", command: "pack")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let (inspected, key) = try SignedBundle.check(bundle)
        guard format == .plugin, let output else {
            let package = DebianPackage(inspected: inspected, key: key, maintainer: maintainer)
            let path: String
            do {
                path = try package.write(output: output)
            } catch {
                throw CommandFailure(
                    message: "cannot pack \(inspected.manifest.identifier.inert) as a Debian package: \(error.description.inert)",
                    status: .failure)
            }
            context.console.err(
                "Packed \(inspected.manifest.identifier.inert) \(inspected.manifest.version.inert), signed by \(key.fingerprint), as \(package.packageName) into \(path.inert).\n"
            )
            context.console.out(path.inert + "\n")
            return .success
        }
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
