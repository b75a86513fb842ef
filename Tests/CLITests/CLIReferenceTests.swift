import Foundation
import TestSupport
import Testing

@Suite("CLI reference", .tags(.process))
struct CLIReferenceTests {
    @Test("Documentation/CLI.md holds exactly what --help prints for every command")
    func referenceMatchesHelp() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let document = try String(contentsOfFile: BuiltProducts.packageRoot + "/Documentation/CLI.md", encoding: .utf8)
        let begin = "<!-- BEGIN GENERATED: plugind help --markdown -->\n"
        let end = "<!-- END GENERATED -->"
        let generated = try #require(document.components(separatedBy: begin).last?.components(separatedBy: end).first)
        let current = try await plugind("help", "--markdown", in: test).stdout
        #expect(generated == current, "run Scripts/update-cli-reference.sh")
        for command in ["run", "list", "verify", "new"] {
            let help = try await plugind(command, "--help", in: test).stdout
            #expect(generated.contains("## plugind \(command)\n\n```\n" + help + "```\n"))
        }
    }
}
