import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindSystem

/// `plugind info`: everything about one plugin: where it is, what it asks for, whether it may
/// run and why, its functions, and the confinement its worker gets on this machine.
struct InfoCommand: PlugindCommand {
    static let description = CommandDescription(
        name: "info",
        abstract: "Show a plugin's details, state, functions and confinement.",
        usage: "<id> [--json] [--no-probe]",
        discussion: """
            The confinement section comes from a worker that applies the plugin's confinement
            and exits without loading its code (safe for plugins not approved yet).
            """,
        arguments: [("<id>", "The plugin's identifier.")],
        options: [
            ("--json", "Print JSON for scripts."),
            ("--no-probe", "Do not start a worker to verify the confinement layers."),
        ],
        flagOptions: ["json", "no-probe"]
    )

    let identifier: String
    let json: Bool
    let probe: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals(["id"])[0]
        json = arguments.flag("json")
        probe = !arguments.flag("no-probe")
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: context.host), host: context.host)
        let entry = item.entry
        let manifest = entry.manifest
        let libraryDigest =
            (try? ContentHashes.shared.digest(ofFileAtPath: entry.bundle.libraryPath, identity: entry.bundle.libraryStatus.identity))
            ?? "unreadable"
        let manifestDigest =
            (try? ContentHashes.shared.digest(ofFileAtPath: entry.bundle.manifestPath, identity: entry.bundle.manifestStatus.identity))
            ?? "unreadable"
        let limits = EffectiveLimits(LaunchPlan(entry: entry, host: context.host))
        var layers: [AppExtensionProcess.ConfinementLayer] = []
        var probeError: String?
        if probe {
            do {
                layers = try await AppExtensionProcess.probeConfinement(of: item, host: context.host)
            } catch {
                probeError = "\(error)"
            }
        }

        if json {
            try context.console.json(
                InfoDocument(
                    plugin: ListDocument(items: [item], problems: []).plugins[0],
                    librarySHA256: libraryDigest,
                    manifestSHA256: manifestDigest,
                    limits: limits,
                    confinement: layers.map { .init(layer: $0.name, state: $0.state.rawValue, detail: $0.detail) },
                    confinementError: probeError,
                    warnings: entry.bundle.warnings
                )
            )
            return .success
        }
        var lines = [
            "\(manifest.name) \(manifest.version)",
            "  identifier:      \(manifest.identifier)",
            "  extension point: \(manifest.extensionPoint)",
        ]
        if let text = manifest.description { lines.append("  description:     \(text)") }
        lines += [
            "  state:           \(item.stateCode)" + (item.diagnostic.map { " (\($0.message))" } ?? ""),
            "  bundle:          \(entry.bundle.bundlePath)" + (entry.root.isBundledWithHost ? " (bundled with the host)" : ""),
            "  library:         \(entry.bundle.libraryPath)" + (entry.bundle.usesSystemLibrary ? " (system library)" : ""),
            "  library SHA-256: \(libraryDigest)",
            "  manifest SHA-256: \(manifestDigest)",
            "  permissions:     \(manifest.permissions.summary)",
            "  limits:          \(limits.summary)",
        ]
        for warning in entry.bundle.warnings { lines.append("  warning:         \(warning)") }
        if manifest.functions.isEmpty {
            lines.append("  functions:       none (requests only)")
        } else {
            lines.append("  functions:")
            lines += manifest.functions.map { "    \($0)" }
        }
        if probe {
            lines.append("  confinement (verified by a worker on this machine):")
            if let probeError {
                lines.append("    cannot be determined: \(probeError)")
            }
            lines += layers.map { "    \($0.name): \($0.state.rawValue) — \($0.detail)" }
        }
        context.console.out(lines.joined(separator: "\n") + "\n")
        return .success
    }
}

/// The limits a plugin's worker gets: what the manifest asks, capped by the host.
struct EffectiveLimits: Encodable {
    var memoryBytes: UInt64
    var cpuSeconds: UInt64
    var openFiles: UInt64
    var requestTimeoutMilliseconds: Int64
    var maxMessageBytes: UInt64

    init(_ plan: LaunchPlan) {
        let limits = plan.load.limits
        memoryBytes = limits.addressSpaceBytes
        cpuSeconds = limits.cpuSeconds
        openFiles = limits.openFiles
        let (seconds, attoseconds) = plan.requestTimeout.components
        requestTimeoutMilliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        maxMessageBytes = limits.maxMessageBytes
    }

    var summary: String {
        "memory \(ByteCount(memoryBytes)), CPU \(cpuSeconds) s, open files \(openFiles), "
            + "request timeout \(Double(requestTimeoutMilliseconds) / 1000) s, message \(ByteCount(maxMessageBytes))"
    }
}

struct InfoDocument: Encodable {
    struct Layer: Encodable {
        var layer: String
        var state: String
        var detail: String
    }

    var formatVersion = 1
    var plugin: ListDocument.Plugin
    var librarySHA256: String
    var manifestSHA256: String
    var limits: EffectiveLimits
    var confinement: [Layer]
    var confinementError: String?
    var warnings: [String]
}
