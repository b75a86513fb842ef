import Foundation
import TestSupport
import Testing

@testable import plugind

/// Every `--json` document, and every line of a `--json` stream, is an object with an integer
/// `formatVersion` (Documentation/CLI.md promises it): checked for each command that declares
/// `--json`, so that a new one cannot forget it.
@Suite("--json output carries a formatVersion", .tags(.process), .timeLimit(.minutes(5)))
struct JSONFormatVersionTests {
    /// How a command is run here: for one document, for lines it prints and ends, or for a
    /// stream it prints until stopped (its first line is checked).
    enum Invocation {
        case document([String])
        case lines([String])
        case stream([String])
    }

    /// What a line or document must at least be.
    struct Versioned: Decodable {
        var formatVersion: Int
    }

    /// Each command that takes `--json`, with the runs that check it. A command missing here
    /// fails the test: add how to run it.
    static func invocations(echo: String, library: String, bundle: String) -> [String: [Invocation]] {
        [
            "list": [.document(["list", "--json"]), .document(["list", "--all", "--json"])],
            "info": [.document(["info", echo, "--no-probe", "--json"])],
            "call": [.document(["call", library, "identity_uint64", "7", "--json"])],
            "watch": [.stream(["watch", "--json"])],
            "verify": [.document(["verify", bundle, "--json"])],
            "trust": [.document(["trust", "list", "--json"])],
            "crashes": [.document(["crashes", "--json"])],
            "logs": [.lines(["logs", "--json"]), .stream(["logs", "--json", "--follow"])],
            "top": [.document(["top", "--json"])],
            "quarantine": [.document(["quarantine", "list", "--json"])],
            "points": [.document(["points", "list", "--json"])],
            "declare": [.document(["declare", "/usr/include/zlib.h", "--function", "crc32", "--json"])],
            "scan": [.document(["scan", "--json"])],
        ]
    }

    @Test("each command that takes --json prints objects with an integer formatVersion, one a line for streams")
    func everyCommand() async throws {
        let test = try TestHost()
        defer { test.remove() }
        // Something for each command to print: an approved plugin (its approval is logged), a
        // plugin with functions, a bundle to verify, a declared point, a trusted publisher.
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/FunctionLibrary/manifest.json"
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        let library = PluginFixture(library: "FunctionLibrary", extra: ["functions": manifest?["functions"] ?? []])
        try await installApproved(library, in: test)
        let bundle = try PluginFixture(library: "Echo").install(in: try test.directory.subdirectory("work"))
        #expect(try await plugind("points", "add", "org.plugind.tests.point", in: test).status == 0)
        let key = try test.directory.subdirectory("keys") + "/publisher"
        #expect(try await plugind("keygen", "--output", key, in: test).status == 0)
        #expect(try await plugind("trust", "add", key + ".pub", in: test).status == 0)

        let invocations = Self.invocations(echo: echo.identifier, library: library.identifier, bundle: bundle)
        let commands = Plugind.commands.map(\.description).filter { $0.options.contains { $0.name == "json" } }
        #expect(commands.count >= invocations.count, "every command run here declares --json")
        for command in commands {
            let runs = invocations[command.name] ?? []
            #expect(!runs.isEmpty, "plugind \(command.name) takes --json: add how to run it to JSONFormatVersionTests.invocations")
            for run in runs { try await check(run, in: test) }
        }
    }

    /// Runs `invocation` and checks what it printed.
    private func check(_ invocation: Invocation, in test: TestHost) async throws {
        switch invocation {
        case .document(let arguments):
            let output = try await plugind(arguments, in: test)
            #expect(output.status == 0, "plugind \(arguments.joined(separator: " ")): \(output.stderr)")
            expectVersioned(output.stdout, arguments)
        case .lines(let arguments):
            let output = try await plugind(arguments, in: test)
            #expect(output.status == 0, "plugind \(arguments.joined(separator: " ")): \(output.stderr)")
            let lines = output.stdout.split(separator: "\n")
            #expect(!lines.isEmpty, "plugind \(arguments.joined(separator: " ")) printed no line")
            for line in lines { expectVersioned(String(line), arguments) }
        case .stream(let arguments):
            var environment = test.environment
            environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
            let child = try StreamingChild(try BuiltProducts.plugind(), arguments, environment: environment)
            defer { child.stop() }
            let line = try await Deadline.wait("a line of plugind \(arguments.joined(separator: " "))") { await child.line { _ in true } }
            expectVersioned(try #require(line, "plugind \(arguments.joined(separator: " ")) ended: \(child.errors)"), arguments)
        }
    }

    private func expectVersioned(_ text: String, _ arguments: [String]) {
        // A keyed Decodable: a bare array, or a formatVersion that is not an integer, fails.
        let decoded = try? JSONDecoder().decode(Versioned.self, from: Data(text.utf8))
        #expect(decoded != nil, "plugind \(arguments.joined(separator: " ")) printed no object with a formatVersion: \(text)")
    }
}
