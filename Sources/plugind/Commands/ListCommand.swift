import ExtensionFoundation
import PlugindBundle
import PlugindEngine

/// `plugind list`: the plugins a host could use, or with `--all` every candidate and why it is
/// not available.
struct ListCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let point = CommandOption.value("point", "<id>", "Only plugins for this extension point.")
        static let capability = CommandOption.value(
            "capability", "<id>", "Only plugins that implement this capability, such as a media type (repeat: all of them).")
        static let all = CommandOption.flag("all", "Also list unavailable plugins, with the reason.")
        static let json = CommandOption.flag("json", "Print JSON (format version 1) for scripts.")
    }

    static let description = CommandDescription(
        name: "list",
        abstract: "List installed plugins.",
        usage: "[--point <id>] [--capability <id>]... [--all] [--json]",
        discussion: """
            Without --all, only plugins that are approved and enabled. With --all, also those that
            are unapproved, disabled, changed since approval, quarantined or broken, each with the
            reason. --capability keeps the plugins whose manifest states the capability (a Swift
            extension's 'Implementing { … }'): 'plugind list --capability text/markdown' lists what
            can handle Markdown, without running any plugin. The --json format is documented in
            CLI.md, installed in /usr/share/doc/plugind.
            """,
        options: [Options.point, Options.capability, Options.all, Options.json]
    )

    let point: String?
    let capabilities: [String]
    let all: Bool
    let json: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        point = arguments.value(Options.point)
        capabilities = arguments.allValues(Options.capability)
        all = arguments.flag(Options.all)
        json = arguments.flag(Options.json)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let inventory = Inventory.take(host: context.host)
        let declared = context.host.declaredExtensionPoints
        // A plugin whose point's installed host declares a version it does not support is of no
        // use to that host: listed only with --all, saying why.
        let items = inventory.items.filter { item in
            (point == nil || item.entry.manifest.extensionPoint == point)
                && (all || (item.isAvailable && PointDeclaration(of: item.entry.manifest, in: declared).isCompatible))
                && capabilities.allSatisfy(item.entry.manifest.capabilities.contains)
        }
        let problems =
            all
            ? inventory.problems.filter { point == nil || $0.extensionPointIdentifier == nil || $0.extensionPointIdentifier == point } : []
        let policy = PolicySnapshot.read(for: context.host)
        let trust = { (item: Inventory.Item) in PublisherTrust.of(item, policy: policy) }
        if json {
            try context.console.json(ListDocument(items: items, problems: problems, declared: declared, trust: trust))
            return .success
        }
        context.console.out(Self.text(items: items, problems: problems, all: all, declared: declared, trust: trust))
        if !all {
            let hidden = inventory.items.count(where: { !$0.isAvailable }) + inventory.problems.count
            if hidden > 0 {
                context.console.err("note: \(hidden) more installed plugin(s) are not available; see 'plugind list --all'\n")
            }
        }
        return .success
    }
}

extension ListCommand {
    /// The text of `list` (and of `browse` without a terminal): a line per plugin, and with `all`
    /// its state and the reason it is unavailable, or the publisher's trust or the rule that made
    /// it available (`trust`), then the bundles that were rejected.
    static func text(
        items: [Inventory.Item], problems: [AppExtensionDiagnostic], all: Bool, declared: DeclaredExtensionPoints,
        trust: (Inventory.Item) -> PublisherTrust?
    ) -> String {
        var text = ""
        if items.isEmpty && problems.isEmpty {
            text += all ? "No plugins found.\n" : "No available plugins.\n"
        }
        for item in items {
            let manifest = item.entry.manifest
            text +=
                "\(manifest.identifier.inert)  \(manifest.version.inert)  \(manifest.localizedName(for: .current).inert)  [\(manifest.extensionPoint.inert)]"
            let declaration = PointDeclaration(of: manifest, in: declared)
            text += all ? "  \(declaration.isCompatible ? item.stateCode : "incompatible-point-version")\n" : "\n"
            if all, let reason = item.diagnostic?.message ?? trust(item)?.sentence(allowedBy: item.allowedBy) ?? item.allowedBy {
                text += "    \(reason.inert)\n"
            }
            if all, declaration.host == nil || !declaration.isCompatible {
                text += "    \(declaration.sentence.inert)\n"
            }
        }
        for problem in problems {
            text += "\((problem.bundleIdentifier ?? problem.path).inert)  \(problem.kind)\n    \(problem.message.inert)\n"
        }
        return text
    }
}

/// `plugind list --json`, format version 1. Field names and state words are stable; new fields
/// may be added.
struct ListDocument: JSONDocument {
    static let formatVersion = 1

    struct Plugin: Encodable {
        var identifier: String
        var name: String
        /// `name` in the user's language, when the manifest translates it.
        var localizedName: String
        var version: String
        var extensionPoint: String
        /// What it implements within its point (its manifest's `capabilities`).
        var capabilities: [String]
        var description: String?
        var bundlePath: String
        var libraryPath: String
        /// available, unapproved, disabled, approval-outdated, quarantined
        var state: String
        var reason: String?
        /// The administrator's rule that made it available, when one did.
        var allowedBy: String?
        /// The publisher key whose trust made it available, when one did: the owner's or the
        /// administrator's (`plugind trust`), or an allow rule that names the key (`rule`).
        var trustedPublisher: PublisherTrust?
        /// The installed host that declares its extension point (`plugind points list`), if any.
        var declaredBy: String?
        var bundledWithHost: Bool
        var functions: [String]
        var permissions: Permissions
    }

    struct Permissions: Encodable {
        var network: Bool
        var processes: Bool
        var read: [String]
        var write: [String]
        var symlinks: Bool
    }

    struct Problem: Encodable {
        var kind: String
        var path: String
        var identifier: String?
        var extensionPoint: String?
        var message: String
    }

    var plugins: [Plugin]
    var problems: [Problem]

    /// `trust`: the publisher's trust that makes an item available (`PublisherTrust.of`).
    init(
        items: [Inventory.Item], problems: [AppExtensionDiagnostic], declared: DeclaredExtensionPoints,
        trust: (Inventory.Item) -> PublisherTrust?
    ) {
        plugins = items.map { item in
            let manifest = item.entry.manifest
            let declaration = PointDeclaration(of: manifest, in: declared)
            return Plugin(
                identifier: manifest.identifier,
                name: manifest.name,
                localizedName: manifest.localizedName(for: .current),
                version: manifest.version,
                extensionPoint: manifest.extensionPoint,
                capabilities: manifest.capabilities,
                description: manifest.description,
                bundlePath: item.entry.bundle.bundlePath,
                libraryPath: item.entry.bundle.libraryPath,
                state: declaration.isCompatible ? item.stateCode : "incompatible-point-version",
                reason: declaration.isCompatible ? item.diagnostic?.message : declaration.sentence,
                allowedBy: item.allowedBy,
                trustedPublisher: trust(item),
                declaredBy: declaration.host,
                bundledWithHost: item.entry.root.isBundledWithHost,
                functions: manifest.functions.map(\.description),
                permissions: Permissions(
                    network: manifest.permissions.network, processes: manifest.permissions.processes, read: manifest.permissions.read,
                    write: manifest.permissions.write, symlinks: manifest.permissions.symlinks)
            )
        }
        self.problems = problems.map {
            Problem(
                kind: $0.kind.code, path: $0.path, identifier: $0.bundleIdentifier, extensionPoint: $0.extensionPointIdentifier,
                message: $0.message)
        }
    }
}
