import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// `plugind dev`: a project built and run as it is, without installing or approving it; again
/// after every change of its sources.
@Suite("plugind dev: the author's loop", .tags(.process, .root), .serialized, .timeLimit(.minutes(3)))
struct DevCommandTests {
    /// A scaffolded project in `language`, in a directory of the test host.
    func project(_ name: String, language: String, in test: TestHost) async throws -> String {
        let projects = try test.directory.subdirectory("projects")
        let created = try await plugind("new", name, "--lang", language, "--dir", projects, in: test)
        #expect(created.status == 0, "\(created.stderr)")
        return projects + "/" + name
    }

    @Test("--once builds, answers one request and leaves no trace: nothing installed, listed or approved")
    func once() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let greeter = try await project("DevGreeter", language: "c", in: test)
        let answered = try await plugind("dev", greeter, "world", "--once", in: test)
        #expect(answered.status == 0, "\(answered.stderr)")
        #expect(answered.stdout == "Hello from DevGreeter: world")
        #expect(answered.stderr.contains("not installed and not approved (this process only); permissions: none"), "\(answered.stderr)")
        #expect(try await plugind("list", "--all", in: test).stdout == "No plugins found.\n")
        #expect(!FileManager.default.fileExists(atPath: test.host.policyDirectory.path + "/policy.json"))
        // The request from stdin, and a plugin that asks its host.
        let asking = try await project("DevAsker", language: "cpp", in: test)
        let fromInput = try await plugind("dev", asking, "--once", "--answer", "Ada", in: test, input: Array("there".utf8))
        #expect(fromInput.stdout == "Hello, Ada: there", "\(fromInput.stderr)")
    }

    @Test("a project that does not build shows the compiler's error; a directory without a Makefile is named")
    func broken() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let broken = try await project("DevBroken", language: "c", in: test)
        try Data("this is not C\n".utf8).write(to: URL(fileURLWithPath: broken + "/src/DevBroken.c"))
        let failed = try await plugind("dev", broken, "x", "--once", in: test)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("error:") && failed.stderr.contains("DevBroken.c"), "\(failed.stderr)")
        let empty = try test.directory.subdirectory("empty")
        let noMakefile = try await plugind("dev", empty, "x", "--once", in: test)
        #expect(noMakefile.status == 66 && noMakefile.stderr.contains("has no Makefile"), "\(noMakefile.stderr)")
    }

    @Test("a project directory or build directory another user may write is refused before make runs, naming it, its owner and mode")
    func writableByOthers() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let project = try await project("DevShared", language: "c", in: test)
        let build = project + "/build"
        chmod(project, 0o777)
        let shared = try await plugind("dev", project, "x", "--once", in: test)
        #expect(shared.status == 77, "\(shared.stderr)")
        #expect(
            shared.stderr.contains("the project directory \(project) is writable by every user")
                && shared.stderr.contains("mode 777") && shared.stderr.contains("chmod go-w \(project)"), "\(shared.stderr)")
        #expect(!shared.stderr.contains("dev: make"), "make ran: \(shared.stderr)")
        #expect(!FileManager.default.fileExists(atPath: build), "make ran")

        chmod(project, 0o755)
        try FileManager.default.createDirectory(atPath: build, withIntermediateDirectories: false)
        chmod(build, 0o777)
        let sharedBuild = try await plugind("dev", project, "x", "--once", in: test)
        #expect(sharedBuild.status == 77, "\(sharedBuild.stderr)")
        #expect(
            sharedBuild.stderr.contains("the build directory \(build) is writable by every user")
                && sharedBuild.stderr.contains("mode 777"),
            "\(sharedBuild.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: build).isEmpty, "make ran")

        // A world-writable directory above the project is refused too, unless it is sticky (/tmp).
        chmod(build, 0o755)
        let above = (project as NSString).deletingLastPathComponent
        chmod(above, 0o777)
        let sharedAbove = try await plugind("dev", project, "x", "--once", in: test)
        #expect(sharedAbove.status == 77 && sharedAbove.stderr.contains("\(above), above the project directory"), "\(sharedAbove.stderr)")
        chmod(above, 0o1777)
        let sticky = try await plugind("dev", project, "x", "--once", in: test)
        #expect(sticky.status == 0 && sticky.stdout == "Hello from DevShared: x", "\(sticky.stderr)")
        chmod(above, 0o755)
    }

    @Test(
        "a project owned by another user is refused, naming the owner",
        .enabled(if: getuid() == 0, "only root can give a project to another user; the modes were tested instead"))
    func ownedByAnother() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let project = try await project("DevForeign", language: "c", in: test)
        #expect(chown(project, 65534, 65534) == 0)
        let foreign = try await plugind("dev", project, "x", "--once", in: test)
        #expect(foreign.status == 77, "\(foreign.stderr)")
        #expect(
            foreign.stderr.contains("the project directory \(project) is owned by another user (owner uid 65534")
                && foreign.stderr.contains("chown 0 \(project)"), "\(foreign.stderr)")
        #expect(!FileManager.default.fileExists(atPath: project + "/build"), "make ran")
        // Its Makefile alone, in a directory of root's: refused as well.
        #expect(chown(project, 0, 0) == 0 && chown(project + "/Makefile", 65534, 65534) == 0)
        let makefile = try await plugind("dev", project, "x", "--once", in: test)
        #expect(
            makefile.status == 77 && makefile.stderr.contains("the Makefile \(project)/Makefile is owned by another user"),
            "\(makefile.stderr)")
    }

    @Test("without --once, a change of a source rebuilds, relaunches and answers with the new code")
    func watches() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let watched = try await project("DevWatched", language: "c", in: test)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let child = try StreamingChild(try BuiltProducts.plugind(), ["dev", watched, "world", "--quiet"], environment: environment)
        defer { child.stop() }
        #expect(await child.line(where: { $0 == "Hello from DevWatched: world" }) != nil, "\(child.errors)")
        #expect(await child.errorLine(where: { $0.hasPrefix("dev: watching") }) != nil)
        // Each line of stdin is a request of its own.
        child.write("from stdin\n")
        #expect(await child.line(where: { $0 == "Hello from DevWatched: from stdin" }) != nil, "\(child.errors)")
        let source = watched + "/src/DevWatched.c"
        let edited = try String(contentsOfFile: source, encoding: .utf8).replacingOccurrences(of: "Hello from", with: "Hi from")
        try Data(edited.utf8).write(to: URL(fileURLWithPath: source))
        #expect(await child.line(where: { $0 == "Hi from DevWatched: world" }) != nil, "\(child.errors)")
        // A change that does not build: the compiler's errors, and the watch goes on.
        try Data("not C at all\n".utf8).write(to: URL(fileURLWithPath: source))
        #expect(await child.errorLine(where: { $0 == "dev: the build failed; waiting for a change" }) != nil, "\(child.errors)")
        #expect(child.errors.contains("DevWatched.c"), "the compiler's error names the file")
        try Data(edited.replacingOccurrences(of: "Hi from", with: "Back from").utf8).write(to: URL(fileURLWithPath: source))
        #expect(await child.line(where: { $0 == "Back from DevWatched: world" }) != nil, "\(child.errors)")
    }
}

/// A child whose stdout and stderr lines arrive as they are written, for commands that keep
/// running; `stop` kills and reaps it.
// Unchecked: Process is not marked Sendable; this class only reads it after run() and kills it once.
final class StreamingChild: @unchecked Sendable {
    private let process: Process
    private let output: AsyncStream<String>
    private let errorOutput: AsyncStream<String>
    private let input = Foundation.Pipe()
    private let collected = Locked<[String]>([])

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let stdout = Foundation.Pipe()
        let stderr = Foundation.Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = input
        output = Self.lines(of: stdout.fileHandleForReading, collect: nil)
        errorOutput = Self.lines(of: stderr.fileHandleForReading, collect: collected)
        try process.run()
    }

    /// Writes `text` to the child's stdin.
    func write(_ text: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    /// What stderr said so far.
    var errors: String { collected.withLock { $0.joined(separator: "\n") } }

    func line(where matches: (String) -> Bool) async -> String? {
        for await line in output where matches(line) { return line }
        return nil
    }

    func errorLine(where matches: (String) -> Bool) async -> String? {
        for await line in errorOutput where matches(line) { return line }
        return nil
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    private static func lines(of handle: FileHandle, collect: Locked<[String]>?) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        Thread {
            var pending: [UInt8] = []
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += data
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    collect?.withLock { $0.append(line) }
                    continuation.yield(line)
                }
            }
            continuation.finish()
        }.start()
        return stream
    }
}
