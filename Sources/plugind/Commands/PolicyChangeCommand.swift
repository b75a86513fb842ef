import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing

/// `plugind disable`, `enable` and `revoke`: one command with three names, each one change of a
/// plugin's entry in the owner's (or the administrator's) policy.
struct PolicyChangeCommand: PlugindCommandInstance {
    enum Change: CaseIterable, Sendable {
        case disable, enable, revoke

        var description: CommandDescription {
            let (name, abstract, discussion) =
                switch self {
                case .disable:
                    (
                        "disable", "Disable a plugin (its approval is kept for 'enable').",
                        "No host can use a disabled plugin. An administrator's disable wins over the owner's policy."
                    )
                case .enable:
                    (
                        "enable", "Enable a disabled plugin with the approval it had.",
                        "If the plugin's bytes changed meanwhile it stays unavailable until approved again."
                    )
                case .revoke:
                    (
                        "revoke", "Forget every decision about a plugin: it is unapproved again.",
                        "Removes the plugin's entry from the policy file."
                    )
                }
            return CommandDescription(
                name: name, abstract: abstract, usage: "<id> [--administrator]", discussion: discussion,
                arguments: [("<id>", "The plugin's identifier.")], options: [PolicyChangeCommand.administratorOption])
        }

        var pastTense: String {
            switch self {
            case .disable: "Disabled"
            case .enable: "Enabled"
            case .revoke: "Revoked"
            }
        }

        func apply(_ editor: PolicyEditor, to identifier: String) throws(PolicyEditor.EditError) {
            switch self {
            case .disable: try editor.disable(identifier)
            case .enable: try editor.enable(identifier)
            case .revoke: try editor.revoke(identifier)
            }
        }
    }

    static let administratorOption = CommandOption.flag("administrator", "Change the administrator's policy instead of yours.")

    /// The registry's entry for one of the three names.
    static func entry(_ change: Change) -> CommandEntry {
        CommandEntry(description: change.description) { arguments throws(UsageError) in
            try PolicyChangeCommand(change, arguments)
        }
    }

    let change: Change
    let identifier: String
    let administrator: Bool

    init(_ change: Change, _ arguments: ArgumentScanner) throws(UsageError) {
        self.change = change
        identifier = try arguments.positionals(["id"])[0]
        administrator = arguments.flag(Self.administratorOption)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let editor = PolicyEditor(for: context.host, administrator: administrator)
        do {
            try change.apply(editor, to: identifier)
        } catch {
            throw CommandFailure(message: "\(error)", status: .failure)
        }
        context.console.err("\(change.pastTense) \(identifier.inert).\n")
        return .success
    }
}
