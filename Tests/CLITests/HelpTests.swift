import Foundation
import TestSupport
import Testing

@Suite("plugind help and usage errors", .tags(.process))
struct HelpTests {
    @Test("plugind, -h, --help and help all print the overview to stdout and exit 0")
    func rootHelp() async throws {
        let test = try TestHost()
        defer { test.remove() }
        var outputs: [String] = []
        for arguments in [[], ["-h"], ["--help"], ["help"]] {
            let result = try await CommandRunner.run(try BuiltProducts.plugind(), arguments, environment: test.environment)
            #expect(result.status == 0)
            #expect(result.stderr.isEmpty)
            outputs.append(result.stdout)
        }
        #expect(Set(outputs).count == 1)
        #expect(outputs[0].hasPrefix("OVERVIEW: plugind 0.1.0: discover, approve and run plugins."))
        #expect(outputs[0].contains("\nSUBCOMMANDS:\n  list                    List installed plugins.\n"))
        #expect(outputs[0].contains("\n  77                      the plugin is not approved, is disabled, or is quarantined\n"))
        #expect(outputs[0].hasSuffix("See 'plugind help <subcommand>' for detailed help.\n"))
    }

    @Test("'plugind run --help' is the documented text, the same as 'plugind help run'")
    func runHelp() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let expected = """
            OVERVIEW: Send input to a plugin and print its response.

            The input is INPUT as given, or the contents of --input FILE, or all of stdin. The
            response bytes go to stdout unchanged; errors, progress and the plugin's log go to
            stderr. Progress shows as a bar when stderr is a terminal, as plain lines otherwise.
            A plugin that asks its host questions (plugin ABI 2) gets --answer TEXT to each one;
            without --answer its questions fail as unsupported. On a kernel that lacks a
            confinement layer (no user namespaces, no Landlock), the launch is refused naming
            it; --best-effort runs with the layers the machine offers and names each missing
            one on stderr.

            USAGE: plugind run <id> [<input>] [--input <file>] [--answer <text>] [--timeout <seconds>] [--quiet] [--best-effort]

            ARGUMENTS:
              <id>                    The plugin's identifier.
              <input>                 The request, as text.

            OPTIONS:
              --input <file>          Read the request from a file.
              --answer <text>         Answer every question the plugin asks with this text.
              --timeout <seconds>     Deadline for the answer (default: the plugin's, at most the host's cap).
              --quiet                 Do not show progress or the plugin's log.
              --best-effort           Run with the confinement layers this machine offers; warn of each missing one.
              -h, --help              Show help information.

            """
        let flag = try await plugind("run", "--help", in: test)
        let subcommand = try await plugind("help", "run", in: test)
        #expect(flag.status == 0)
        #expect(flag.stdout == expected)
        #expect(subcommand.stdout == expected)
    }

    @Test("every subcommand has --help")
    func everySubcommandHasHelp() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let root = try await plugind("--help", in: test).stdout
        let section = root.components(separatedBy: "SUBCOMMANDS:\n")[1].components(separatedBy: "\n\n")[0]
        let names = section.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(names.count >= 10)
        for name in names {
            let help = try await plugind(name, "--help", in: test)
            #expect(help.status == 0, "plugind \(name) --help")
            #expect(help.stdout.hasPrefix("OVERVIEW: "), "plugind \(name) --help")
            #expect(help.stdout.contains("\nUSAGE: plugind \(name)"), "plugind \(name) --help")
        }
    }

    @Test("usage errors go to stderr with 'error:' and the usage line, exit 64")
    func usageErrors() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let unknown = try await plugind("frobnicate", in: test)
        #expect(unknown.status == 64)
        #expect(unknown.stdout.isEmpty)
        #expect(unknown.stderr.hasPrefix("error: unknown subcommand 'frobnicate'\n"))
        let missing = try await plugind("run", in: test)
        #expect(missing.status == 64)
        #expect(
            missing.stderr
                == "error: missing ID\nUsage: plugind run <id> [<input>] [--input <file>] [--answer <text>] [--timeout <seconds>] [--quiet] [--best-effort]\n  See 'plugind help run'.\n"
        )
        let option = try await plugind("list", "--colour", in: test)
        #expect(option.status == 64)
        #expect(option.stderr.hasPrefix("error: unknown option '--colour'\n"))
        let version = try await plugind("--version", in: test)
        #expect(version.stdout == "plugind 0.1.0\n")
    }
}
