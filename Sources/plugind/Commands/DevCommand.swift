import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindSystem

/// `plugind dev`: the author's loop. Builds a project (`make`), runs its bundle as it is —
/// neither installed nor approved, confined as an approved plugin with the permissions its
/// manifest asks for — and, unless `--once`, rebuilds and relaunches on every change of its
/// sources.
struct DevCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let once = CommandOption.flag("once", "Build, answer one request and exit (for scripts and tests).")
        static let input = CommandOption.value("input", "<file>", "Read the request from a file.")
        static let answer = CommandOption.value("answer", "<text>", "Answer every question the plugin asks with this text.")
        static let timeout = CommandOption.value(
            "timeout", "<seconds>", "Deadline for each answer (default: the plugin's, at most the host's cap).")
        static let quiet = CommandOption.flag("quiet", "Do not show progress or the plugin's log.")
    }

    static let description = CommandDescription(
        name: "dev",
        abstract: "Build a plugin project and run its bundle as it is built, again on every change.",
        usage: "[<directory>] [<input>] [--once] [--input <file>] [--answer <text>] [--timeout <seconds>] [--quiet]",
        discussion: """
            Runs 'make' in DIRECTORY (the current directory by default; what 'plugind new'
            scaffolded, in any language), then the bundle under its build/ directory, without
            installing or approving it: confined exactly as an approved plugin with the
            permissions its manifest asks for, which it prints. The bundle is visible to this
            process only: no host lists it, no approval or crash record is written. With --once
            it answers one request (INPUT, --input FILE, or all of stdin) and exits with run's
            statuses. Without --once it answers INPUT (or --input FILE) after every build and
            each line of stdin as a request of its own, one line on stdout per answer, and
            rebuilds and relaunches whenever a source changes (build/, .build/, target/ and .git/
            are not watched); a build that fails shows the compiler's errors and waits for the
            next change. Before every build it refuses a project that another user could change:
            the project directory, its build/ directory and the Makefile must be yours or root's
            and writable by nobody else, and so must every directory above them (one shared with
            the sticky bit, as /tmp, is fine), since make runs unconfined as you.
            """,
        arguments: [("<directory>", "The project directory (holding its Makefile)."), ("<input>", "The request, as text.")],
        options: [Options.once, Options.input, Options.answer, Options.timeout, Options.quiet]
    )

    let directory: String
    let inputText: String?
    let inputFile: String?
    let once: Bool
    let answer: String?
    let timeout: Duration?
    let quiet: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals([], optional: ["directory", "input"])
        directory = words.first ?? FileManager.default.currentDirectoryPath
        inputText = words.count > 1 ? words[1] : nil
        inputFile = arguments.value(Options.input)
        once = arguments.flag(Options.once)
        answer = arguments.value(Options.answer)
        timeout = try arguments.seconds(Options.timeout)
        quiet = arguments.flag(Options.quiet)
        if inputText != nil && inputFile != nil {
            throw UsageError(message: "give the request as <input> or --input <file>, not both", command: "dev")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        guard FileManager.default.fileExists(atPath: directory + "/Makefile") else {
            throw CommandFailure(
                message: "\(directory.inert) has no Makefile ('plugind new NAME --lang …' writes a project with one)", status: .noInput)
        }
        try checkProject()
        if once {
            let input = try inputText.map { Array($0.utf8) } ?? StandardInput.read(from: inputFile)
            guard try build(context) else { return .failure }
            try checkProject()
            let bundle = try developmentBundle()
            return try await answerOnce(input, bundle: bundle, context)
        }
        let fixedInput: [UInt8]? =
            try inputText.map { Array($0.utf8) } ?? inputFile.map { file throws(CommandFailure) in try StandardInput.read(from: file) }
        let changes = try SourceChanges(watching: directory)
        let lines = StandardInputLines()
        var generation = 1
        while true {
            changes.discardPending()
            try checkProject()
            if try build(context) {
                // Again: make may have made build/, or changed a mode.
                try checkProject()
                do {
                    let process = try await launch(try developmentBundle(), context)
                    if let fixedInput { await send(fixedInput, to: process, context) }
                    context.console.err("dev: watching \(directory.inert) for changes; each line of stdin is a request (Ctrl-C ends)\n")
                    // Serve stdin's lines until a source changes; when stdin ends, only wait for it.
                    await withTaskGroup(of: Bool.self) { group in
                        group.addTask {
                            await changes.next()
                            return true
                        }
                        group.addTask {
                            while let line = await lines.next() { await send(Array(line.utf8), to: process, context) }
                            return false
                        }
                        while let changed = await group.next(), !changed {}
                        group.cancelAll()
                    }
                    await process.invalidateAndWait()
                } catch {
                    context.console.err("dev: \(Self.describe(error))\n")
                    await changes.next()
                }
            } else {
                context.console.err("dev: the build failed; waiting for a change\n")
                await changes.next()
            }
            generation += 1
            context.console.err("dev: a source changed; rebuilding (build \(generation))\n")
        }
    }

    /// An error as a line of the watch loop: a command failure's message, else the error's own.
    private static func describe(_ error: any Error) -> String {
        (error as? CommandFailure)?.message ?? String(describing: error).inert
    }

    /// Refuses a project another user could change: its Makefile runs unconfined as the owner,
    /// and its bundle is inspected, then launched (`DevProjectCheck`).
    private func checkProject() throws(CommandFailure) {
        if let problem = DevProjectCheck.problem(project: directory) {
            throw CommandFailure(message: "refusing to build and run \(directory.inert): \(problem.inert)", status: .notPermitted)
        }
    }

    /// Runs make; its output goes to stderr, as the compiler wrote it.
    private func build(_ context: CommandContext) throws -> Bool {
        context.console.err("dev: make -C \(directory.inert)\n")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["make", "-C", directory]
        process.standardOutput = FileHandle.standardError
        process.standardError = FileHandle.standardError
        do {
            try process.run()
        } catch {
            throw CommandFailure(
                message: "cannot run make: \(error.localizedDescription) (install it: apt install make)", status: .unavailable)
        }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// The one bundle the build made under build/.
    private func developmentBundle() throws -> String {
        let build = directory + "/build"
        let bundles = ((try? FileManager.default.contentsOfDirectory(atPath: build)) ?? []).filter { $0.hasSuffix(".appex") }.sorted()
        guard bundles.count == 1, let bundle = bundles.first else {
            throw CommandFailure(
                message: bundles.isEmpty
                    ? "the build made no bundle in \(build.inert) (a project of 'plugind new' makes build/NAME.appex)"
                    : "the build made several bundles in \(build.inert): \(bundles.joined(separator: ", ").inert)",
                status: .failure)
        }
        return build + "/" + bundle
    }

    private func launch(_ bundle: String, _ context: CommandContext) async throws -> AppExtensionProcess {
        let inspected: InspectedBundle
        switch BundleInspector.inspect(bundleAt: bundle) {
        case .success(let found): inspected = found
        case .failure(let problem):
            throw CommandFailure(message: "\((problem.identifier ?? bundle).inert): \(problem.message.inert)", status: .loadFailed)
        }
        let process = try await AppExtensionProcess.development(inspected, host: context.host)
        context.console.err(
            "dev: running \(inspected.manifest.identifier.inert) from \(bundle.inert), not installed and not approved (this process only); permissions: \(inspected.manifest.permissions.summary.inert)\n"
        )
        return process
    }

    private func answerOnce(_ input: [UInt8], bundle: String, _ context: CommandContext) async throws -> ExitStatus {
        let process = try await launch(bundle, context)
        do {
            let response = try await request(input, on: process, context)
            await process.invalidateAndWait()
            try context.console.outBytes(response)
            return .success
        } catch {
            await process.invalidateAndWait()
            throw error
        }
    }

    /// One request on a connection of its own, with the plugin's log and progress shown.
    private func request(_ input: [UInt8], on process: AppExtensionProcess, _ context: CommandContext) async throws -> [UInt8] {
        let connection = try await process.connection(answering: answer)
        defer { connection.close() }
        let display = quiet ? nil : ProgressDisplay(console: context.console)
        let messages = connection.messages()
        let reporter = Task { for await message in messages { display?.show(message) } }
        defer {
            reporter.cancel()
            display?.finish()
        }
        return try await connection.send(input, timeout: timeout)
    }

    /// A request of the watch loop: its answer on stdout, one line; its error on stderr.
    private func send(_ input: [UInt8], to process: AppExtensionProcess, _ context: CommandContext) async {
        do {
            let response = try await request(input, on: process, context)
            try context.console.outBytes(response + [0x0A])
        } catch {
            context.console.err("dev: \(Self.describe(error))\n")
        }
    }
}
