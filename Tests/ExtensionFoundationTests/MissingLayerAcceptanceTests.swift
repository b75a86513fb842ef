import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import PlugindWire
import TestSupport
import Testing

/// The policy files' `acceptMissingLayers`: how it is read (names the worker reports, an unknown
/// one refusing the file with its path and the names it may hold), how the owner's and the
/// administrator's combine, what a launch plan asks of the worker, and the words that say how to
/// accept a layer a launch was refused for.
@Suite("Missing confinement layers a machine accepts", .tags(.unit))
struct MissingLayerAcceptanceTests {
    static func decoded(_ json: String, path: String = "/etc/plugind/policy.json") -> Result<PolicyDocument, PolicyFileError> {
        PolicyDocument.decode(Array(json.utf8), path: path)
    }

    @Test("acceptMissingLayers and ownersMayAcceptMissingLayers are read; without them nothing is accepted")
    func parsed() throws {
        let document = try Self.decoded(
            #"{"version": 2, "acceptMissingLayers": ["filesystem", "signals"], "ownersMayAcceptMissingLayers": false}"#
        ).get()
        #expect(document.acceptMissingLayers == ["filesystem", "signals"])
        #expect(document.ownersMayAcceptMissingLayers == false)
        let plain = try Self.decoded(#"{"version": 2}"#).get()
        #expect(plain.acceptMissingLayers.isEmpty)
        #expect(plain.ownersMayAcceptMissingLayers == nil)
    }

    @Test("an unknown layer refuses the file, naming its path, the name and every name it may hold")
    func unknownLayer() throws {
        let path = "/home/ada/.config/plugind/policy.json"
        guard case .failure(let error) = Self.decoded(#"{"version": 2, "acceptMissingLayers": ["filesystem", "landlok"]}"#, path: path)
        else {
            Issue.record("an unknown layer was read")
            return
        }
        #expect(error.path == path)
        #expect(error.description.hasPrefix("policy file \(path) names an unknown layer in acceptMissingLayers: 'landlok'"))
        for layer in ConfinementLayerName.all { #expect(error.reason.contains(layer)) }
        // A mechanism's name is refused too, naming its layers.
        guard case .failure(let mechanism) = Self.decoded(#"{"version": 2, "acceptMissingLayers": ["landlock"]}"#) else {
            Issue.record("a mechanism's name was read as a layer")
            return
        }
        #expect(mechanism.reason.contains("landlock is a mechanism; its layers are 'filesystem' and 'signals'"), "\(mechanism)")
    }

    @Test("the wrong type is refused as the strict reader refuses it, naming the key")
    func wrongType() {
        guard case .failure(let error) = Self.decoded(#"{"version": 2, "acceptMissingLayers": "filesystem"}"#) else {
            Issue.record("a string was read as a list")
            return
        }
        #expect(error.reason.contains("acceptMissingLayers"), "\(error)")
        guard case .failure(let duplicate) = Self.decoded(#"{"version": 2, "acceptMissingLayers": [], "acceptMissingLayers": []}"#)
        else {
            Issue.record("a duplicate key was read")
            return
        }
        #expect(duplicate.path == "/etc/plugind/policy.json")
    }

    @Test("a policy that states nothing is written as before, and what it states reads back")
    func encoded() throws {
        var document = PolicyDocument()
        let plain = String(decoding: try document.encoded(), as: UTF8.self)
        #expect(!plain.contains("acceptMissingLayers"))
        #expect(!plain.contains("ownersMayAcceptMissingLayers"))
        document.acceptMissingLayers = ["system-calls"]
        document.ownersMayAcceptMissingLayers = false
        let read = try PolicyDocument.decode(Array(try document.encoded()), path: "/p").get()
        #expect(read == document)
    }

    static func acceptance(owner: [String]?, administrator: [String]?, ownersMay: Bool? = nil) -> MissingLayerAcceptance {
        func document(_ layers: [String]?) -> PolicyDocument? {
            guard let layers else { return nil }
            var document = PolicyDocument()
            document.acceptMissingLayers = layers
            document.ownersMayAcceptMissingLayers = ownersMay
            return document
        }
        return MissingLayerAcceptance(
            user: document(owner), administrator: document(administrator), ownerFile: "/home/ada/.config/plugind/policy.json",
            administratorFile: "/etc/plugind/policy.json")
    }

    @Test("the owner's layers add to the administrator's, in the worker's order, each naming whose file accepts it")
    func union() {
        let accepted = Self.acceptance(owner: ["signals", "filesystem"], administrator: ["filesystem", "process-tree"])
        #expect(accepted.layers == ["process-tree", "filesystem", "signals"])
        #expect(accepted.acceptedBy("filesystem") == ["/etc/plugind/policy.json", "/home/ada/.config/plugind/policy.json"])
        #expect(accepted.acceptedBy("signals") == ["/home/ada/.config/plugind/policy.json"])
        #expect(accepted.acceptedBy("system-calls").isEmpty)
    }

    @Test("an administrator who forbids it leaves the owner's layers unused; an unusable administrator's file accepts nothing")
    func administratorDecides() {
        let forbidden = Self.acceptance(owner: ["signals"], administrator: ["filesystem"], ownersMay: false)
        #expect(forbidden.layers == ["filesystem"])
        #expect(!forbidden.ownersMayAccept)
        #expect(Self.acceptance(owner: ["signals"], administrator: nil).layers.isEmpty)
        #expect(Self.acceptance(owner: nil, administrator: ["signals"]).layers == ["signals"])
        #expect(Self.acceptance(owner: [], administrator: []).layers.isEmpty)
    }

    @Test("a refusal for missing layers gets the command and the files that accept them; any other error is left as it is")
    func advice() {
        let accepted = Self.acceptance(owner: [], administrator: [])
        let reason = MissingLayersRefusal.message(layers: ["filesystem", "signals"], detail: "the kernel does not offer Landlock")
        let refusal = AppExtensionError(.confinementUnavailable, plugin: "org.example.x", reason)
        let advised = accepted.advised(refusal)
        #expect(
            advised.reason
                == reason
                + "; to run plugins without them on this machine, run 'plugind policy accept-missing filesystem signals' (adds "
                + "\"filesystem\" and \"signals\" to acceptMissingLayers in /home/ada/.config/plugind/policy.json; with "
                + "--administrator, as root, in /etc/plugind/policy.json for every user; see plugind-policy(5))")
        #expect(advised.code == .confinementUnavailable)
        #expect(advised.pluginIdentifier == "org.example.x")
        let other = AppExtensionError(.confinementUnavailable, plugin: "org.example.x", "no descriptor of the host's tree may stay open")
        #expect(accepted.advised(other).reason == other.reason)
        let crash = AppExtensionError(.workerCrashed, plugin: "org.example.x", reason)
        #expect(accepted.advised(crash).reason == reason)
        let forbidden = Self.acceptance(owner: [], administrator: [], ownersMay: false)
        #expect(
            forbidden.advice(accepting: ["system-calls"]).contains(
                "the administrator can run 'plugind policy accept-missing system-calls --administrator'"))
    }

    @Test("the refusal's words name the layers, and only a refusal's")
    func refusalWords() {
        #expect(MissingLayersRefusal.layers(in: "confinement layer 'filesystem' cannot be applied: why") == ["filesystem"])
        #expect(
            MissingLayersRefusal.layers(in: MissingLayersRefusal.message(layers: ["filesystem", "signals"], detail: "x; y"))
                == ["filesystem", "signals"])
        #expect(MissingLayersRefusal.layers(in: "confinement layer 'nonsense' cannot be applied: why") == nil)
        #expect(MissingLayersRefusal.layers(in: "cannot build the plugin's view: ENOSPC") == nil)
    }

    @Test("a launch plan asks the worker to accept the policy's layers only where a missing layer would refuse it")
    func plans() throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.accepting")
        try test.install(fixture, bundled: true)
        let entry = try #require(Inventory.take(host: test.host, catalog: Catalog()).item(fixture.identifier)).entry
        func accepted(_ host: AppExtensionHost, enhanced: Bool = false) -> [String] {
            LaunchPlan(entry: entry, host: host, requiresEnhancedSecurity: enhanced).load.confinement.acceptedMissingLayers
        }
        #expect(accepted(test.host).isEmpty)
        try PolicyEditor(for: test.host, administrator: false).acceptMissing(["signals", "filesystem"])
        #expect(accepted(test.host) == ["filesystem", "signals"])
        #expect(LaunchPlan(entry: entry, host: test.host).load.confinement.requiresEveryLayer)
        // Enhanced security requires every layer whatever the machine says; a best-effort host
        // needs no acceptance.
        #expect(accepted(test.host, enhanced: true).isEmpty)
        var bestEffort = test.host
        bestEffort.confinement = .bestEffort
        #expect(accepted(bestEffort).isEmpty)
        try PolicyEditor(for: test.host, administrator: false).refuseMissing(["filesystem"])
        #expect(accepted(test.host) == ["signals"])
    }

    @Test("the editor adds each layer once, in the worker's order, removes them, and refuses an unknown one writing nothing")
    func editor() throws {
        let test = try TestHost()
        defer { test.remove() }
        let editor = PolicyEditor(for: test.host, administrator: true)
        #expect(try editor.acceptMissing(["signals", "filesystem", "signals"]) == ["filesystem", "signals"])
        #expect(try editor.acceptMissing(["filesystem"]).isEmpty)
        #expect(try PolicyDocument.load(from: editor.path).get().acceptMissingLayers == ["filesystem", "signals"])
        #expect(throws: PolicyEditor.EditError.self) { try editor.acceptMissing(["landlock"]) }
        #expect(try PolicyDocument.load(from: editor.path).get().acceptMissingLayers == ["filesystem", "signals"])
        #expect(try editor.refuseMissing(["filesystem", "system-calls"]) == ["filesystem"])
        #expect(MissingLayerAcceptance.read(for: test.host).layers == ["signals"])
        #expect(MissingLayerAcceptance.read(for: test.host).acceptedBy("signals") == [editor.path])
    }
}
