import ExtensionFoundation
import Foundation
import PlugindBundle

/// `plugind install`: copies a bundle into the user's plugin directory, atomically.
struct InstallCommand: PlugindCommand {
    static let description = CommandDescription(
        name: "install",
        abstract: "Install a plugin bundle into your plugin directory.",
        usage: "<bundle> [--force]",
        discussion: """
            Copies the bundle to $XDG_DATA_HOME/plugind/plugins/<identifier>.appex under a
            temporary name and renames it into place, so hosts never see half a bundle. A
            different build of an installed plugin (same identifier, other bytes) is replaced only
            with --force. Installing does not approve: run 'plugind approve <id>' next.
            """,
        arguments: [("<bundle>", "The bundle directory (holding manifest.json and the library).")],
        options: [("--force", "Replace an installed plugin with the same identifier and other bytes.")],
        flagOptions: ["force"]
    )

    let source: String
    let force: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        source = try arguments.positionals(["bundle"])[0]
        force = arguments.flag("force")
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let bundle: InspectedBundle
        switch BundleInspector.inspect(bundleAt: source) {
        case .success(let inspected): bundle = inspected
        case .failure(let problem):
            throw CommandFailure(
                message: "\(source) cannot be installed: \(problem.message); 'plugind verify \(source)' lists every problem",
                status: .failure)
        }
        let identifier = bundle.manifest.identifier
        let root = context.host.userPluginsDirectory.path
        let destination = root + "/" + identifier + ".appex"
        let fileManager = FileManager.default
        do {
            try fileManager.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw CommandFailure(message: "cannot create \(root): \(error.localizedDescription)", status: .failure)
        }

        // The same identifier already installed here, under any directory name.
        let installed = Catalog().scan([SearchRoot(path: root, isBundledWithHost: false)]).entry(for: identifier)
        if let installed {
            if try Self.sameBytes(installed.bundle, bundle) {
                context.console.err("\(identifier) is already installed at \(installed.bundle.bundlePath) with the same bytes.\n")
                return .success
            }
            guard force else {
                throw CommandFailure(
                    message:
                        "a different build of \(identifier) is installed at \(installed.bundle.bundlePath); pass --force to replace it (its approval will no longer match)",
                    status: .failure
                )
            }
        }

        let staging = root + "/.\(identifier).installing-\(getpid())"
        try? fileManager.removeItem(atPath: staging)
        do {
            try fileManager.copyItem(atPath: bundle.bundlePath, toPath: staging)
            try Self.removeGroupAndOtherWrite(staging)
            if let installed {
                let aside = root + "/.\(identifier).replaced-\(getpid())"
                try fileManager.moveItem(atPath: installed.bundle.bundlePath, toPath: aside)
                try fileManager.moveItem(atPath: staging, toPath: destination)
                try? fileManager.removeItem(atPath: aside)
            } else {
                try fileManager.moveItem(atPath: staging, toPath: destination)
            }
        } catch {
            try? fileManager.removeItem(atPath: staging)
            throw CommandFailure(message: "cannot install \(identifier) into \(root): \(error.localizedDescription)", status: .failure)
        }
        context.console.err("Installed \(identifier) at \(destination).\nApprove it with 'plugind approve \(identifier)'.\n")
        return .success
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
