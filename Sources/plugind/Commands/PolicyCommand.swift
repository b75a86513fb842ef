import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import PlugindWire

/// `plugind policy`: where the policy lives, recovery from a corrupt policy file, and which
/// missing confinement layers this machine accepts.
struct PolicyCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let revoke = CommandOption.flag("revoke", "accept-missing: stop accepting the layers; a launch refuses again.")
        static let administrator = CommandOption.flag(
            "administrator", "accept-missing: change the administrator's policy (every user's) instead of yours.")
    }

    static let description = CommandDescription(
        name: "policy",
        abstract: "Show the policy files and whether they can be used, move a corrupt one aside, or accept missing layers.",
        usage: "[check | path | reset | accept-missing <name>... [--revoke] [--administrator]]",
        discussion: """
            A policy file that cannot be read, or that another user could have written (the file or
            a directory above it is writable by others or owned by someone else), approves nothing,
            and plugind never overwrites it on its own. 'check' (the default) shows each file's
            state and the fix, and the confinement layers each accepts as missing; exit status 1
            when one cannot be used. 'reset' renames a corrupt file to policy.json.corrupt-<time>
            (nothing is deleted) so that approvals can start again from an empty policy.
            'accept-missing' lets every launch on this machine run without the named layers
            where they cannot be applied (a container whose filter refuses Landlock, say): the
            worker still applies each one it can and reports the rest; layers not named still
            refuse the launch. The names are those 'plugind info' reports (filesystem, signals,
            system-calls, ...); see plugind-policy(5).
            """,
        arguments: [
            ("check", "Show each policy file and whether it can be used (the default)."),
            ("path", "Print the owner's and the administrator's policy files."), ("reset", "Move a corrupt policy file aside."),
            ("accept-missing <name>", "Accept these confinement layers (one or more) missing on this machine; --revoke: no longer."),
        ],
        options: [Options.revoke, Options.administrator]
    )

    let action: String
    let layers: [String]
    let revoke: Bool
    let administrator: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals([], optional: ["action"], variadic: true)
        action = words.first ?? "check"
        layers = Array(words.dropFirst())
        revoke = arguments.flag(Options.revoke)
        administrator = arguments.flag(Options.administrator)
        guard ["check", "path", "reset", "accept-missing"].contains(action) else {
            throw UsageError(message: "unknown action '\(action)' (use check, path, reset or accept-missing)", command: "policy")
        }
        if action == "accept-missing" {
            guard !layers.isEmpty else {
                throw UsageError(
                    message: "accept-missing needs the layers, as 'plugind info' names them: "
                        + ConfinementLayerName.all.joined(separator: ", "), command: "policy")
            }
            if let problem = layers.lazy.compactMap(PolicyDocument.unknownLayerProblem).first {
                throw UsageError(message: problem, command: "policy")
            }
        } else if !layers.isEmpty {
            throw UsageError(message: "unexpected argument '\(layers[0])'", command: "policy")
        } else if revoke || administrator {
            throw UsageError(message: "--\(revoke ? "revoke" : "administrator") goes with accept-missing", command: "policy")
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
                    var state = FileManager.default.fileExists(atPath: file) ? "ok, \(document.plugins.count) plugin(s)" : "none yet"
                    if !document.acceptMissingLayers.isEmpty {
                        state += "; accepts missing: " + document.acceptMissingLayers.joined(separator: ", ")
                    }
                    if role == "administrator" && document.ownersMayAcceptMissingLayers == false {
                        state += "; owners may not accept missing layers"
                    }
                    context.console.out("\(file) (\(role)): \(state)\n")
                case .failure(let error):
                    usable = false
                    context.console.out("\(file) (\(role)): cannot be used: \(error.reason)\n")
                }
            }
            let accepted = MissingLayerAcceptance.read(for: context.host)
            if !accepted.owner.isEmpty || !accepted.administrator.isEmpty {
                context.console.out("missing layers accepted on this machine: \(accepted.layers.joined(separator: ", "))\n")
            } else if let mine = try? PolicyDocument.load(from: editor.path).get(), !mine.acceptMissingLayers.isEmpty {
                context.console.out(
                    "missing layers accepted on this machine: none (the administrator's policy does not let owners add any)\n")
            }
            return usable ? .success : .failure
        }
        if action == "accept-missing" { return try acceptMissing(context) }
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

    /// `accept-missing`: changes the list in the owner's (or administrator's) policy and says
    /// what holds now.
    private func acceptMissing(_ context: CommandContext) throws -> ExitStatus {
        let editor = PolicyEditor(for: context.host, administrator: administrator)
        if !administrator && !revoke && !MissingLayerAcceptance.read(for: context.host).ownersMayAccept {
            throw CommandFailure(
                message: "the administrator's policy (\(PolicyEditor(for: context.host, administrator: true).path)) does not let owners "
                    + "accept missing layers (\"ownersMayAcceptMissingLayers\": false); ask the administrator, who can run "
                    + "'plugind policy accept-missing \(layers.joined(separator: " ")) --administrator'",
                status: .failure)
        }
        let changed: [String]
        do {
            changed = revoke ? try editor.refuseMissing(layers) : try editor.acceptMissing(layers)
        } catch {
            throw CommandFailure(message: "\(error)", status: .failure)
        }
        let unchanged = layers.filter { !changed.contains($0) }
        if !changed.isEmpty {
            context.console.err(
                (revoke ? "No longer accepted missing: " : "Accepted missing: ") + changed.joined(separator: ", ") + " (\(editor.path)).\n")
        }
        if !unchanged.isEmpty {
            context.console.err(
                (revoke ? "Not accepted there: " : "Accepted already: ") + unchanged.joined(separator: ", ") + " (\(editor.path)).\n")
        }
        let now = MissingLayerAcceptance.read(for: context.host)
        context.console.err(
            "Missing layers accepted on this machine now: \(now.layers.isEmpty ? "none" : now.layers.joined(separator: ", ")).\n")
        if revoke, let still = layers.first(where: { !now.acceptedBy($0).isEmpty }) {
            context.console.err("'\(still)' is still accepted by \(now.acceptedBy(still).joined(separator: " and ")).\n")
        }
        return .success
    }
}
