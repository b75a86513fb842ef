import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind verify`: every check a bundle must pass before it loads, with the fix for each
/// problem.
struct VerifyCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let load = CommandOption.flag("load", "Also load the library in a worker with no permissions (runs its constructors).")
        static let json = CommandOption.flag("json", "Print JSON for scripts (a report per bundle, under \"reports\").")
    }

    static let description = CommandDescription(
        name: "verify",
        abstract: "Check plugin bundles before they are installed or loaded.",
        usage: "<bundle> ... [--load] [--json]",
        discussion: """
            Runs none of the plugin's code: everything is read from the files. Checks the manifest
            schema, what the bundle holds (no hard links, symlinks leading out, device files, files
            others may write), that the library is inside the bundle, ELF class and machine, that
            every needed library resolves (inside the bundle or on the system), that the entry
            point and every declared function are exported, and the plugin ABI version the library
            records. Each problem is printed on its own line with its fix. With --load, a worker
            also loads the library without calling the plugin's init, under the default
            confinement and no permissions at all (its constructors run: use it only on bundles
            you trust). Exit status 0 when every bundle passes, 1 otherwise.
            """,
        arguments: [("<bundle>", "A bundle directory (holding manifest.json).")],
        options: [Options.load, Options.json]
    )

    let bundles: [String]
    let json: Bool
    let load: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        bundles = try arguments.positionals(["bundle"], variadic: true)
        json = arguments.flag(Options.json)
        load = arguments.flag(Options.load)
    }

    struct Report: Encodable {
        var bundle: String
        var identifier: String?
        var ok: Bool
        var passed: [String]
        var problems: [VerificationProblem]
        var warnings: [String]
    }

    /// `plugind verify --json`: a report per bundle, in the order given.
    struct Document: JSONDocument {
        static let formatVersion = 1
        var reports: [Report]
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        var reports: [Report] = []
        let resolver = LibraryResolver()
        let declared = context.host.declaredExtensionPoints
        for bundle in bundles {
            var result = BundleVerifier.verify(bundleAt: bundle, resolver: resolver)
            if load, let loadable = result.loadable {
                do {
                    let inspection = try await AppExtensionProcess.inspectLibrary(of: loadable, host: context.host)
                    result.passed.append(inspection.hasEntryPoint ? "load (plugin ABI \(inspection.abiVersion))" : "load (function-only)")
                } catch let error as AppExtensionError {
                    result.problems.append(VerificationProblem(check: "load", message: error.reason, fix: Self.fix(for: error)))
                }
            }
            // Not a problem of the bundle, but the author wants to know: no installed host would
            // list it, or the one that declares its point declares a version it does not support.
            if let manifest = result.manifest {
                let declaration = PointDeclaration(of: manifest, in: declared)
                if declaration.host == nil || !declaration.isCompatible { result.warnings.append(declaration.sentence) }
            }
            reports.append(
                Report(
                    bundle: result.bundlePath,
                    identifier: result.manifest?.identifier,
                    ok: result.problems.isEmpty,
                    passed: result.passed,
                    problems: result.problems,
                    warnings: result.warnings
                )
            )
        }
        if json {
            try context.console.json(Document(reports: reports))
        } else {
            for report in reports {
                let name = report.identifier.map { "\($0.inert) (\(report.bundle.inert))" } ?? report.bundle.inert
                if report.ok {
                    context.console.out("\(name): ok (\(report.passed.joined(separator: ", ")))\n")
                } else {
                    context.console.out("\(name): \(report.problems.count) problem(s)\n")
                }
                for problem in report.problems {
                    context.console.out("  error: [\(problem.check)] \(problem.message.inert)\n         fix: \(problem.fix.inert)\n")
                }
                for warning in report.warnings {
                    context.console.out("  warning: \(warning.inert)\n")
                }
            }
        }
        return reports.allSatisfy(\.ok) ? .success : .failure
    }

    static func fix(for error: AppExtensionError) -> String {
        switch error.code {
        case .abiMismatch: "rebuild the plugin against this plugind's plugind_plugin.h (PLUGIND_PLUGIN_ABI_VERSION)"
        case .symbolMissing: "export the symbol, or correct the manifest"
        case .workerCrashed, .workerExited: "the library fails while loading (in a constructor); run its initialisation under a debugger"
        case .timedOut: "the library does not finish loading; look for a constructor that blocks"
        default: "see the message; 'plugind info' shows the bundle as plugind sees it"
        }
    }
}
