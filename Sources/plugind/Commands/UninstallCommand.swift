import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind uninstall`: removes a plugin that `plugind install` put in the user's directory.
struct UninstallCommand: PlugindCommand {
    static let description = CommandDescription(
        name: "uninstall",
        abstract: "Remove a plugin from your plugin directory.",
        usage: "<id>",
        discussion: """
            Removes the bundle from $XDG_DATA_HOME/plugind/plugins; plugins installed elsewhere
            (by a package manager, or shipped with a host) are left alone. The approval stays in
            the policy, pinned to the removed bytes; 'plugind revoke <id>' forgets it.
            """,
        arguments: [("<id>", "The plugin's identifier.")]
    )

    let identifier: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals(["id"])[0]
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let root = context.host.userPluginsDirectory.path
        let canonicalRoot = canonicalPath(root) ?? root
        let snapshot = Catalog().scan([SearchRoot(path: root, isBundledWithHost: false)])
        let bundlePath =
            snapshot.entry(for: identifier)?.bundle.bundlePath
            ?? snapshot.diagnostics.first { $0.bundleIdentifier == identifier }?.path
        guard let bundlePath else {
            if let elsewhere = Inventory.take(host: context.host).item(identifier) {
                throw CommandFailure(
                    message:
                        "\(identifier) is installed at \(elsewhere.entry.bundle.bundlePath), outside your plugin directory \(root); remove it the way it was installed",
                    status: .failure
                )
            }
            throw CommandFailure(message: "\(identifier) is not installed in \(root)", status: .unavailable)
        }
        guard (bundlePath as NSString).deletingLastPathComponent == canonicalRoot else {
            throw CommandFailure(message: "\(bundlePath) is not in \(root)", status: .failure)
        }
        // Rename first: hosts see the bundle vanish at once, never half-deleted.
        let aside = canonicalRoot + "/.\(identifier).removing-\(getpid())"
        do {
            try FileManager.default.moveItem(atPath: bundlePath, toPath: aside)
            try FileManager.default.removeItem(atPath: aside)
        } catch {
            throw CommandFailure(message: "cannot remove \(bundlePath): \(error.localizedDescription)", status: .failure)
        }
        context.console.err("Removed \(identifier) from \(root).\n")
        return .success
    }
}
