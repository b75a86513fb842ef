import Foundation
import Glibc
import PlugindSystem
import TestSupport

/// A real terminal for a test: a tmux server of its own (its own socket, no configuration file)
/// with one pane running a shell script, read back through `capture-pane`.
struct TmuxTerminal {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let socket: String
    /// The tmux server, which is no child of the test: `end()` waits for it to be gone.
    let serverPID: Int32

    /// Starts `script` (run by /bin/sh) in a `width`×`height` terminal.
    init(directory: String, script: String, width: Int, height: Int) async throws {
        socket = directory + "/tmux.socket"
        let scriptPath = directory + "/terminal-command.sh"
        try Data(script.utf8).write(to: URL(fileURLWithPath: scriptPath))
        let log = directory + "/tmux-start.log"
        let status = try await Self.startServer(
            socket: socket, log: log,
            // The pane's command runs under default-shell, which otherwise is the user's login
            // shell: nologin for a system user such as the one the tests run as.
            [
                "start-server", ";", "set-option", "-g", "default-shell", "/bin/sh", ";", "new-session", "-d", "-s", "test", "-x",
                "\(width)", "-y", "\(height)", "exec /bin/sh \(scriptPath)",
            ])
        guard status == .exited(status: 0) else {
            let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure(description: "tmux could not start (\(status)): \(message)")
        }
        let answer: Result<String, any Error>
        do { answer = .success(try await Self.run(socket, ["display-message", "-p", "#{pid}"])) } catch { answer = .failure(error) }
        guard let pid = (try? answer.get()).flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            _ = try? await Self.run(socket, ["kill-server"])
            let log = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure(description: "tmux did not say its server's pid: \(answer); its log: \(log)")
        }
        serverPID = pid
    }

    /// Runs the first tmux client, which forks the server. Not through Foundation's Process: it
    /// learns that a child ended when a socket the child inherited closes, and the server
    /// inherits it too and keeps it open. Here the client gets exactly three descriptors
    /// (/dev/null in, `log` out), so the server holds nothing of this process.
    private static func startServer(socket: String, log: String, _ arguments: [String]) async throws -> ProcessExit.Reason {
        let input = try FileDescriptor.open("/dev/null", O_RDONLY)
        defer { input.close() }
        let output = try FileDescriptor.open(log, O_WRONLY | O_CREAT | O_TRUNC, permissions: 0o600)
        defer { output.close() }
        let client = try spawnProcess(
            SpawnRequest(
                executablePath: "/usr/bin/tmux",
                arguments: ["tmux", "-S", socket, "-f", "/dev/null"] + arguments,
                environment: environment.map { "\($0.key)=\($0.value)" },
                descriptors: [input, output, output],
                options: []
            ))
        let exit = try await Deadline.wait("tmux to start its server") {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessExit.Reason, any Error>) in
                Thread {
                    defer { client.processDescriptor.close() }
                    do {
                        guard let exit = try client.processDescriptor.waitForProcessExit() else {
                            throw Failure(description: "tmux could not be waited for")
                        }
                        continuation.resume(returning: exit.reason)
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }.start()
            }
        }
        return exit
    }

    private static let environment = ["PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "HOME": NSTemporaryDirectory()]

    private static func run(_ socket: String, _ arguments: [String]) async throws -> String {
        let output = try await CommandRunner.run(
            "/usr/bin/tmux", ["-S", socket] + arguments,
            environment: environment)
        guard output.status == 0 else {
            throw Failure(description: "tmux \(arguments.joined(separator: " ")) failed (\(output.status)): \(output.stderr)")
        }
        return output.stdout
    }

    func tmux(_ arguments: String...) async throws -> String {
        try await Self.run(socket, arguments)
    }

    /// The screen as text, one line per row (with `styles`, with the escape sequences that
    /// colour it).
    func screen(styles: Bool = false) async throws -> String {
        try await Self.run(socket, ["capture-pane", "-p", "-t", "test"] + (styles ? ["-e"] : []))
    }

    /// A tmux format evaluated for the pane, e.g. "#{alternate_on}".
    func value(_ format: String) async throws -> String {
        try await Self.run(socket, ["display-message", "-p", "-t", "test", format]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func send(_ keys: String...) async throws {
        _ = try await Self.run(socket, ["send-keys", "-t", "test"] + keys)
    }

    /// Types `text` literally.
    func type(_ text: String) async throws {
        _ = try await Self.run(socket, ["send-keys", "-t", "test", "-l", text])
    }

    /// Waits until the screen satisfies `condition` and returns it. Re-reads the screen until
    /// then; the deadline only stops a test that would otherwise hang.
    @discardableResult
    func waitForScreen(_ what: String, seconds: Double = 60, _ condition: @escaping @Sendable (String) -> Bool) async throws -> String {
        let socket = socket
        let lastScreen = Locked("")
        do {
            return try await Deadline.wait(what, seconds: seconds) {
                while true {
                    let screen = try await Self.run(socket, ["capture-pane", "-p", "-t", "test"])
                    if condition(screen) { return screen }
                    lastScreen.withLock { $0 = screen }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        } catch let timeout as Deadline.Expired {
            throw Failure(description: "\(timeout); the screen was:\n\(lastScreen.withLock { $0 })")
        }
    }

    @discardableResult
    func waitForScreen(containing text: String, seconds: Double = 60) async throws -> String {
        try await waitForScreen("the screen to show \"\(text)\"", seconds: seconds) { $0.contains(text) }
    }

    /// The pid of the process the pane's shell is running (the program under test).
    func programPID() async throws -> Int32 {
        guard let shell = Int32(try await value("#{pane_pid}")), let program = ProcessInspection.children(of: shell).first else {
            throw Failure(description: "the pane runs no program")
        }
        return program
    }

    /// Runs `body` with a terminal running `script`, and ends the terminal (its server and every
    /// process in it) whether `body` returns or throws.
    static func with(
        directory: String, script: String, width: Int, height: Int, _ body: (TmuxTerminal) async throws -> Void
    ) async throws {
        let terminal = try await TmuxTerminal(directory: directory, script: script, width: width, height: height)
        do {
            try await body(terminal)
        } catch {
            await terminal.end()
            throw error
        }
        await terminal.end()
    }

    /// Stops the server and waits until it is gone.
    func end() async {
        _ = try? await Self.run(socket, ["kill-server"])
        _ = await Deadline.processExit(serverPID)
    }
}
