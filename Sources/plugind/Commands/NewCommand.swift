import Foundation
import PlugindBundle
import PlugindSystem

/// `plugind new`: a plugin project that builds with one command into a ready bundle.
struct NewCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let lang = CommandOption.value("lang", "c|cpp|rust|go|swift", "The language of the plugin.")
        static let point = CommandOption.value(
            "point", "<id>", "The extension point it serves (default: org.plugind.examples.text-filters).")
        static let identifier = CommandOption.value("identifier", "<id>", "Its identifier (default: local.<name in lower case>).")
        static let dir = CommandOption.value("dir", "<directory>", "Where to create the project (default: the current directory).")
    }

    static let description = CommandDescription(
        name: "new",
        abstract: "Create a plugin project in C, C++, Rust, Go or Swift.",
        usage: "<name> --lang c|cpp|rust|go|swift [--point <id>] [--identifier <id>] [--dir <directory>]",
        discussion: """
            Creates DIRECTORY/NAME with the plugin's source, its manifest and a Makefile: 'make'
            builds build/NAME.appex, a bundle for 'plugind verify' and 'plugind install'. C and C++
            projects use the installed headers (pkg-config plugind-plugin) or get a copy of them;
            Rust and Go projects use the kits installed by plugind-dev (/usr/share/plugind/kits) or
            those of the plugind source tree; Swift projects use PluginKit from the source tree
            (found beside this plugind, or through $PLUGIND_SOURCE). The C++, Rust and Go projects
            greet whom their host names when asked ('plugind run ID TEXT --answer NAME'); they
            build with g++, cargo and go, offline.
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
        guard let lang = arguments.value(Options.lang) else {
            throw UsageError(message: "missing --lang c|cpp|rust|go|swift", command: "new")
        }
        guard let language = PluginTemplate.Language(rawValue: lang) else {
            throw UsageError(message: "unknown language '\(lang)' (use c, cpp, rust, go or swift)", command: "new")
        }
        self.language = language
        point = arguments.value(Options.point) ?? "org.plugind.examples.text-filters"
        identifier = arguments.value(Options.identifier) ?? "local.\(name.lowercased().replacingOccurrences(of: "_", with: "-"))"
        for (option, value) in [("--point", point), ("--identifier", identifier)] where !ManifestParser.isReverseDNS(value) {
            throw UsageError(message: "\(option) must be a reverse-DNS name such as com.example.thing, got '\(value)'", command: "new")
        }
        directory = arguments.value(Options.dir) ?? FileManager.default.currentDirectoryPath
    }

    /// Where plugind-dev installs the Rust and Go kits: PREFIX/share/plugind/kits beside this
    /// plugind's PREFIX/bin.
    static var installedKits: String {
        let executable = ProcessEnvironment.executablePath ?? "/usr/bin/plugind"
        let prefix = ((executable as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        return prefix + "/share/plugind/kits"
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
        var cppKitHeader = ""
        var kits = PluginTemplate.KitLocation(rust: Self.installedKits + "/rust/plugind-plugin", go: Self.installedKits + "/go/plugind")
        let needsCheckout: Bool
        switch language {
        case .c, .cpp:
            needsCheckout = (try? ExternalTool.run("pkg-config", ["--exists", "plugind-plugin"], package: "pkgconf")) == nil
        case .rust:
            needsCheckout = !FileManager.default.fileExists(atPath: kits.rust + "/Cargo.toml")
        case .go:
            needsCheckout = !FileManager.default.fileExists(atPath: kits.go + "/go.mod")
        case .swift:
            needsCheckout = true
        }
        if needsCheckout {
            let found = try SourceCheckout.locate()
            do {
                header = .bundled(contents: try String(contentsOfFile: found.header, encoding: .utf8))
                if language == .cpp { cppKitHeader = try String(contentsOfFile: found.cppKitHeader, encoding: .utf8) }
            } catch {
                throw CommandFailure(
                    message: "cannot read the headers in \(found.root): \(error.localizedDescription)", status: .unavailable)
            }
            kits = PluginTemplate.KitLocation(rust: found.root + "/Kits/Rust/plugind-plugin", go: found.root + "/Kits/Go/plugind")
            checkout = found
        } else {
            header = .pkgConfig
            checkout = nil
        }
        let plugind = ProcessEnvironment.executablePath ?? "plugind"
        var template = PluginTemplate(
            name: name, identifier: identifier, extensionPoint: point, language: language, header: header, checkout: checkout,
            plugindExecutable: plugind)
        template.kits = kits
        template.cppKitHeader = cppKitHeader
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
            Created a \(language.displayName) plugin project in \(project).
            Next:
              cd \(project) && make
              plugind verify build/\(name).appex
              plugind install build/\(name).appex
              plugind approve \(identifier)
              plugind run \(identifier) "world"\(template.asksHost ? " --answer Ada" : "")

            """
        )
        return .success
    }
}
