import ExtensionFoundation
import Foundation
import PlugindBundle

/// `plugind policy`: where the policy lives, and recovery from a corrupt policy file.
struct PolicyCommand: PlugindCommand {
    static let description = CommandDescription(
        name: "policy",
        abstract: "Show the policy files and whether they can be used, or move a corrupt one aside.",
        usage: "[check | path | reset]",
        discussion: """
            A policy file that cannot be read, or that another user could have written (the file or
            a directory above it is writable by others or owned by someone else), approves nothing,
            and plugind never overwrites it on its own. 'check' (the default) shows each file's
            state and the fix; exit status 1 when one cannot be used. 'reset' renames a corrupt
            file to policy.json.corrupt-<time> (nothing is deleted) so that approvals can start
            again from an empty policy.
            """,
        arguments: [
            ("check", "Show each policy file and whether it can be used (the default)."),
            ("path", "Print the owner's and the administrator's policy files."), ("reset", "Move a corrupt policy file aside."),
        ]
    )

    let action: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        action = try arguments.positionals([], optional: ["action"]).first ?? "check"
        guard ["check", "path", "reset"].contains(action) else {
            throw UsageError(message: "unknown action '\(action)' (use check, path or reset)", command: "policy")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let editor = PolicyEditor(for: context.host, administrator: false)
        let administrator = PolicyEditor(for: context.host, administrator: true)
        if action == "path" {
            context.console.out("\(editor.path)\n\(administrator.path) (administrator)\n")
            return .success
        }
        if action == "check" {
            var usable = true
            for (file, role) in [(editor.path, "owner"), (administrator.path, "administrator")] {
                switch PolicyDocument.load(from: file) {
                case .success(let document):
                    let state = FileManager.default.fileExists(atPath: file) ? "ok, \(document.plugins.count) plugin(s)" : "none yet"
                    context.console.out("\(file) (\(role)): \(state)\n")
                case .failure(let error):
                    usable = false
                    context.console.out("\(file) (\(role)): cannot be used: \(error.reason)\n")
                }
            }
            return usable ? .success : .failure
        }
        do {
            if let moved = try editor.moveCorruptStoreAside() {
                context.console.err("Moved the corrupt policy to \(moved); plugins must be approved again.\n")
            } else {
                context.console.err("The policy file \(editor.path) is readable; nothing to reset.\n")
            }
        } catch {
            throw CommandFailure(message: "\(error)", status: .failure)
        }
        return .success
    }
}
