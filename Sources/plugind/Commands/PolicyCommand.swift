import ExtensionFoundation
import PlugindBundle

/// `plugind policy`: where the policy lives, and recovery from a corrupt policy file.
struct PolicyCommand: PlugindCommand {
    static let description = CommandDescription(
        name: "policy",
        abstract: "Show where the policy is kept, or move a corrupt policy file aside.",
        usage: "path | reset",
        discussion: """
            A policy file that cannot be read approves nothing, and plugind never overwrites it on
            its own. 'reset' renames it to policy.json.corrupt-<time> (nothing is deleted) so that
            approvals can start again from an empty policy.
            """,
        arguments: [("path", "Print the owner's and the administrator's policy files."), ("reset", "Move a corrupt policy file aside.")]
    )

    let action: String

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        action = try arguments.positionals(["action"])[0]
        guard ["path", "reset"].contains(action) else {
            throw UsageError(message: "unknown action '\(action)' (use path or reset)", command: "policy")
        }
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let editor = PolicyEditor(directory: context.host.policyDirectory)
        if action == "path" {
            context.console.out(
                "\(editor.path)\n\(PolicyEditor(directory: context.host.administratorPolicyDirectory).path) (administrator)\n")
            return .success
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
