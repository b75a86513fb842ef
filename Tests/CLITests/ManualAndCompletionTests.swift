import Foundation
import TestSupport
import Testing

@testable import plugind

@Suite("Manual pages and shell completions, from the command table", .tags(.process))
struct ManualAndCompletionTests {
    @Test("every subcommand's page carries its abstract, usage, every option and argument, and man renders it without a warning")
    func pagesFollowTheCommandTable() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let pageFile = test.directory.path + "/page.1"
        for entry in Plugind.commands {
            let command = entry.description
            let page = try await plugind("help", "--man", command.name, in: test)
            #expect(page.status == 0)
            #expect(page.stdout.hasPrefix(".TH \"PLUGIND-\(command.name.uppercased())\" \"1\""))
            #expect(page.stdout.contains(Roff.escape(command.usage)))
            for (label, _) in command.optionRows + command.arguments {
                #expect(page.stdout.contains(".B \(Roff.escape(label))\n"), "plugind-\(command.name)(1) lacks \(label)")
            }
            try Data(page.standardOutput).write(to: URL(fileURLWithPath: pageFile))
            let rendered = try await CommandRunner.run(
                "/usr/bin/man", ["--warnings", "-l", pageFile], environment: ["MANPAGER": "cat", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"])
            #expect(rendered.status == 0)
            #expect(rendered.stderr.isEmpty, "man warns about plugind-\(command.name)(1): \(rendered.stderr)")
        }
        let root = try await plugind("help", "--man", in: test)
        for entry in Plugind.commands {
            #expect(root.stdout.contains(".SS \"plugind \(Roff.escape(entry.description.name))\""))
        }
    }

    @Test("plugind-manifest(5) is the manifest reference: every key of its tables is a tagged paragraph")
    func manifestPage() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let reference = BuiltProducts.packageRoot + "/Documentation/ManifestReference.md"
        let page = try await plugind("help", "--man", "manifest", reference, in: test)
        #expect(page.status == 0)
        let markdown = try String(contentsOfFile: reference, encoding: .utf8)
        let keys = markdown.split(separator: "\n").filter { $0.hasPrefix("| `") }.compactMap { $0.split(separator: "`").dropFirst().first }
        #expect(keys.count > 10)
        #expect(page.stdout.components(separatedBy: ".TP\n").count > keys.count)
        for key in keys {
            #expect(page.stdout.contains("\\fB\(MarkdownManualPage.inline(String(key)))\\fR"), "the page lacks \(key)")
        }
        let missing = try await plugind("help", "--man", "manifest", test.directory.path + "/missing.md", in: test)
        #expect(missing.status == 64)
    }

    @Test("plugind-policy(5) is the policy files' reference, renders without a warning, and cites no file of the source tree")
    func policyFilesPage() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let reference = BuiltProducts.packageRoot + "/Documentation/PolicyFiles.md"
        let page = try await plugind("help", "--man", "policy", reference, in: test)
        #expect(page.status == 0)
        #expect(page.stdout.hasPrefix(".TH \"PLUGIND-POLICY\" \"5\""))
        for key in ["trustedPublishers", "bundleDigest", "requireSignatures", "extensionPoint", "formatVersion"] {
            #expect(page.stdout.contains(key), "plugind-policy(5) lacks \(key)")
        }
        let pageFile = test.directory.path + "/plugind-policy.5"
        try Data(page.standardOutput).write(to: URL(fileURLWithPath: pageFile))
        let rendered = try await CommandRunner.run(
            "/usr/bin/man", ["--warnings", "-l", pageFile], environment: ["MANPAGER": "cat", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"])
        #expect(rendered.status == 0)
        #expect(rendered.stderr.isEmpty, "man warns about plugind-policy(5): \(rendered.stderr)")
        // Without a file, 'policy' is the subcommand's page, which every page's SEE ALSO pairs
        // with the file formats'.
        let command = try await plugind("help", "--man", "policy", in: test)
        #expect(command.stdout.hasPrefix(".TH \"PLUGIND-POLICY\" \"1\""))
        #expect(command.stdout.contains("\\fBplugind\\-policy\\fR(5)"))
        // What the pages cite is installed with them (Scripts/stage.sh), never the source tree.
        for entry in Plugind.commands {
            let cited = try await plugind("help", "--man", entry.description.name, in: test)
            #expect(!cited.stdout.contains("Documentation/"), "plugind-\(entry.description.name)(1) cites the source tree")
        }
    }

    @Test("every argument placeholder of every command has a completion kind")
    func placeholdersAreKnown() {
        for entry in Plugind.commands {
            for (label, _) in entry.description.arguments {
                for word in label.split(separator: " ") where word.hasPrefix("<") {
                    #expect(CompletionScript.ArgumentKind.of(String(word)) != nil, "\(entry.description.name): \(word)")
                }
            }
        }
    }

    /// Completes `words` (the last one being typed) with the generated bash script, in bash.
    func bashCompletion(_ words: [String], test: TestHost) async throws -> [String] {
        let script = try await plugind("completions", "bash", in: test)
        let scriptFile = test.directory.path + "/plugind.bash"
        try Data(script.standardOutput).write(to: URL(fileURLWithPath: scriptFile))
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        var environment = test.environment
        environment["PATH"] = (try BuiltProducts.plugind() as NSString).deletingLastPathComponent + ":/usr/bin:/bin"
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let result = try await CommandRunner.run(
            "/bin/bash",
            [
                "--norc", "-c",
                "source '\(scriptFile)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _plugind; printf '%s\\n' \"${COMPREPLY[@]}\"",
            ],
            environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test("bash completes subcommands, options, verbs and installed plugins' identifiers")
    func bash() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo"), bundled: false)
        #expect(try await bashCompletion(["plugind", "ap"], test: test) == ["approve"])
        #expect(try await bashCompletion(["plugind", "approve", "--"], test: test) == ["--yes", "--administrator", "--help"])
        #expect(try await bashCompletion(["plugind", "trust", ""], test: test) == ["add", "list", "remove"])
        #expect(try await bashCompletion(["plugind", "approve", "org.plugind.tests.e"], test: test) == ["org.plugind.tests.echo"])
        #expect(try await bashCompletion(["plugind", "quarantine", "clear", "org."], test: test) == ["org.plugind.tests.echo"])
        #expect(try await bashCompletion(["plugind", "help", "ru"], test: test) == ["run"])
        // An option that lists its values completes them, not file names.
        #expect(try await bashCompletion(["plugind", "new", "X", "--lang", ""], test: test) == ["c", "cpp", "rust", "go", "swift"])
        #expect(try await bashCompletion(["plugind", "new", "X", "--lang", "c"], test: test) == ["c", "cpp"])
        #expect(try await bashCompletion(["plugind", "pack", "B", "--format", ""], test: test) == ["plugin", "deb"])
        #expect(try await bashCompletion(["plugind", "top", "--sort", "u"], test: test) == ["uptime"])
        let identifiers = try await plugind("completions", "--identifiers", in: test)
        #expect(identifiers.stdout == "org.plugind.tests.echo\n")
    }

    @Test("zsh and fish scripts name every subcommand and option; an unknown shell is a usage error")
    func zshAndFish() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let zsh = try await plugind("completions", "zsh", in: test)
        let fish = try await plugind("completions", "fish", in: test)
        #expect(zsh.stdout.hasPrefix("#compdef plugind\n"))
        for entry in Plugind.commands {
            let command = entry.description
            #expect(zsh.stdout.contains("_plugind_\(command.name)() {"))
            #expect(fish.stdout.contains("-n __fish_use_subcommand -a \(command.name) "))
            for option in command.options where !option.choices.isEmpty {
                #expect(zsh.stdout.contains(":value:(\(option.choices.joined(separator: " ")))"), "\(command.name) --\(option.name)")
                #expect(fish.stdout.contains("-l \(option.name) -r -f -a '\(option.choices.joined(separator: " "))'"))
            }
            for option in command.options {
                #expect(zsh.stdout.contains("--\(option.name)"))
                #expect(fish.stdout.contains("-n '__fish_seen_subcommand_from \(command.name)' -l \(option.name)"))
            }
        }
        let unknown = try await plugind("completions", "tcsh", in: test)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("bash, zsh and fish"))
    }

    @Test("a Debian package's name, architecture and version follow Debian's rules")
    func debianFields() {
        #expect(DebianPackage.isValidVersion("1.2.0"))
        #expect(DebianPackage.isValidVersion("2:1.0~rc1+local-3"))
        #expect(!DebianPackage.isValidVersion("v1.0"))
        #expect(!DebianPackage.isValidVersion("1.0 beta"))
        #expect(!DebianPackage.isValidVersion(""))
    }
}
