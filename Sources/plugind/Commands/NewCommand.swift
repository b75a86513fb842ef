import Foundation
import PlugindBundle
import PlugindSystem

/// `plugind new`: a plugin project that builds with one command into a ready bundle.
struct NewCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let lang = CommandOption.value("lang", "c|swift", "The language of the plugin.")
        static let point = CommandOption.value(
            "point", "<id>", "The extension point it serves (default: org.plugind.examples.text-filters).")
        static let identifier = CommandOption.value("identifier", "<id>", "Its identifier (default: local.<name in lower case>).")
        static let dir = CommandOption.value("dir", "<directory>", "Where to create the project (default: the current directory).")
    }

    static let description = CommandDescription(
        name: "new",
        abstract: "Create a plugin project in C or Swift.",
        usage: "<name> --lang c|swift [--point <id>] [--identifier <id>] [--dir <directory>]",
        discussion: """
            Creates DIRECTORY/NAME with the plugin's source, its manifest and a Makefile: 'make'
            builds build/NAME.appex, a bundle for 'plugind verify' and 'plugind install'. C
            projects get a copy of plugind_plugin.h; Swift projects use PluginKit from the plugind
            source tree (found beside this plugind, or through $PLUGIND_SOURCE).
            """,
        arguments: [("<name>", "The plugin's name: letters, digits and '_', starting with a letter.")],
        options: [Options.lang, Options.point, Options.identifier, Options.dir]
    )

    let name: String
    let language: PluginTemplate.Language
    let point: String
    let identifier: String
    let directory: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        name = try arguments.positionals(["name"])[0]
        guard let first = name.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
            name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }),
            name.count <= 64
        else {
            throw UsageError(
                message: "'\(name)' is not a valid plugin name (letters, digits and '_', starting with a letter)", command: "new")
        }
        guard let lang = arguments.value(Options.lang) else { throw UsageError(message: "missing --lang c|swift", command: "new") }
        guard let language = PluginTemplate.Language(rawValue: lang) else {
            throw UsageError(message: "unknown language '\(lang)' (use c or swift)", command: "new")
        }
        self.language = language
        point = arguments.value(Options.point) ?? "org.plugind.examples.text-filters"
        identifier = arguments.value(Options.identifier) ?? "local.\(name.lowercased().replacingOccurrences(of: "_", with: "-"))"
        for (option, value) in [("--point", point), ("--identifier", identifier)] where !ManifestParser.isReverseDNS(value) {
            throw UsageError(message: "\(option) must be a reverse-DNS name such as com.example.thing, got '\(value)'", command: "new")
        }
        directory = arguments.value(Options.dir) ?? FileManager.default.currentDirectoryPath
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let project = directory + "/" + name
        if let existing = try? FileManager.default.contentsOfDirectory(atPath: project), !existing.isEmpty {
            throw CommandFailure(message: "\(project) already exists and is not empty", status: .failure)
        }
        // A C project needs only the header: the installed one when pkg-config finds
        // plugind-plugin (the plugind-dev package), else a copy from the source tree. A Swift
        // project builds PluginKit from the source tree.
        let checkout: SourceCheckout?
        let header: PluginTemplate.HeaderSource
        if language == .c, (try? ExternalTool.run("pkg-config", ["--exists", "plugind-plugin"], package: "pkgconf")) != nil {
            checkout = nil
            header = .pkgConfig
        } else {
            let found = try SourceCheckout.locate()
            do {
                header = .bundled(contents: try String(contentsOfFile: found.header, encoding: .utf8))
            } catch {
                throw CommandFailure(message: "cannot read \(found.header): \(error.localizedDescription)", status: .unavailable)
            }
            checkout = found
        }
        let plugind = ProcessEnvironment.executablePath ?? "plugind"
        let template = PluginTemplate(
            name: name, identifier: identifier, extensionPoint: point, language: language, header: header, checkout: checkout,
            plugindExecutable: plugind)
        do {
            for (relativePath, contents) in template.files() {
                let path = project + "/" + relativePath
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
            }
        } catch {
            throw CommandFailure(message: "cannot write the project in \(project): \(error.localizedDescription)", status: .failure)
        }
        context.console.out(
            """
            Created \(language == .c ? "a C" : "a Swift") plugin project in \(project).
            Next:
              cd \(project) && make
              plugind verify build/\(name).appex
              plugind install build/\(name).appex
              plugind approve \(identifier)
              plugind run \(identifier) "world"

            """
        )
        return .success
    }
}
