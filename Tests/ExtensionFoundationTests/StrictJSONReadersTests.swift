import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindFuzzing
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Strict JSON readers of policy files", .tags(.unit))
struct StrictJSONReadersTests {
    let decoder = StrictJSONDecoder()

    static func policy() -> PolicyDocument {
        var document = PolicyDocument()
        let identity = FileIdentity(device: .max, inode: 1 << 40, size: 12_345, modificationNanoseconds: .min, changeNanoseconds: .max)
        let approval = Approval(
            bundlePath: "/home/owner/.local/lib/plugind/plugins/Echo.plugin", bundleDigest: String(repeating: "0f", count: 32),
            files: ["libEcho.so": String(repeating: "aa", count: 32), "Info.json": String(repeating: "bb", count: 32)],
            fileIdentities: ["libEcho.so": identity],
            systemLibrary: Approval.PinnedFile(path: "/usr/lib/libz.so.1", sha256: String(repeating: "cc", count: 32), identity: identity),
            permissions: Manifest.Permissions(network: true, processes: true, read: ["/srv/data"], write: ["/tmp/out"], symlinks: true),
            resolvedGrants: ["/srv/data": "/mnt/data"], publisherKey: "AAAA", limits: ["memory": .max, "processes": 0], version: "1.2.3")
        document.plugins["org.plugind.tests.echo"] = PluginPolicy(state: .approved, approval: approval, changedAt: "2024-05-01T12:00:00Z")
        document.plugins["org.plugind.tests.off"] = PluginPolicy(state: .disabled, approval: nil, changedAt: "2024-05-02T12:00:00Z")
        document.trustedPublishers["ed25519:abc"] = TrustedPublisher(publicKey: "AAAA", addedAt: "2024-05-01T12:00:00Z")
        return document
    }

    static let rulesText = """
        { "formatVersion": 1, "requireSignatures": true,
          "rules": [ { "name": "no-tools", "effect": "deny", "identifier": "com.example.tools.*" },
                     { "name": "acme", "effect": "allow", "publisher": "ed25519:abc", "extensionPoint": "com.example.editor.*" } ] }
        """

    @Test("a policy round-trips: JSONEncoder writes it, the strict decoder and the policy reader read it back equal")
    func policyRoundTrip() throws {
        let document = Self.policy()
        #expect(try decoder.decode(PolicyDocument.self, from: JSONEncoder().encode(document)) == document)
        #expect(try PolicyDocument.decode(Array(document.encoded()), path: "p").get() == document)
    }

    @Test("the administrator's rules round-trip, and read as Foundation's decoder read them")
    func rulesRoundTrip() throws {
        let rules = try AdministratorRules.decode(Array(Self.rulesText.utf8), path: "r").get()
        #expect(rules == (try JSONDecoder().decode(AdministratorRules.self, from: Data(Self.rulesText.utf8))))
        #expect(rules.requireSignatures && rules.rules.count == 2)
        #expect(try decoder.decode(AdministratorRules.self, from: JSONEncoder().encode(rules)) == rules)
    }

    @Test("a key twice is refused by the policy and rules readers, naming the file and where; Foundation's decoder read one")
    func duplicateKeys() throws {
        // Disabled for one reader, approved for another (Foundation's decoder keeps one of the two,
        // its JSONSerialization and Python's json the other): refused instead.
        let policy = #"{"version": 2, "plugins": {"x": {"state": "disabled", "changedAt": "t", "state": "approved"}}}"#
        #expect(throws: Never.self) { try JSONDecoder().decode(PolicyDocument.self, from: Data(policy.utf8)) }
        guard case .failure(let error) = PolicyDocument.decode(Array(policy.utf8), path: "owner/policy.json") else {
            Issue.record("a policy with a key twice was read")
            return
        }
        #expect(error.description.hasPrefix("policy file owner/policy.json is corrupt ("), "\(error)")
        #expect(error.reason.contains("\"state\" appears twice") && error.reason.contains("line 1, column 73"), "\(error)")

        let rules = #"{"formatVersion": 1, "rules": [{"name": "n", "effect": "deny", "effect": "allow", "identifier": "*"}]}"#
        #expect(throws: Never.self) { try JSONDecoder().decode(AdministratorRules.self, from: Data(rules.utf8)) }
        guard case .failure(let refused) = AdministratorRules.decode(Array(rules.utf8), path: "admin/rules.json") else {
            Issue.record("rules with a key twice were read")
            return
        }
        #expect(refused.path == "admin/rules.json" && refused.reason.hasPrefix("is malformed ("), "\(refused)")
        #expect(refused.reason.contains("\"effect\" appears twice"), "\(refused)")
    }

    @Test("a limit beyond 64 bits is refused naming its key path, not cut")
    func limitOutOfRange() {
        let policy = """
            {"version": 2, "plugins": {"x": {"state": "approved", "changedAt": "t",
              "approval": {"bundlePath": "/b", "permissions": {"network": false, "read": [], "write": []},
                           "limits": {"memory": 18446744073709551616}}}}}
            """
        guard case .failure(let error) = PolicyDocument.decode(Array(policy.utf8), path: "p") else {
            Issue.record("a limit of 2^64 was read")
            return
        }
        #expect(error.reason.contains("'plugins.x.approval.limits.memory'") && error.reason.contains("UInt64"), "\(error)")
    }

    @Test("the policy-files corpus reads as Foundation's decoder read it, wherever that one was not ambiguous")
    func agreesOnCorpus() throws {
        let inputs = FuzzReplay.inputs(in: [BuiltProducts.packageRoot + "/Fuzz/Corpus/policy-files"])
        #expect(inputs.count >= 4)
        var compared = 0
        for (path, bytes) in inputs {
            guard let kind = bytes.first else { continue }
            let contents = Array(bytes.dropFirst())
            func agree<T: Decodable & Equatable>(_ type: T.Type) {
                let strict = Result { try decoder.decode(type, from: contents) }
                let foundation = Result { try JSONDecoder().decode(type, from: Data(contents)) }
                switch (strict, foundation) {
                case (.success(let strict), .success(let foundation)):
                    #expect(strict == foundation, "\(path)")
                    compared += 1
                case (.failure, .failure): break
                default: Issue.record("\(path): the strict decoder read \(strict), Foundation's \(foundation)")
                }
            }
            if kind % 2 == 0 { agree(PolicyDocument.self) } else { agree(AdministratorRules.self) }
        }
        #expect(compared >= 2)
    }
}
