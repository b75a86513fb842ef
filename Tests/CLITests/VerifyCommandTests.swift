import Foundation
import Glibc
import TestSupport
import Testing

@Suite("plugind verify", .tags(.process), .serialized, .timeLimit(.minutes(2)))
struct VerifyCommandTests {
    func bundle(_ test: TestHost, _ fixture: PluginFixture) throws -> String {
        try fixture.install(in: try test.directory.subdirectory("bundles"))
    }

    /// Replaces the first occurrence of `old` in the file with `new`, of the same length.
    func patch(_ path: String, _ old: String, _ new: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let needle = Array(old.utf8)
        guard let start = (0...(bytes.count - needle.count)).first(where: { Array(bytes[$0..<$0 + needle.count]) == needle }) else {
            throw CLIFailure(message: "\(old) not found in \(path)")
        }
        bytes.replaceSubrange(start..<start + needle.count, with: Array(new.utf8))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("each broken bundle is named with its problem and a fix")
    func brokenBundles() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let missingDependency = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.dependency"))
        try patch(missingDependency + "/libEcho.so", "libc.so.6", "libq.so.6")
        let wrongMachine = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.machine"))
        var elf = [UInt8](try Data(contentsOf: URL(fileURLWithPath: wrongMachine + "/libEcho.so")))
        elf[18] = 183
        elf[19] = 0
        try Data(elf).write(to: URL(fileURLWithPath: wrongMachine + "/libEcho.so"))
        let missingSymbol = try bundle(test, PluginFixture(library: "FaultyNoEntry", identifier: "org.plugind.tests.symbol"))
        let wrongABI = try bundle(test, PluginFixture(library: "FaultyWrongABI", identifier: "org.plugind.tests.abi"))
        let typeError = try bundle(
            test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.types", extra: ["limits": ["openFiles": "many"]]))
        let missingFunction = try bundle(
            test,
            PluginFixture(
                library: "Echo", identifier: "org.plugind.tests.function",
                extra: ["functions": [["name": "absent", "arguments": [], "returns": "void"]]])
        )
        let good = try bundle(test, PluginFixture(library: "Echo", identifier: "org.plugind.tests.good"))

        let result = try await plugind(
            "verify", missingDependency, wrongMachine, missingSymbol, wrongABI, typeError, missingFunction, good, in: test)
        #expect(result.status == 1)
        let text = result.stdout
        #expect(text.contains("error: [dependencies] libq.so.6, needed by libEcho.so, is not found"))
        #expect(text.contains("fix: install the package that provides libq.so.6"))
        #expect(text.contains("error: [elf] the library \(wrongMachine)/libEcho.so is built for AArch64, this host is x86-64"))
        #expect(text.contains("error: [entry-point] libFaultyNoEntry.so does not export plugind_plugin_entry"))
        #expect(text.contains("error: [abi] libFaultyWrongABI.so was built for plugin ABI 999; this plugind supports 1"))
        #expect(
            text.contains("error: [manifest] \(typeError)/manifest.json: key 'limits.openFiles' must be a positive integer, found string"))
        #expect(text.contains("error: [functions] function 'absent' declared in the manifest is not exported by libEcho.so"))
        #expect(
            text.contains(
                "org.plugind.tests.good (\(good)): ok (manifest, contents, library, permissions, elf, dependencies, entry-point, abi (2))"
            ))

        let json = try await plugind("verify", good, missingSymbol, "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let reports = document?["reports"] as? [[String: Any]] ?? []
        #expect(reports.map { $0["ok"] as? Bool } == [true, false])
        let problems = reports[1]["problems"] as? [[String: Any]] ?? []
        #expect(problems.first?["check"] as? String == "entry-point")
        #expect(problems.first?["fix"] as? String != nil)
    }
}

// The time limit is a backstop: cargo and go builds take many minutes on a loaded small machine.
