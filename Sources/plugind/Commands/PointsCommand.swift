import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind points`: the extension points installed hosts declare (their descriptors), and the
/// one command a host's installer, package or author runs to declare its own.
struct PointsCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON for scripts (list; the points under \"points\").")
        static let host = CommandOption.value("host", "<id>", "The declaring host (add; default: the identifier without its last part).")
        static let scope = CommandOption.value(
            "scope", "<scope>", "application (only the host's own plugins, the default) or none (also approved ones) (add).")
        static let enhancedSecurity = CommandOption.flag("enhanced-security", "The point's plugins need every confinement layer (add).")
        static let pointDescription = CommandOption.value("description", "<text>", "What the point's plugins do, for the owner (add).")
        static let version = CommandOption.value("version", "<version>", "The version of the point's interface, such as 2.1 (add).")
        static let directory = CommandOption.value(
            "directory", "<dir>", "Write into or remove from this directory instead of yours (a package's staging tree) (add, remove).")
    }

    static let description = CommandDescription(
        name: "points",
        abstract: "List the extension points installed hosts declare, or declare one.",
        usage:
            "list [--json] | add <point> [--host <id>] [--scope <scope>] [--enhanced-security] [--description <text>] [--version <version>] [--directory <dir>] | remove <point> [--directory <dir>]",
        discussion: """
            A host declares its points in descriptors (<identifier>.json) read from
            $XDG_DATA_HOME/plugind/extension-points, /usr/local/share/plugind/extension-points and
            /usr/share/plugind/extension-points ($PLUGIND_EXTENSION_POINTS_PATH replaces them;
            the first declaration of a point wins). 'list --all', 'verify', 'info' and 'browse'
            use them to say which host a plugin is for and what its point does, and that no
            installed host declares a plugin's point. A Swift host writes its own with
            AppExtensionHost.installExtensionPointDescriptors; 'add' writes the same file for any
            host, into your directory or, with --directory, into a package's
            usr/share/plugind/extension-points.
            """,
        arguments: [
            ("list", "The declared points: identifier, host, scope, version, description, file."),
            ("add <point>", "Declare a point (its full identifier, such as com.example.editor.text-filters)."),
            ("remove <point>", "Remove a point's descriptor."),
        ],
        options: [
            Options.json, Options.host, Options.scope, Options.enhancedSecurity, Options.pointDescription, Options.version,
            Options.directory,
        ]
    )

    enum Action {
        case list
        case add(String)
        case remove(String)
    }

    let action: Action
    let json: Bool
    let host: String?
    let scope: String
    let enhancedSecurity: Bool
    let pointDescription: String?
    let version: String?
    let directory: String?

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals(["action"], optional: ["identifier"])
        json = arguments.flag(Options.json)
        host = arguments.value(Options.host)
        scope = arguments.value(Options.scope) ?? "application"
        enhancedSecurity = arguments.flag(Options.enhancedSecurity)
        pointDescription = arguments.value(Options.pointDescription)
        version = arguments.value(Options.version)
        directory = arguments.value(Options.directory)
        switch (words[0], words.count > 1 ? words[1] : nil) {
        case ("list", nil): action = .list
        case ("add", let identifier?): action = .add(identifier)
        case ("remove", let identifier?): action = .remove(identifier)
        case ("add", nil), ("remove", nil):
            throw UsageError(message: "points \(words[0]) needs the point's full identifier", command: "points")
        default: throw UsageError(message: "unknown action '\(words[0])' (use list, add or remove)", command: "points")
        }
        guard scope == "application" || scope == "none" else {
            throw UsageError(message: "--scope is application or none, not '\(scope)'", command: "points")
        }
    }

    struct Entry: Encodable {
        var identifier: String
        var host: String
        var scope: String
        var enhancedSecurity: Bool
        var description: String?
        var version: String?
        var path: String
    }

    /// `plugind points list --json`: the declared points, by identifier.
    struct Document: JSONDocument {
        static let formatVersion = 1
        var points: [Entry]
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        switch action {
        case .list:
            let declared = context.host.declaredExtensionPoints
            let entries = declared.declarations.values.sorted { $0.descriptor.identifier < $1.descriptor.identifier }.map {
                Entry(
                    identifier: $0.descriptor.identifier, host: $0.descriptor.host, scope: $0.descriptor.scope,
                    enhancedSecurity: $0.descriptor.enhancedSecurity, description: $0.descriptor.description,
                    version: $0.descriptor.version,
                    path: $0.path)
            }
            for problem in declared.problems { context.console.err("warning: \(problem.description.inert)\n") }
            if json {
                try context.console.json(Document(points: entries))
            } else if entries.isEmpty {
                context.console.out("No installed host declares an extension point.\n")
            } else {
                for entry in entries {
                    let details = [
                        entry.version.map { "version \($0)" }, "scope \(entry.scope)", entry.enhancedSecurity ? "enhanced security" : nil,
                    ]
                    .compactMap { $0 }.joined(separator: ", ")
                    context.console.out("\(entry.identifier.inert)  declared by \(entry.host.inert)  (\(details))\n")
                    if let text = entry.description { context.console.out("    \(text.inert)\n") }
                }
            }
        case .add(let identifier):
            let target = try writableDirectory(context)
            let hostIdentifier = host ?? identifier.split(separator: ".").dropLast().joined(separator: ".")
            let descriptor = ExtensionPointDescriptor(
                identifier: identifier, host: hostIdentifier, scope: scope, enhancedSecurity: enhancedSecurity,
                description: pointDescription, version: version)
            do {
                _ = try descriptor.validated(at: target)
            } catch {
                throw CommandFailure(message: error.reason, status: .usage)
            }
            let path: String
            do {
                path = try descriptor.install(in: target)
            } catch {
                throw CommandFailure(message: error.description.inert, status: .failure)
            }
            context.console.err("Declared \(identifier.inert) for \(hostIdentifier.inert) in \(path.inert).\n")
        case .remove(let identifier):
            let path = try writableDirectory(context) + "/" + ExtensionPointDescriptor.fileName(of: identifier)
            guard ManifestParser.isReverseDNS(identifier), FileManager.default.fileExists(atPath: path) else {
                throw CommandFailure(message: "\(path.inert) does not exist (see 'plugind points list')", status: .unavailable)
            }
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                throw CommandFailure(message: "cannot remove \(path.inert): \(error.localizedDescription)", status: .failure)
            }
            context.console.err("Removed \(path.inert).\n")
        }
        return .success
    }

    private func writableDirectory(_ context: CommandContext) throws -> String {
        if let directory { return directory }
        guard let user = context.host.userExtensionPointsDirectory else {
            throw CommandFailure(message: "no extension-points directory outside /usr; pass --directory", status: .usage)
        }
        return user.path
    }
}
