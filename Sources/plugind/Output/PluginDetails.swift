import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// What `plugind info` (and the details screen of `plugind browse`) shows about one plugin: the
/// facts gathered once, and their text.
struct PluginDetails {
    let item: Inventory.Item
    let digest: BundleDigest?
    let approval: Approval?
    /// The publisher's trust that makes it available, when that is why.
    let trust: PublisherTrust?
    /// The confinement layers a worker verified on this machine, when one was asked to.
    let layers: [AppExtensionProcess.ConfinementLayer]
    let probeError: String?
    let probed: Bool
    /// The plugin's recent crashes and quarantine, or why the crash log cannot be read.
    let crashes: Result<CrashLog.PluginCrashes?, CrashLog.Problem>
    /// Its workers' launches and requests, over every host of this user.
    let activity: PluginActivityStore.Record?
    /// The layers this machine's policy accepts as missing, and whether the host requires the
    /// others (nil: it runs best-effort or without confinement, and no missing layer refuses).
    let missingLayerPolicy: MissingLayerAcceptance?

    /// Reads and hashes the bundle, and with `probe` starts a worker that applies the
    /// confinement and reports it.
    static func gather(_ item: Inventory.Item, host: AppExtensionHost, probe: Bool) async -> PluginDetails {
        let entry = item.entry
        let digest = try? ContentHashes.shared.digest(of: entry.bundle)
        var layers: [AppExtensionProcess.ConfinementLayer] = []
        var probeError: String?
        if probe {
            // Best-effort, so that every layer is shown, the missing ones too: the probe loads
            // no plugin code. Which missing layer a launch would refuse is said beside it.
            var probing = host
            if probing.confinement == .required { probing.confinement = .bestEffort }
            do {
                layers = try await AppExtensionProcess.probeConfinement(of: item, host: probing)
            } catch {
                probeError = "\(error)"
            }
        }
        let policy = PolicySnapshot.read(for: host)
        return PluginDetails(
            item: item, digest: digest, approval: policy.approval(for: entry), trust: PublisherTrust.of(item, policy: policy),
            layers: layers,
            probeError: probeError, probed: probe, crashes: CrashLog(host: host).read().map { $0.plugins[entry.identifier] },
            activity: PluginActivityStore(host: host).record(of: entry.identifier),
            missingLayerPolicy: host.confinement == .required ? MissingLayerAcceptance.read(for: host) : nil)
    }

    /// What a missing `layer` does to a launch under this host and machine.
    func missingLayerVerdict(_ layer: String) -> String {
        guard let policy = missingLayerPolicy else { return "runs without it (best-effort host)" }
        let by = policy.acceptedBy(layer)
        if !by.isEmpty { return "accepted missing by " + by.joined(separator: " and ") }
        return "a launch refuses; " + policy.advice(accepting: [layer])
    }

    /// Each layer the machine's policy accepts as missing, and whether it is missing now (nil:
    /// not probed).
    var acceptedMissingLayers: [(layer: String, missingNow: Bool?, acceptedBy: [String])] {
        guard let policy = missingLayerPolicy else { return [] }
        return policy.layers.map { layer in
            let found = layers.first { $0.name == layer }
            return (layer, found.map { $0.state == .unavailable }, policy.acceptedBy(layer))
        }
    }

    /// The text, every string from the bundle made inert.
    func lines(host: AppExtensionHost) -> [String] {
        let manifest = item.entry.manifest
        var lines = PluginDescription.lines(entry: item.entry, digest: digest, host: host, approval: approval)
        let why = item.diagnostic?.message ?? trust?.sentence(allowedBy: item.allowedBy) ?? item.allowedBy
        lines.insert("  state:           \(item.stateCode)" + (why.map { " (\($0.inert))" } ?? ""), at: 2)
        for warning in item.entry.bundle.warnings { lines.append("  warning:         \(warning.inert)") }
        if manifest.functions.isEmpty {
            lines.append("  functions:       none (requests only)")
        } else {
            lines.append("  functions:")
            lines += manifest.functions.map { "    \($0)" }
        }
        if probed {
            lines.append("  confinement (verified by a worker on this machine):")
            if let probeError {
                lines.append("    cannot be determined: \(probeError.inert)")
            }
            lines += layers.map { layer in
                "    \(layer.name): \(layer.state.rawValue) — \(layer.detail.inert)"
                    + (layer.state == .unavailable ? " [\(missingLayerVerdict(layer.name))]" : "")
            }
        }
        let accepted = acceptedMissingLayers
        if !accepted.isEmpty {
            let each = accepted.map { layer in
                layer.layer + (layer.missingNow.map { $0 ? " (missing now)" : " (applied now)" } ?? "")
            }
            lines.append("  accepted missing on this machine: " + each.joined(separator: ", "))
        }
        lines.append(activityLine)
        lines += crashLines
        return lines
    }

    /// When a worker last ran, and what its workers served.
    private var activityLine: String {
        guard let activity, let launched = activity.lastLaunch else { return "  last activity:   never launched (by this user)" }
        let time = ISO8601DateFormatter()
        return "  last activity:   launched \(time.string(from: launched)) (\(activity.launches) launch(es)); "
            + "\(activity.requestsAnswered) request(s) answered, \(activity.requestsFailed) failed"
            + (activity.lastEnd.map { "; last worker ended \(time.string(from: $0))" } ?? "")
    }

    /// The last crashes, each with the tail of the worker's output.
    private var crashLines: [String] {
        let record: CrashLog.PluginCrashes
        switch crashes {
        case .failure(let problem): return ["  crashes:         unknown: \(problem.description.inert)"]
        case .success(nil): return ["  crashes:         none recorded"]
        case .success(let found?): record = found
        }
        var lines = [
            "  crashes:         \(record.crashes.count) recent" + (record.quarantine.map { ", quarantined: \($0.reason.inert)" } ?? "")
        ]
        let time = ISO8601DateFormatter()
        for crash in record.crashes.suffix(3) {
            lines.append("    \(time.string(from: crash.time))  \(crash.reason.inert)")
            // The innermost frames say where; 'plugind crashes' shows them all.
            lines += (crash.backtrace ?? []).prefix(3).map { "      \($0)" }
            let output = crash.output.split(separator: "\n", omittingEmptySubsequences: true).suffix(5)
            lines += output.map { "      | \(String($0).inert)" }
        }
        if record.crashes.contains(where: { $0.backtrace != nil }) {
            lines.append("    (every frame: plugind crashes \(item.entry.identifier.inert))")
        }
        if let refusals = record.refusals {
            lines.append("  sandbox refused: \(refusals.count) call(s), last \(time.string(from: refusals.time)): \(refusals.last.inert)")
        }
        return lines
    }
}
