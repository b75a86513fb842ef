import Foundation

/// `plugind bind`: the extension point a Swift package's code binds to, and the capabilities it
/// implements, written into its manifest and recorded in its library.
struct BindCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let target = CommandOption.value("target", "<name>", "The target whose sources bind the extension (its library's name).")
        static let check = CommandOption.flag("check", "Only report whether the manifest agrees with the code.")
    }

    static let description = CommandDescription(
        name: "bind",
        abstract: "Write the extension point and capabilities the code binds to into the manifest and the library.",
        usage: "<package> --target <name> [--check]",
        discussion: """
            The code is the one statement of a Swift extension's binding: '@AppExtensionPoint.Bind'
            with 'AppExtensionPoint.Identifier(host:name:)' in Sources/<name>/, and the
            capabilities of its 'Implementing { … }' (Supports("…"), or types of the extension's
            own whose id is a literal). This sets the manifest's extensionPoint and capabilities
            to them (the rest of manifest.json is left as written) and writes
            Sources/<name>Binding/binding.c, which records them in the built library, where
            'plugind verify' compares them with the manifest without running the plugin. Projects
            from 'plugind new --lang swift' run it from make. With --check, changes nothing and
            exits 1 when the manifest disagrees with the code.
            """,
        arguments: [("<package>", "The package directory (holding manifest.json and Sources/).")],
        options: [Options.target, Options.check]
    )

    let package: String
    let target: String
    let check: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        package = try arguments.positionals(["package"])[0]
        guard let target = arguments.value(Options.target), !target.isEmpty else {
            throw UsageError(message: "bind needs --target <name>: the target whose sources bind the extension")
        }
        self.target = target
        check = arguments.flag(Options.check)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let binding: CodeBinding
        do {
            binding = try CodeBinding.find(inSourcesAt: package + "/Sources/" + target)
        } catch {
            throw CommandFailure(message: "\(target): \(error)", status: .failure)
        }
        let manifestPath = package + "/manifest.json"
        let manifest: String
        do {
            manifest = try String(contentsOfFile: manifestPath, encoding: .utf8)
        } catch {
            throw CommandFailure(message: "cannot read \(manifestPath): \(error.localizedDescription)", status: .failure)
        }
        let updated: String
        do {
            updated = try binding.applied(toManifest: manifest)
        } catch {
            throw CommandFailure(message: "\(manifestPath): \(error)", status: .failure)
        }
        if check {
            guard updated == manifest else {
                context.console.err("\(manifestPath) does not state what the code binds to: \(binding.summary)\n")
                return .failure
            }
            context.console.err("\(target) binds to \(binding.summary), as its manifest says.\n")
            return .success
        }
        let noteDirectory = package + "/Sources/\(target)Binding"
        do {
            try FileManager.default.createDirectory(atPath: noteDirectory + "/include", withIntermediateDirectories: true)
            try write(binding.noteSource, to: noteDirectory + "/binding.c")
            // SwiftPM wants a public header directory for a C target; the note needs no header.
            try write("/* The binding note has no interface: see binding.c. */\n", to: noteDirectory + "/include/\(target)Binding.h")
            if updated != manifest { try write(updated, to: manifestPath) }
        } catch {
            throw CommandFailure(message: "cannot write the binding of \(target): \(error.localizedDescription)", status: .failure)
        }
        context.console.err("\(target) binds to \(binding.summary)\(updated != manifest ? "; manifest.json updated" : "").\n")
        return .success
    }

    /// Writes `text` unless the file already holds it, so that make sees no change.
    private func write(_ text: String, to path: String) throws {
        if (try? String(contentsOfFile: path, encoding: .utf8)) == text { return }
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
