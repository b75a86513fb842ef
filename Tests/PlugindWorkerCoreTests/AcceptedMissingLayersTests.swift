import PlugindEngine
import PlugindWire
import PlugindWorkerCore
import TestSupport
import Testing

/// What a layer the machine's policy accepts as missing does to a host requiring every layer:
/// the worker goes on and reports it, while a layer not accepted still refuses, naming every
/// layer of its step that is missing and not accepted; and the list reaches the worker intact.
@Suite("Confinement steps: layers a machine accepts as missing", .tags(.unit))
struct AcceptedMissingLayersTests {
    typealias Layer = ConfinementLayerName

    /// Runs the table with `missing` layers reported unavailable.
    static func run(missing: Set<String>, accepted: [String], requiresEveryLayer: Bool = true) throws(LoadFailure)
        -> [ConfinementLayerReport]
    {
        let request = ConfinementRequest(requiresEveryLayer: requiresEveryLayer, acceptedMissingLayers: accepted)
        return try ConfinementSteps.run(
            request: request,
            apply: { step, _ in
                step.layers.map { layer in
                    ConfinementLayerReport(
                        layer: layer, state: missing.contains(layer) ? .unavailable : .applied, detail: "\(step.id.rawValue) missing")
                }
            })
    }

    @Test("an accepted layer is reported unavailable and the load goes on")
    func acceptedGoesOn() throws {
        let reports = try Self.run(missing: [Layer.filesystem, Layer.signals], accepted: [Layer.filesystem, Layer.signals])
        #expect(reports.map(\.layer) == Layer.all)
        #expect(reports.filter { $0.state == .unavailable }.map(\.layer) == [Layer.filesystem, Layer.signals])
    }

    @Test("a missing layer not accepted still refuses, naming the step's missing layers that are not accepted")
    func othersRefuse() {
        #expect(
            throws: LoadFailure(
                kind: .confinementFailed, message: "confinement layer 'filesystem' cannot be applied: landlock missing; nor can 'signals'")
        ) {
            try Self.run(missing: [Layer.filesystem, Layer.signals], accepted: [])
        }
        #expect(
            throws: LoadFailure(kind: .confinementFailed, message: "confinement layer 'signals' cannot be applied: landlock missing")
        ) {
            try Self.run(missing: [Layer.filesystem, Layer.signals], accepted: [Layer.filesystem])
        }
        #expect(
            throws: LoadFailure(
                kind: .confinementFailed, message: "confinement layer 'system-calls' cannot be applied: system-calls missing")
        ) {
            try Self.run(missing: [Layer.systemCalls, Layer.filesystem, Layer.signals], accepted: [Layer.filesystem, Layer.signals])
        }
    }

    @Test("the refusal's words are the ones the host reads back to say how to accept the layers")
    func wordsReadBack() throws {
        do {
            _ = try Self.run(missing: [Layer.filesystem, Layer.signals], accepted: [])
            Issue.record("the load went on")
        } catch {
            #expect(MissingLayersRefusal.layers(in: error.message) == [Layer.filesystem, Layer.signals])
        }
    }

    @Test("a best-effort request goes on whatever is accepted")
    func bestEffort() throws {
        let reports = try Self.run(missing: [Layer.systemCalls], accepted: [], requiresEveryLayer: false)
        #expect(reports.filter { $0.state == .unavailable }.map(\.layer) == [Layer.systemCalls])
    }

    @Test("the accepted layers reach the worker in the hello, with and without libraries to preload; a hello without them reads as before")
    func wire() throws {
        var load = LoadConfiguration(pluginIdentifier: "org.example.x", libraryPath: "/b/libX.so")
        let plain = try HostMessage(HostMessage.hello(Hello(load: load)).encode())
        load.confinement.acceptedMissingLayers = [Layer.filesystem, Layer.signals]
        #expect(try HostMessage(HostMessage.hello(Hello(load: load)).encode()) == .hello(Hello(load: load)))
        load.preloadLibraries = ["/usr/lib/libz.so.1"]
        #expect(try HostMessage(HostMessage.hello(Hello(load: load)).encode()) == .hello(Hello(load: load)))
        guard case .hello(let hello) = plain else {
            Issue.record("not a hello")
            return
        }
        #expect(hello.load.confinement.acceptedMissingLayers.isEmpty)
        #expect(hello.load.confinement.requires(Layer.filesystem))
    }
}
