import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind run`: sends input to a plugin's request handler and writes its response to stdout
/// byte for byte.
struct RunCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let input = CommandOption.value("input", "<file>", "Read the request from a file.")
        static let answer = CommandOption.value("answer", "<text>", "Answer every question the plugin asks with this text.")
        static let timeout = CommandOption.value(
            "timeout", "<seconds>", "Deadline for the answer (default: the plugin's, at most the host's cap).")
        static let quiet = CommandOption.flag("quiet", "Do not show progress or the plugin's log.")
        static let bestEffort = CommandOption.flag(
            "best-effort", "Run with the confinement layers this machine offers; warn of each missing one.")
    }

    static let description = CommandDescription(
        name: "run",
        abstract: "Send input to a plugin and print its response.",
        usage: "<id> [<input>] [--input <file>] [--answer <text>] [--timeout <seconds>] [--quiet] [--best-effort]",
        discussion: """
            The input is INPUT as given, or the contents of --input FILE, or all of stdin. The
            response bytes go to stdout unchanged; errors, progress and the plugin's log go to
            stderr. Progress shows as a bar when stderr is a terminal, as plain lines otherwise.
            A plugin that asks its host questions (plugin ABI 2) gets --answer TEXT to each one;
            without --answer its questions fail as unsupported. On a kernel that lacks a
            confinement layer (no user namespaces, no Landlock), the launch is refused naming
            it; --best-effort runs with the layers the machine offers and names each missing
            one on stderr.
            """,
        arguments: [("<id>", "The plugin's identifier."), ("<input>", "The request, as text.")],
        options: [Options.input, Options.answer, Options.timeout, Options.quiet, Options.bestEffort]
    )

    let request: RequestInput
    var identifier: String { request.identifier }
    let timeout: Duration?
    let quiet: Bool
    let answer: String?
    let bestEffort: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        request = try RequestInput(arguments, option: Options.input, command: "run")
        timeout = try arguments.seconds(Options.timeout)
        quiet = arguments.flag(Options.quiet)
        answer = arguments.value(Options.answer)
        bestEffort = arguments.flag(Options.bestEffort)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        var host = context.host
        if bestEffort { host.confinement = .bestEffort }
        // One launch, then exit: no pool for later launches, the launcher exec'd while the input,
        // the catalog and the policy are read, and no process left behind.
        return try await PlugindRuntime.current.oneShot(host: host) { host in try await run(context, host: host) }
    }

    private func run(_ context: CommandContext, host: AppExtensionHost) async throws -> ExitStatus {
        let input = try request.read()
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: host), host: host)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: host), onInterruption: {})
        configuration.host = host
        return try await AppExtensionProcess.withProcess(configuration: configuration) { process in
            for layer in process.confinement where layer.state == .unavailable {
                context.console.err("warning: confinement layer '\(layer.name)' is unavailable on this machine: \(layer.detail)\n")
            }
            if let cause = process.launchFallbackCause {
                context.console.err("note: \(identifier) was started on a later try: the first failed (\(cause))\n")
            }
            let limits = EffectiveLimits(LaunchPlan(entry: item.entry, host: host, approval: nil), requested: item.entry.manifest.limits)
            if let capped = limits.cappedSummary { context.console.err("note: \(identifier): \(capped)\n") }
            let connection = try await process.connection(answering: answer)
            let display = quiet ? nil : ProgressDisplay(console: context.console)
            let messages = connection.messages()
            let reporter = Task {
                for await message in messages { display?.show(message) }
            }
            defer {
                reporter.cancel()
                display?.finish()
            }
            let response = try await connection.send(input, timeout: timeout)
            // The reporter may not have shown the reports that came just before the response yet.
            // The stream ends when the worker does, so ending it first and then waiting for the
            // reporter shows every one of them.
            await process.invalidateAndWait()
            await reporter.value
            display?.finish()
            try context.console.outBytes(response)
            return .success
        }
    }
}
