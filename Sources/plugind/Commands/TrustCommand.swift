import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing

/// `plugind trust`: publishers whose signed plugins need no approval one by one.
struct TrustCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print JSON for scripts (list; the publishers under \"publishers\").")
        static let administrator = CommandOption.flag(
            "administrator", "Change the administrator's policy ($PLUGIND_ADMIN_POLICY_DIR) instead of yours.")
    }

    static let description = CommandDescription(
        name: "trust",
        abstract: "Trust a publisher for all of its signed plugins, list or remove trusted publishers.",
        usage: "add <public-key-file> | list [--json] | remove <fingerprint> [--administrator]",
        discussion: """
            A plugin whose signature holds and whose key is trusted is approved as it is, with the
            permissions and limits it asks for, in every version the publisher signs; disabling it
            still wins. 'add' takes the publisher's public key file ('plugind keygen' writes it
            beside the private key as <file>.pub) and prints its fingerprint: compare it with the
            one the publisher gave you. 'remove' takes a fingerprint from 'list'; plugins that
            were approved only through the trust become unapproved at once.
            """,
        arguments: [
            ("add <public-key-file>", "Trust the publisher of this key."),
            ("list", "The trusted publishers, with when they were trusted."),
            ("remove <fingerprint>", "Stop trusting a publisher."),
        ],
        options: [Options.json, Options.administrator]
    )

    enum Action {
        case add(String)
        case list
        case remove(String)
    }

    let action: Action
    let json: Bool
    let administrator: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals(["action"], optional: ["argument"])
        json = arguments.flag(Options.json)
        administrator = arguments.flag(Options.administrator)
        switch (words[0], words.count > 1 ? words[1] : nil) {
        case ("add", let file?): action = .add(file)
        case ("remove", let fingerprint?): action = .remove(fingerprint)
        case ("list", nil): action = .list
        case ("add", nil): throw UsageError(message: "trust add needs the publisher's public key file", command: "trust")
        case ("remove", nil): throw UsageError(message: "trust remove needs a fingerprint (see 'plugind trust list')", command: "trust")
        default: throw UsageError(message: "unknown action '\(words[0])' (use add, list or remove)", command: "trust")
        }
    }

    struct Entry: Encodable {
        var fingerprint: String
        var addedAt: String
        var administrator: Bool
    }

    /// `plugind trust list --json`: the owner's trusted publishers, then the administrator's.
    struct Document: JSONDocument {
        static let formatVersion = 1
        var publishers: [Entry]
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let editor = PolicyEditor(for: context.host, administrator: administrator)
        switch action {
        case .add(let file):
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw CommandFailure(message: "cannot read \(file.inert): \(error.localizedDescription)", status: .failure)
            }
            let key: PublisherKeys.PublicKey
            do {
                key = try PublisherKeys.PublicKey(pem: [UInt8](data))
            } catch {
                throw CommandFailure(message: "\(file.inert): \(error)", status: .failure)
            }
            do {
                try editor.trust(key)
            } catch {
                throw CommandFailure(message: "\(error)", status: .failure)
            }
            context.console.err("Trusted the publisher \(key.fingerprint) for all of its signed plugins.\n")
            context.console.out("\(key.fingerprint)\n")
        case .remove(let fingerprint):
            let removed: Bool
            do {
                removed = try editor.distrust(fingerprint)
            } catch {
                throw CommandFailure(message: "\(error)", status: .failure)
            }
            guard removed else {
                throw CommandFailure(
                    message: "\(fingerprint.inert) is not a trusted publisher (see 'plugind trust list')", status: .unavailable)
            }
            context.console.err("No longer trusting \(fingerprint.inert).\n")
        case .list:
            var entries: [Entry] = []
            for (path, isAdministrator) in [(context.host.policyDirectory, false), (context.host.administratorPolicyDirectory, true)] {
                let file = path.appendingPathComponent(PolicyDocument.fileName).path
                guard case .success(let document) = PolicyDocument.load(from: file) else { continue }
                entries += document.trustedPublishers.sorted { $0.key < $1.key }.map {
                    Entry(fingerprint: $0.key, addedAt: $0.value.addedAt, administrator: isAdministrator)
                }
            }
            if json {
                try context.console.json(Document(publishers: entries))
            } else if entries.isEmpty {
                context.console.out("No trusted publishers.\n")
            } else {
                for entry in entries {
                    context.console.out("\(entry.fingerprint)  since \(entry.addedAt)\(entry.administrator ? "  (administrator)" : "")\n")
                }
            }
        }
        return .success
    }
}
