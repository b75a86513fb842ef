import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
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
            "maintainer", "<name-and-email>",
            "For deb: the package's maintainer, e.g. 'Tools Team <tools@example.com>' (else DEBEMAIL and DEBFULLNAME).")
        static let license = CommandOption.value(
            "license", "<spdx>", "For deb: the plugin's licence for the copyright file, an SPDX expression such as Apache-2.0.")
        static let key = CommandOption.value(
            "key", "<file>", "For deb: the private key the bundle is signed with, to strip its libraries and sign it again.")
    }

    enum Format: String {
        case plugin, deb
    }

    static let description = CommandDescription(
        name: "pack",
        abstract: "Pack a signed bundle into a single .plugin file, or a Debian package.",
        usage:
            "<bundle> --output <file> | <bundle> --format deb [--output <file>] [--maintainer <name-and-email>] [--license <spdx>] [--key <file>]",
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
            plugin; see Packaging.md, installed in /usr/share/doc/plugind.

            The package is made for lintian to find no error or warning in it. Its maintainer is
            --maintainer, else DEBEMAIL (with DEBFULLNAME) as for Debian's own tools; with
            neither it is refused, as a publisher key names no person. Its changelog has one
            entry for the version, dated SOURCE_DATE_EPOCH when that is set; its copyright file
            (DEP-5) names the maintainer and the --license given, or says that none was. The
            bundle's libraries are stripped, their function names kept for crash reports
            (MiniDebugInfo); stripping changes the signed bytes, so a bundle that is not
            stripped already needs --key, the private key it is signed with, to sign it again
            (or strip before 'plugind sign', and the package holds the bytes you signed).
            """,
        arguments: [("<bundle>", "The signed bundle directory.")],
        options: [Options.output, Options.format, Options.maintainer, Options.license, Options.key]
    )

    let bundle: String
    let output: String?
    let format: Format
    let maintainer: DebianMaintainer?
    let license: DebianLicense?
    let keyPath: String?

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
        for option in [Options.maintainer, Options.license, Options.key] where format != .deb && arguments.value(option) != nil {
            throw UsageError(message: "--\(option.name) is for --format deb", command: "pack")
        }
        do throws(DebianMaintainer.Failure) {
            maintainer = try arguments.value(Options.maintainer).map(DebianMaintainer.parse)
        } catch {
            throw UsageError(message: error.description.inert, command: "pack")
        }
        do throws(DebianLicense.Failure) {
            license = try arguments.value(Options.license).map { (text) throws(DebianLicense.Failure) in try DebianLicense(spdx: text) }
        } catch {
            throw UsageError(message: error.description.inert, command: "pack")
        }
        keyPath = arguments.value(Options.key).flatMap { $0.isEmpty ? nil : $0 }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let (inspected, key) = try SignedBundle.check(bundle)
        guard format == .plugin, let output else {
            return try packDebian(inspected, key: key, context)
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

extension PackCommand {
    /// `--format deb`: the maintainer, the key and the date resolved, then the package.
    private func packDebian(_ inspected: InspectedBundle, key: PublisherKeys.PublicKey, _ context: CommandContext) throws -> ExitStatus {
        let identifier = inspected.manifest.identifier.inert
        func failure(_ message: String, _ status: ExitStatus = .failure) -> CommandFailure {
            CommandFailure(message: "cannot pack \(identifier) as a Debian package: \(message.inert)", status: status)
        }
        let maintainer: DebianMaintainer
        do {
            guard let resolved = try self.maintainer ?? DebianMaintainer.fromEnvironment(ProcessEnvironment.value) else {
                throw failure(
                    "it needs a maintainer, a name and an address for the Maintainer field, the changelog and the copyright file, and a publisher key names no one: pass --maintainer '\(DebianMaintainer.example)', or set DEBEMAIL (and DEBFULLNAME) as for Debian's own tools",
                    .usage)
            }
            maintainer = resolved
        } catch let error as DebianMaintainer.Failure {
            throw failure(error.description, .usage)
        }
        var signingKey: PublisherKeys.PrivateKey?
        if let keyPath {
            let privateKey = try SignCommand.loadPrivateKey(keyPath)
            let publicKey = try? privateKey.publicKey
            guard publicKey == key else {
                throw failure(
                    "--key \(keyPath) is the key \(publicKey?.fingerprint ?? "?"), but the bundle is signed by \(key.fingerprint); pass that key, the one the bundle was signed with",
                    .usage)
            }
            signingKey = privateKey
        }
        let written: DebianPackage.Written
        let package: DebianPackage
        do {
            package = DebianPackage(
                inspected: inspected, key: key, maintainer: maintainer, license: license, signingKey: signingKey,
                date: try DebianPackage.packageDate(sourceDateEpoch: ProcessEnvironment.value("SOURCE_DATE_EPOCH")))
            written = try package.write(output: output)
        } catch {
            throw failure(error.description)
        }
        var notes: [String] = []
        if !written.stripped.isEmpty {
            notes.append("stripped \(written.stripped.joined(separator: ", ").inert) and signed the bundle again")
        }
        if license == nil { notes.append("no licence stated, so the copyright file says none was; --license <spdx> states one") }
        context.console.err(
            "Packed \(identifier) \(inspected.manifest.version.inert), signed by \(key.fingerprint), as \(package.packageName) into \(written.path.inert)\(notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")").\n"
        )
        context.console.out(written.path.inert + "\n")
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
