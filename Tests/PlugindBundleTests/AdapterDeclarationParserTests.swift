import Foundation
import PlugindBundle
import PlugindTypes
import TestSupport
import Testing

/// The manifest's `adapter` key (a LADSPA or frei0r plugin hosted through the worker's adapter):
/// what is accepted, and each refusal naming its key.
@Suite("Manifest adapter declarations", .tags(.unit))
struct AdapterDeclarationParserTests {
    static func manifest(library: String = "/usr/lib/ladspa/amp.so", adapter: Any?, extra: [String: Any] = [:]) -> [String: Any] {
        var object: [String: Any] = [
            "manifestVersion": 1, "identifier": "ladspa.amp.amp-mono", "name": "Amp", "version": "1",
            "extensionPoint": "org.plugind.ladspa", "library": library,
        ]
        if let adapter { object["adapter"] = adapter }
        return object.merging(extra) { $1 }
    }

    static func parse(_ object: [String: Any]) -> Result<Manifest, ManifestError> {
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        do {
            return .success(try ManifestParser.parse(data, file: "/b/manifest.json").manifest)
        } catch {
            return .failure(error)
        }
    }

    @Test("a LADSPA plugin by label and a frei0r library are declared with their buffers")
    func accepted() throws {
        let ladspa = try Self.parse(Self.manifest(adapter: ["abi": "ladspa", "plugin": "amp_mono", "buffers": 3])).get()
        #expect(ladspa.adapter == ForeignPluginDeclaration(abi: .ladspa, plugin: "amp_mono", buffers: 3))
        #expect(ladspa.library == "/usr/lib/ladspa/amp.so")
        let frei0r = try Self.parse(Self.manifest(library: "/usr/lib/frei0r-1/invert0r.so", adapter: ["abi": "frei0r", "buffers": 2])).get()
        #expect(frei0r.adapter == ForeignPluginDeclaration(abi: .frei0r, plugin: "", buffers: 2))
    }

    @Test(
        "refused, naming the key: an unknown ABI, a LADSPA plugin without a label, a frei0r one with one, no or too many buffers, a relative library, functions beside an adapter",
        arguments: [
            (#"{"abi": "lv2", "buffers": 1}"#, "/usr/lib/ladspa/amp.so", "{}", "adapter.abi"),
            (#"{"abi": "ladspa", "buffers": 3}"#, "/usr/lib/ladspa/amp.so", "{}", "adapter.plugin"),
            (#"{"abi": "frei0r", "plugin": "x", "buffers": 2}"#, "/usr/lib/frei0r-1/invert0r.so", "{}", "adapter.plugin"),
            (#"{"abi": "ladspa", "plugin": "amp_mono"}"#, "/usr/lib/ladspa/amp.so", "{}", "adapter.buffers"),
            (#"{"abi": "ladspa", "plugin": "amp_mono", "buffers": 5000}"#, "/usr/lib/ladspa/amp.so", "{}", "adapter.buffers"),
            (#"{"abi": "ladspa", "plugin": "amp_mono", "buffers": 3}"#, "amp.so", "{}", "library"),
            (
                #"{"abi": "ladspa", "plugin": "amp_mono", "buffers": 3}"#, "/usr/lib/ladspa/amp.so",
                #"{"functions": [{"name": "f", "arguments": [], "returns": "void"}]}"#, "functions"
            ),
        ])
    func refused(adapter: String, library: String, extra: String, key: String) throws {
        let adapterObject = try JSONSerialization.jsonObject(with: Data(adapter.utf8))
        let extraObject = try #require(try JSONSerialization.jsonObject(with: Data(extra.utf8)) as? [String: Any])
        guard case .failure(let error) = Self.parse(Self.manifest(library: library, adapter: adapterObject, extra: extraObject)) else {
            Issue.record("accepted: \(adapter) \(library)")
            return
        }
        #expect(error.key == key, "\(error)")
    }

    @Test("without an adapter an absolute library is refused as before")
    func absoluteWithoutAdapter() {
        guard case .failure(let error) = Self.parse(Self.manifest(adapter: nil)) else {
            Issue.record("accepted")
            return
        }
        #expect(error.key == "library")
    }
}
