import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing

/// `plugind approve`: the owner allows a plugin to run, pinned to its current bytes and the
/// permissions it asks for.
struct ApproveCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let yes = CommandOption.flag("yes", short: "-y", "Approve without asking.")
        static let administrator = CommandOption.flag(
            "administrator", "Write the administrator's policy ($PLUGIND_ADMIN_POLICY_DIR, default /etc/plugind) instead of yours.")
    }

    static let description = CommandDescription(
        name: "approve",
        abstract: "Approve a plugin (pinned to its current bytes and requested permissions).",
        usage: "<id> [--yes] [--administrator]",
        discussion: """
            Shows what is being approved (where it is, the digest of its bundle and of every file
            in it, the permissions it asks for and the paths they resolve to, its limits and how
            they are enforced here, and what changed since an earlier approval) and asks for
            confirmation. The approval pins exactly what was shown. If any file of the bundle or
            the requested permissions change later, the plugin is unapproved again until approved
            anew.
            """,
        arguments: [
            ("<id>", "The plugin's identifier, or a pattern such as ladspa.cmt.* for every plugin it matches (a whole library's).")
        ],
        options: [Options.yes, Options.administrator]
    )

    let identifier: String
    let assumeYes: Bool
    let administrator: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        identifier = try arguments.positionals(["id"])[0]
        assumeYes = arguments.flag(Options.yes)
        administrator = arguments.flag(Options.administrator)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let inventory = Inventory.take(host: context.host)
        let items: [Inventory.Item]
        if Self.isPattern(identifier) {
            // A whole library's plugins (ladspa.cmt.*), each reviewed and pinned as one alone is.
            items = inventory.items.filter { fnmatch(identifier.lowercased(), $0.entry.identifier.lowercased(), 0) == 0 }
            guard !items.isEmpty else {
                throw CommandFailure(
                    message: "no installed plugin matches \(identifier.inert); see 'plugind list --all'", status: .unavailable)
            }
        } else {
            items = [try PluginLookup.item(identifier, in: inventory, host: context.host)]
        }
        // What is shown is what is written: the review reads and hashes each bundle once.
        var reviews: [(identifier: String, review: ApprovalReview)] = []
        for item in items {
            do {
                let review = try ApprovalReview(
                    entry: item.entry,
                    previous: ApprovalReview.previousApproval(of: item.entry.identifier, host: context.host, administrator: administrator))
                reviews.append((item.entry.identifier, review))
            } catch {
                throw CommandFailure(message: "\(error)", status: .failure)
            }
            context.console.err(
                "Approving " + PluginDescription.reviewLines(reviews[reviews.count - 1].review, host: context.host).joined(separator: "\n")
                    + "\n\n")
        }
        if !assumeYes {
            guard context.console.standardInputIsTerminal else {
                throw CommandFailure(
                    message: "refusing to approve without confirmation; pass --yes to approve non-interactively", status: .usage)
            }
            context.console.err(reviews.count == 1 ? "Approve this plugin? [y/N] " : "Approve these \(reviews.count) plugins? [y/N] ")
            let answer = context.console.readLine()?.lowercased() ?? ""
            guard answer == "y" || answer == "yes" else {
                context.console.err("Not approved.\n")
                return .failure
            }
        }
        let editor = PolicyEditor(for: context.host, administrator: administrator)
        for (identifier, review) in reviews {
            do {
                try editor.record(review.approval, for: identifier)
            } catch {
                throw CommandFailure(message: "\(error)", status: .failure)
            }
            context.console.err("Approved \(identifier.inert).\n")
        }
        return .success
    }

    /// Whether `text` is a shell pattern (`*`, `?`, `[…]`) rather than one identifier, which
    /// never holds those characters.
    static func isPattern(_ text: String) -> Bool {
        text.contains { "*?[".contains($0) }
    }
}
