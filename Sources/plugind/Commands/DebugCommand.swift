import CPlugindShims
import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindSystem

/// `plugind debug`: a plugin's worker under the owner's debugger, stopped before the plugin's init.
struct DebugCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let input = CommandOption.value("input", "<file>", "Send the contents of a file as a request once the plugin is ready.")
        static let answer = CommandOption.value("answer", "<text>", "Answer every question the plugin asks with this text.")
        static let gdb = CommandOption.value("gdb", "<path>", "The debugger to run (default: gdb on PATH).")
        static let batch = CommandOption.flag(
            "batch", "Run gdb without a prompt: stop in the plugin's init, print its backtrace, detach, go on.")
    }

    static let description = CommandDescription(
        name: "debug",
        abstract: "Run a plugin's worker under gdb, stopped before the plugin's init.",
        usage: "<id> [<input>] [--input <file>] [--answer <text>] [--batch] [--gdb <path>]",
        discussion: """
            Launches the approved plugin in a worker of its own, confined exactly as 'plugind run'
            would, except that once every layer is applied the worker is made traceable by your
            debugger (dumpable; traceable by any process of your user where Yama restricts
            ptrace). gdb attaches, the worker stops before the plugin's init, and gdb stops again
            at the first instruction of the init: set breakpoints, then 'continue'. Once the
            plugin is ready, INPUT (or --input FILE) is sent as a request and the response
            printed; requests wait as long as you debug. Only this command of yours starts such
            a worker; a host never does. --batch prints the init's backtrace and lets the plugin
            run on (for scripts and tests).

            gdb itself is not confined: it runs as you and reads the plugin's library and its
            debug information (DWARF) with your rights, so a library made to attack gdb's readers
            attacks your account; debug only plugins you would open in gdb anyway. plugind starts
            gdb with auto-loading of scripts off (gdb-scripts, python-scripts, guile-scripts,
            local-gdbinit: nothing the bundle carries or names is run, whatever gdb's safe-path),
            keeping libthread_db, from the system's directories only, for threads.
            """,
        arguments: [("<id>", "The plugin's identifier."), ("<input>", "A request to send once the plugin is ready, as text.")],
        options: [Options.input, Options.answer, Options.gdb, Options.batch]
    )

    let request: RequestInput
    var identifier: String { request.identifier }
    let answer: String?
    let debugger: String?
    let batch: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        request = try RequestInput(arguments, option: Options.input, command: "debug")
        answer = arguments.value(Options.answer)
        debugger = arguments.value(Options.gdb)
        batch = arguments.flag(Options.batch)
    }

    /// Given to gdb before it reads anything: no script the plugin names or carries is run (a
    /// `.debug_gdb_scripts` section, `<library>-gdb.py`, `-gdb.gdb` or `-gdb.scm` beside it, a
    /// `.gdbinit`), whatever safe-path gdb was built or configured with. `set auto-load off` covers
    /// every kind, Guile's too where gdb has it (naming guile-scripts is an error in a gdb without
    /// Guile, as Debian's); libthread_db, which threads need, comes back from the system's
    /// directories only, never from beside a libpthread the plugin brings.
    static let scriptSettings = ["set auto-load off", "set auto-load libthread-db on", "set libthread-db-search-path $sdir"]

    /// gdb's commands: on to the stop before init (a SIGTRAP carrying the init's address), a
    /// temporary breakpoint there, on to it.
    static func debuggerArguments(pid: Int32, executable: String, batch: Bool) -> [String] {
        // The local file system, not the worker's through its mount namespace: gdb's helper that
        // enters it cannot (the namespace belongs to the worker's user namespace), and hangs.
        var arguments = ["-q", "-nx"] + scriptSettings.flatMap { ["-iex", $0] }
        arguments += [
            "-iex", "set sysroot /", "-iex", "set complaints 0", executable, "-p", "\(pid)", "-ex", "set pagination off", "-ex", "continue",
        ]
        arguments += ["-ex", "tbreak *(void (*)(void))$_siginfo._sifields._rt.si_sigval.sival_ptr", "-ex", "continue"]
        if batch { arguments = ["-batch"] + arguments + ["-ex", "backtrace", "-ex", "detach"] }
        return arguments
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let gdb = try locateDebugger()
        let input = request.isGiven ? try request.read() : nil
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: context.host), host: context.host)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: context.host), onInterruption: {})
        configuration.host = context.host
        let session = DebuggerSession(executable: gdb, batch: batch)
        context.console.err(
            "note: \(identifier) runs confined as usual, but traceable by your debugger; gdb stops in the plugin's init\n")
        let process: AppExtensionProcess
        do {
            process = try await AppExtensionProcess.debugging(configuration: configuration) { pid, executable in
                session.start(pid: pid, worker: executable)
            }
        } catch {
            _ = await session.exit()
            throw error
        }
        defer { process.invalidate() }
        if let input {
            let connection = try await process.connection(answering: answer)
            let response = try await connection.send(input, timeout: AppExtensionProcess.debuggingDeadline)
            try context.console.outBytes(response)
        }
        let status = await session.exit()
        await process.invalidateAndWait()
        guard status == 0 else {
            throw CommandFailure(message: "\(gdb) exited with status \(status)", status: .failure)
        }
        return .success
    }

    private func locateDebugger() throws(CommandFailure) -> String {
        if let debugger {
            guard ProcessEnvironment.isExecutableFile(debugger) else {
                throw CommandFailure(message: "\(debugger) is not an executable file", status: .unavailable)
            }
            return debugger
        }
        let path = ProcessEnvironment.value("PATH") ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") where ProcessEnvironment.isExecutableFile("\(directory)/gdb") {
            return "\(directory)/gdb"
        }
        throw CommandFailure(message: "gdb is not installed (apt install gdb), or name a debugger with --gdb", status: .unavailable)
    }
}

/// The debugger's process: started as soon as the worker's pid is known, waited for at the end.
/// Spawned with plugind's own spawn, which clears the signal mask in the child: the launch runs on
/// a thread of the concurrency pool, whose signals are blocked, and gdb that inherits a blocked
/// SIGCHLD never hears its tracee stop.
private final class DebuggerSession: Sendable {
    let executable: String
    let batch: Bool
    private let process = Locked<FileDescriptor?>(nil)

    init(executable: String, batch: Bool) {
        self.executable = executable
        self.batch = batch
    }

    /// `worker`: the executable the worker runs a sealed copy of, for gdb's symbols.
    func start(pid: Int32, worker: String) {
        let input = batch ? (try? FileDescriptor.openNullDevice(writable: false)) : nil
        defer { input?.close() }
        let request = SpawnRequest(
            executablePath: executable,
            arguments: [executable] + DebugCommand.debuggerArguments(pid: pid, executable: worker, batch: batch),
            environment: ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" },
            // The terminal's: gdb reads the owner's commands and prints to the same screen.
            descriptors: [input ?? .standardInput, .standardOutput, .standardError], options: [])
        let debugger: FileDescriptor
        do {
            debugger = try spawnProcess(request).processDescriptor
        } catch {
            // The worker would wait for it in vain.
            Glibc.kill(pid, SIGKILL)
            FileHandle.standardError.write(Data("plugind: cannot start \(executable): \(error)\n".utf8))
            return
        }
        process.withLock { $0 = debugger }
        Thread { Self.release(pid, once: debugger) }.start()
    }

    /// Tells the worker to go on once the debugger traces it; ends it when the debugger exits
    /// first (it could not attach), so that the launch fails at once instead of waiting.
    private static func release(_ pid: Int32, once debugger: FileDescriptor) {
        // Polled: nothing announces an attach. Every 10 ms, for the minute the worker waits.
        for _ in 0..<6000 {
            var watched = pollfd(fd: debugger.rawValue, events: Int16(POLLIN), revents: 0)
            if poll(&watched, 1, 10) > 0 {
                Glibc.kill(pid, SIGKILL)
                return
            }
            if everyThreadTraced(pid) {
                _ = plugind_shim_debug_release(pid)
                return
            }
        }
    }

    /// Whether the debugger traces every thread of `pid`: it attaches them one by one, and the
    /// thread that waits for the release (not the first) must be traced when it stops for init.
    private static func everyThreadTraced(_ pid: Int32) -> Bool {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !threads.isEmpty else {
            return false
        }
        return threads.allSatisfy { thread in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8),
                let line = text.split(separator: "\n").first(where: { $0.hasPrefix("TracerPid:") }),
                let tracer = Int(line.dropFirst("TracerPid:".count).trimmingCharacters(in: .whitespaces))
            else { return false }
            return tracer > 0
        }
    }

    /// Waits for the debugger to exit; its status (0 when it never started: the launch failed first).
    func exit() async -> Int32 {
        guard let debugger = process.withLock({ $0 }) else { return 0 }
        return await withCheckedContinuation { continuation in
            Thread {
                let exit = try? debugger.waitForProcessExit()
                debugger.close()
                switch exit?.reason {
                case .exited(let status)?: continuation.resume(returning: status)
                case .signaled(let signal, _)?: continuation.resume(returning: 128 + signal)
                case nil: continuation.resume(returning: 1)
                }
            }.start()
        }
    }
}
