import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindSystem
import PlugindWire

/// `plugind info`: everything about one plugin: where it is, what it asks for, whether it may
/// run and why, its functions, and the confinement its worker gets on this machine.
struct InfoCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON for scripts.")
        static let noProbe = CommandOption.flag("no-probe", "Do not start a worker to verify the confinement layers.")
    }

    static let description = CommandDescription(
        name: "info",
        abstract: "Show a plugin's details, state, functions and confinement.",
        usage: "<id> [--json] [--no-probe]",
        discussion: """
            Shows the bundle's digest and every file in it with its SHA-256 (what an approval
            pins), the permissions and what they resolve to, the limits and how this machine
            enforces each one. The confinement section comes from a worker that applies the
            plugin's confinement and exits without loading its code (safe for plugins not approved
            yet); a layer missing there says whether a launch refuses or this machine's policy
            accepts it missing (plugind policy accept-missing).
            """,
        arguments: [("<id>", "The plugin's identifier.")],
        options: [Options.json, Options.noProbe]
    )

    let identifier: String
    let json: Bool
    let probe: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals(["id"])[0]
        json = arguments.flag(Options.json)
        probe = !arguments.flag(Options.noProbe)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: context.host), host: context.host)
        let entry = item.entry
        let manifest = entry.manifest
        let details = await PluginDetails.gather(item, host: context.host, probe: probe)
        let (digest, approval) = (details.digest, details.approval)
        let limits = EffectiveLimits(LaunchPlan(entry: entry, host: context.host, approval: approval), requested: manifest.limits)
        let enforcement = LimitEnforcement(permissions: approval?.permissions ?? manifest.permissions, host: context.host)

        if json {
            let signature = digest.map { BundleSignature.status(ofBundleAt: entry.bundle.bundlePath, digest: $0.digest) } ?? .unsigned
            let (publisherKey, signatureState, signatureProblem): (String?, String, String?) =
                switch signature {
                case .unsigned: (nil, "unsigned", nil)
                case .valid(let key): (key.fingerprint, "valid", nil)
                case .invalid(let reason, let key): (key?.fingerprint, "invalid", reason)
                }
            try context.console.json(
                InfoDocument(
                    plugin: ListDocument(
                        items: [item], problems: [], declared: context.host.declaredExtensionPoints, trust: { _ in details.trust }
                    ).plugins[0],
                    bundleDigest: digest?.digest,
                    publisherKey: publisherKey,
                    signature: signatureState,
                    signatureProblem: signatureProblem,
                    files: entry.bundle.contents.entries.compactMap { file in
                        switch file.kind {
                        case .directory: nil
                        case .file(let isLoadable):
                            InfoDocument.File(
                                path: file.path, kind: isLoadable ? "library" : "file", size: file.status.identity.size,
                                sha256: digest?.files[file.path], target: nil)
                        case .symlink(let target):
                            InfoDocument.File(path: file.path, kind: "symlink", size: nil, sha256: nil, target: target)
                        }
                    },
                    limits: limits,
                    limitEnforcement: enforcement,
                    confinement: details.layers.map { .init(layer: $0.name, state: $0.state.rawValue, detail: $0.detail) },
                    confinementError: details.probeError,
                    acceptedMissingLayers: details.acceptedMissingLayers.map {
                        .init(layer: $0.layer, missingNow: $0.missingNow, acceptedBy: $0.acceptedBy)
                    },
                    warnings: entry.bundle.warnings,
                    activity: details.activity
                )
            )
            return .success
        }
        context.console.out(details.lines(host: context.host).joined(separator: "\n") + "\n")
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
    var threads: UInt64
    var scratchBytes: UInt64
    /// The largest file it may write (in its grants or its scratch space).
    var fileBytes: UInt64
    /// What the manifest asks for beyond what this host allows: the worker gets the host's cap.
    var cappedByHost: [CappedLimit]

    /// A limit the manifest asks more of than the host allows.
    struct CappedLimit: Encodable, Equatable {
        /// The limit's name, as in the manifest ("memoryBytes").
        var limit: String
        var requested: UInt64
        var allowed: UInt64

        var summary: String {
            switch limit {
            case "memoryBytes", "maxMessageBytes", "scratchBytes":
                "\(limit) asks for \(ByteCount(requested)), this host allows \(ByteCount(allowed))"
            case "requestTimeoutMilliseconds": "\(limit) asks for \(requested) ms, this host allows \(allowed) ms"
            default: "\(limit) asks for \(requested), this host allows \(allowed)"
            }
        }
    }

    init(_ plan: LaunchPlan, requested: Manifest.Limits) {
        let limits = plan.load.limits
        memoryBytes = limits.addressSpaceBytes
        cpuSeconds = limits.cpuSeconds
        openFiles = limits.openFiles
        threads = limits.tasks
        scratchBytes = plan.load.view.reduce(0) { total, operation in
            if case .scratch(_, let bytes) = operation { return total + bytes }
            return total
        }
        let (seconds, attoseconds) = plan.requestTimeout.components
        requestTimeoutMilliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        maxMessageBytes = limits.maxMessageBytes
        fileBytes = limits.fileBytes
        let effective: [(String, UInt64?, UInt64)] = [
            ("memoryBytes", requested.memoryBytes, memoryBytes), ("cpuSeconds", requested.cpuSeconds, cpuSeconds),
            ("openFiles", requested.openFiles, openFiles), ("threads", requested.threads, threads),
            ("maxMessageBytes", requested.maxMessageBytes, maxMessageBytes),
            ("requestTimeoutMilliseconds", requested.requestTimeoutMilliseconds, UInt64(clamping: requestTimeoutMilliseconds)),
        ]
        cappedByHost = effective.compactMap { name, asked, got in
            guard let asked, asked > got else { return nil }
            return CappedLimit(limit: name, requested: asked, allowed: got)
        }
    }

    var summary: String {
        "memory \(ByteCount(memoryBytes)), CPU \(cpuSeconds) s, open files \(openFiles), threads \(threads), "
            + "request timeout \(Double(requestTimeoutMilliseconds) / 1000) s, message \(ByteCount(maxMessageBytes))"
            + (scratchBytes > 0 ? ", scratch \(ByteCount(scratchBytes))" : "")
            + (fileBytes > 0 ? ", files written \(ByteCount(fileBytes)) each" : "")
    }

    /// One line for the limits the host cut, or nil when it cut none.
    var cappedSummary: String? {
        cappedByHost.isEmpty ? nil : "capped by this host: " + cappedByHost.map(\.summary).joined(separator: "; ")
    }
}

struct InfoDocument: JSONDocument {
    static let formatVersion = 2

    struct Layer: Encodable {
        var layer: String
        var state: String
        var detail: String
    }

    struct AcceptedMissingLayer: Encodable {
        var layer: String
        var missingNow: Bool?
        var acceptedBy: [String]
    }

    struct File: Encodable {
        var path: String
        /// library, file or symlink
        var kind: String
        var size: UInt64?
        var sha256: String?
        var target: String?
    }

    var plugin: ListDocument.Plugin
    var bundleDigest: String?
    /// The publisher's key fingerprint and whether the signature holds: "valid", "invalid"
    /// (with `signatureProblem`) or "unsigned".
    var publisherKey: String?
    var signature: String
    var signatureProblem: String?
    var files: [File]
    var limits: EffectiveLimits
    var limitEnforcement: LimitEnforcement
    var confinement: [Layer]
    var confinementError: String?
    /// The layers this machine's policy accepts as missing (empty for a best-effort host, which
    /// runs without any), each with whether the probe found it missing (nil: not probed) and
    /// the policy files that accept it.
    var acceptedMissingLayers: [AcceptedMissingLayer]
    var warnings: [String]
    /// Launches and requests of the plugin's workers (nil: never launched by this user).
    var activity: PluginActivityStore.Record?
}
