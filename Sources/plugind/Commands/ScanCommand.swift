import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindSystem
import PlugindTypes

/// `plugind scan`: finds the LADSPA and frei0r plugins installed on the machine and lists each as
/// a plugin of its own, which the owner approves, and hosts and `plugind run` use, as any other.
struct ScanCommand: PlugindCommand {
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON for scripts: the plugins found and the libraries that failed.")
        static let timeout = CommandOption.value("timeout", "<seconds>", "How long one library may take to describe itself (default 30).")
    }

    static let description = CommandDescription(
        name: "scan",
        abstract: "Find the LADSPA and frei0r plugins installed on this machine.",
        usage: "[--json] [--timeout <seconds>]",
        discussion: """
            Reads the libraries in $LADSPA_PATH (else ~/.ladspa), /usr/local/lib/ladspa and
            /usr/lib/ladspa, and in $FREI0R_PATH (else ~/.frei0r-1/lib), /usr/local/lib/frei0r-1
            and /usr/lib/frei0r-1. Each library must be root's, in directories only root may
            write, as a system library must; each is described by a confined worker with no
            permissions (its code never runs in plugind), and what it said is kept until the
            package changes the file. Every plugin is then listed as ladspa.<library>.<label>
            or frei0r.<library> (characters other than letters, digits and '-' become '-'),
            for extension points org.plugind.ladspa and org.plugind.frei0r: approve one with
            'plugind approve', or a whole library with an administrator rule such as ladspa.cmt.*.
            A library that is refused, crashes or hangs while being described is named, and the
            rest are listed.
            """,
        options: [Options.json, Options.timeout]
    )

    let json: Bool
    let timeout: Duration

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        _ = try arguments.positionals([])
        json = arguments.flag(Options.json)
        let seconds = arguments.value(Options.timeout) ?? "30"
        guard let value = Double(seconds), value > 0, value <= 3600 else {
            throw UsageError(message: "--timeout takes seconds from 0 to 3600, not '\(seconds)'", command: "scan")
        }
        timeout = .milliseconds(Int64(value * 1000))
    }

    /// `plugind scan --json`.
    struct Document: JSONDocument {
        static let formatVersion = 1
        var plugins: [ForeignPluginListing]
        var failures: [ForeignPluginDiscovery.Report.Failure]
        var scanned: Int
        var reused: Int
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let console = context.console
        let terminal = console.standardErrorIsTerminal && !json
        let report = try await ForeignPluginDiscovery.refresh(
            host: context.host, directories: ForeignPluginDirectory.defaults(environment: ProcessInfo.processInfo.environment),
            scanTimeout: timeout
        ) { done, total, _ in
            if terminal {
                console.errControl("\r")
                console.err("scanning " + ProgressDisplay.bar(completed: UInt64(done), total: UInt64(total)))
            }
        }
        if terminal { console.errControl("\r\u{1B}[2K") }
        declarePoints(context)
        if json {
            try console.json(Document(plugins: report.plugins, failures: report.failures, scanned: report.scanned, reused: report.reused))
            return .success
        }
        for failure in report.failures {
            console.err("\(failure.library.inert): \(failure.reason.inert)\n")
        }
        let ladspa = report.plugins.filter { $0.abi == "ladspa" }.count
        console.out(
            "\(report.plugins.count) plugins (\(ladspa) LADSPA, \(report.plugins.count - ladspa) frei0r) from \(report.scanned + report.reused) libraries (\(report.scanned) described now, \(report.reused) known)"
                + (report.failures.isEmpty ? "" : "; \(report.failures.count) could not be used (above)") + ".\n")
        console.out("List them with 'plugind list --all'; approve one with 'plugind approve <identifier>'.\n")
        return .success
    }

    /// Declares the two points the plugins are listed for, in the owner's directory, unless an
    /// installed host (or a package) declares them already: owner-approved plugins of any host.
    private func declarePoints(_ context: CommandContext) {
        let declared = context.host.declaredExtensionPoints.declarations
        guard let directory = context.host.userExtensionPointsDirectory else { return }
        for (abi, what) in [(ForeignABI.ladspa, "LADSPA audio effects"), (.frei0r, "frei0r video filters, sources and mixers")] {
            let identifier = ForeignPluginIdentity.extensionPoint(abi)
            guard declared[identifier] == nil else { continue }
            let descriptor = ExtensionPointDescriptor(
                identifier: identifier, host: "org.plugind", scope: "none", enhancedSecurity: false,
                description: "\(what) installed by the machine's packages, each in its own confined worker", version: nil)
            do {
                _ = try descriptor.install(in: directory.path)
            } catch {
                context.console.warning("cannot declare \(identifier): \(error.description.inert)")
            }
        }
    }
}
