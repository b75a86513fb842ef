import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindPackages
import PlugindSystem

/// `plugind install`: copies a bundle into the user's plugin directory, atomically.
struct InstallCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let force = CommandOption.flag("force", "Replace an installed plugin with the same identifier and other bytes.")
    }

    static let description = CommandDescription(
        name: "install",
        abstract: "Install a plugin bundle into your plugin directory.",
        usage: "<bundle-or-package> [--force]",
        discussion: """
            Copies the bundle to $XDG_DATA_HOME/plugind/plugins/<identifier>.appex under a
            temporary name and renames it into place, so hosts never see half a bundle. A package
            ('plugind pack') is unpacked into a hidden directory there first, entry by entry with
            nothing trusted (only relative regular files and directories, within size and count
            caps, no set-id bits), and must carry a valid signature of exactly what it unpacked to;
            anything else is refused, naming the entry, and nothing remains. A newer version
            signed by the publisher of the installed one replaces it; any other different build
            of an installed plugin (same identifier, other bytes) is replaced only with --force.
            Installing does not approve: run 'plugind approve <id>' next.
            """,
        arguments: [("<bundle-or-package>", "A bundle directory, or a .plugin package file.")],
        options: [Options.force]
    )

    let source: String
    let force: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        source = try arguments.positionals(["bundle"])[0]
        force = arguments.flag(Options.force)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let root = context.host.userPluginsDirectory.path
        let fileManager = FileManager.default
        do {
            try fileManager.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw CommandFailure(message: "cannot create \(root): \(error.localizedDescription)", status: .failure)
        }
        Self.removeLeftovers(in: root)
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: source, isDirectory: &isDirectory) else {
            throw CommandFailure(message: "\(source.inert) does not exist", status: .failure)
        }
        // A package is unpacked into a hidden directory of the plugin directory (which monitors
        // ignore), then installed from there by rename like a bundle.
        let unpacked: String? = isDirectory.boolValue ? nil : try Self.unpack(source, into: root)
        defer { if let unpacked { try? fileManager.removeItem(atPath: unpacked) } }
        let bundle: InspectedBundle
        if let unpacked {
            bundle = try SignedBundle.check(unpacked, what: "the package \(source)").0
        } else {
            switch BundleInspector.inspect(bundleAt: source) {
            case .success(let inspected): bundle = inspected
            case .failure(let problem):
                throw CommandFailure(
                    message: "\(source) cannot be installed: \(problem.message); 'plugind verify \(source)' lists every problem",
                    status: .failure)
            }
        }
        let identifier = bundle.manifest.identifier
        let destination = root + "/" + identifier + ".appex"

        // The same identifier already installed here, under any directory name.
        let installed = Catalog().scan([SearchRoot(path: root, isBundledWithHost: false)]).entry(for: identifier)
        if let installed {
            if try Self.sameBytes(installed.bundle, bundle) {
                context.console.err("\(identifier) is already installed at \(installed.bundle.bundlePath) with the same bytes.\n")
                return .success
            }
            switch Self.update(from: installed.bundle, to: bundle) {
            case .success(let note):
                context.console.err(note + "\n")
            case .failure(let reason) where !force:
                throw CommandFailure(
                    message:
                        "a different build of \(identifier) is installed at \(installed.bundle.bundlePath) (\(reason.reason)); pass --force to replace it (its approval will no longer match)",
                    status: .failure
                )
            case .failure(let reason):
                context.console.err(
                    "Replacing \(identifier) (\(reason.reason)): an approval of the installed build no longer holds for this one.\n")
            }
        }

        let staging = unpacked ?? root + "/.\(identifier).installing-\(getpid())"
        do {
            if unpacked == nil {
                try? fileManager.removeItem(atPath: staging)
                try fileManager.copyItem(atPath: bundle.bundlePath, toPath: staging)
            }
            try Self.removeGroupAndOtherWrite(staging)
            if let installed, installed.bundle.bundlePath == destination {
                // One step: whoever looks, and whenever plugind is killed, finds the old bundle or
                // the new one at the destination, never neither (moving the old one aside first
                // left none between the two renames). The old one is then in staging's place.
                try AtomicFile.exchange(staging, destination)
            } else {
                try fileManager.moveItem(atPath: staging, toPath: destination)
                // The old build under another directory name: moved aside in one step, then
                // removed (a removal cut short would leave half a bundle where hosts look).
                if let installed {
                    try fileManager.moveItem(atPath: installed.bundle.bundlePath, toPath: staging)
                }
            }
            try? fileManager.removeItem(atPath: staging)
        } catch {
            try? fileManager.removeItem(atPath: staging)
            throw CommandFailure(message: "cannot install \(identifier) into \(root): \(error.localizedDescription)", status: .failure)
        }
        context.console.err("Installed \(identifier) at \(destination).\nApprove it with 'plugind approve \(identifier)'.\n")
        return .success
    }

    /// Removes what an install that was killed left in `root`: its hidden staging or unpacking
    /// directory (or, after an exchange, the old build), named with the pid of a process that no
    /// longer exists. A running install's own directories are left to it.
    static func removeLeftovers(in root: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where name.hasPrefix(".") {
            let owner: Substring?
            if let range = name.range(of: ".installing-") {
                owner = name[range.upperBound...]
            } else if name.hasPrefix(".package-") {
                owner = name.dropFirst(".package-".count).split(separator: "-").first
            } else {
                owner = nil
            }
            guard let owner, let pid = Int32(owner), pid > 0, kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(atPath: root + "/" + name)
        }
    }

    /// Unpacks the package at `path` into a new hidden directory of `root`; nothing of it
    /// remains when a refusal is thrown.
    static func unpack(_ path: String, into root: String) throws -> String {
        let directory = root + "/.package-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(directory, 0o700) == 0 else {
            throw CommandFailure(message: "cannot create \(directory): \(String(cString: strerror(errno)))", status: .failure)
        }
        do {
            try PluginPackage.unpack(path, into: directory)
            chmod(directory, 0o755)
            return directory
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw CommandFailure(message: "\(path.inert) cannot be installed: \(error.description.inert)", status: .failure)
        }
    }

    struct NotAnUpdate: Error { var reason: String }

    /// Whether `new` is an update of `installed` that needs no --force: a newer version signed
    /// by the same publisher. Returns what to tell the owner, or why it is not one.
    static func update(from installed: InspectedBundle, to new: InspectedBundle) -> Result<String, NotAnUpdate> {
        func signer(_ bundle: InspectedBundle) -> PublisherKeys.PublicKey? {
            guard let (_, key) = try? SignedBundle.check(bundle.bundlePath) else { return nil }
            return key
        }
        guard let before = signer(installed), let after = signer(new) else {
            return .failure(NotAnUpdate(reason: "one of them carries no valid publisher signature"))
        }
        guard before == after else {
            return .failure(NotAnUpdate(reason: "signed by \(after.fingerprint), the installed one by \(before.fingerprint)"))
        }
        let (old, current) = (installed.manifest.version, new.manifest.version)
        guard let oldVersion = HostVersion(old), let newVersion = HostVersion(current), oldVersion < newVersion else {
            return .failure(NotAnUpdate(reason: "version \(current.inert) is not newer than the installed \(old.inert)"))
        }
        return .success("Updating \(new.manifest.identifier.inert) from \(old.inert) to \(current.inert), signed by \(after.fingerprint).")
    }

    static func sameBytes(_ first: InspectedBundle, _ second: InspectedBundle) throws -> Bool {
        let hashes = ContentHashes.shared
        return try hashes.digest(ofFileAtPath: first.libraryPath, identity: first.libraryStatus.identity)
            == hashes.digest(ofFileAtPath: second.libraryPath, identity: second.libraryStatus.identity)
            && hashes.digest(ofFileAtPath: first.manifestPath, identity: first.manifestStatus.identity)
                == hashes.digest(ofFileAtPath: second.manifestPath, identity: second.manifestStatus.identity)
    }

    /// Installed files must not be writable by other users, or the catalog rejects them.
    static func removeGroupAndOtherWrite(_ path: String) throws {
        let fileManager = FileManager.default
        var paths = [path]
        if let enumerator = fileManager.enumerator(atPath: path) {
            for case let relative as String in enumerator { paths.append(path + "/" + relative) }
        }
        for item in paths {
            let attributes = try fileManager.attributesOfItem(atPath: item)
            guard attributes[.type] as? FileAttributeType != .typeSymbolicLink,
                let mode = attributes[.posixPermissions] as? Int
            else { continue }
            try fileManager.setAttributes([.posixPermissions: mode & ~0o022], ofItemAtPath: item)
        }
    }
}
