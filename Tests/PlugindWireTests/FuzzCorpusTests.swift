import Foundation
import PlugindBundle
import PlugindFuzzing
import PlugindWire
import TestSupport
import Testing

@Suite("Fuzz corpus replay", .tags(.unit))
struct FuzzCorpusTests {
    static let root = BuiltProducts.packageRoot + "/Fuzz/Corpus"

    @Test("every frame-decoder input, including past crashes, decodes without failing its invariants")
    func frameDecoder() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/frame-decoder"])
        #expect(inputs.count >= 10)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try FrameDecoderFuzzing.run(bytes) }
        }
    }

    @Test("every package input unpacks or is refused having written nothing; a signed package's seed unpacks")
    func package() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/package"])
        #expect(inputs.count >= 3)
        var unpacked = 0
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { if try PackageFuzzing.unpacks(bytes) { unpacked += 1 } }
        }
        #expect(unpacked >= 1, "no seed reaches the unpacking: the fuzzer would never get past the signature")
    }

    @Test("every manifest-parser input parses or is rejected, without failing its invariants")
    func manifestParser() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/manifest-parser"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ManifestParserFuzzing.run(bytes) }
        }
    }

    @Test("every ELF-reader input, and the example plugins, read or are rejected without failing an invariant")
    func elfReader() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/elf-reader"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ELFReaderFuzzing.run(bytes) }
        }
        // Each hand-made hostile header is rejected, not read.
        for (path, bytes) in inputs where !path.hasSuffix("minimal-header") {
            #expect(throws: ELFFile.Problem.self, "\(path)") { try ELFFile.inspect(bytes: bytes) }
        }
        let plugin = try ELFFile.inspect(bytes: [UInt8](Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo")))))
        #expect(plugin.exportedSymbols.contains("plugind_plugin_entry"))
        #expect(plugin.pluginABIVersion == 2)
    }

    @Test("every shared-ring script keeps the ring's bounds, and the honest ones read back exactly what was written")
    func sharedRing() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/shared-ring"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try SharedRingFuzzing.run(bytes) }
        }
    }

    @Test("every extension-point descriptor is read as valid or refused naming the file; the valid seeds are read")
    func extensionPointDescriptor() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/extension-point-descriptor"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ExtensionPointDescriptorFuzzing.run(bytes) }
        }
        // The seeds reach the accepted side, so the fuzzer starts past the name check.
        let directory = try FuzzScratch.emptyDirectory()
        for (path, bytes) in inputs where path.contains("/seed-") {
            let file = directory + "/org.example.host.text-filter.json"
            try FuzzScratch.write(bytes, to: file)
            #expect(throws: Never.self, "\(path)") { try ExtensionPointDescriptor.read(atPath: file) }
        }
    }

    @Test("every publisher key and signature file is read or refused; the seeds reach a key and a signature that holds")
    func publisherKey() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/publisher-key"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try PublisherKeyFuzzing.run(bytes) }
        }
        let key = try #require(inputs.first { $0.path.hasSuffix("/seed-public-key") })
        #expect(throws: Never.self) { try PublisherKeys.PublicKey(pem: Array(key.bytes.dropFirst())) }
        let signed = try #require(inputs.first { $0.path.hasSuffix("/seed-signature") })
        let signature = try JSONDecoder().decode(BundleSignature.self, from: Data(signed.bytes.dropFirst()))
        #expect(signature.check(digest: signature.bundleDigest).validKey != nil)
    }

    @Test("every foreign-plugin-messages input decodes and encodes back, or is refused; the seeds decode")
    func foreignPluginMessages() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/foreign-plugin-messages"])
        #expect(inputs.count >= 9)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ForeignPluginMessageFuzzing.run(bytes) }
        }
        let ladspa = try #require(inputs.first { $0.path.hasSuffix("/seed-ladspa-description") })
        guard case .ladspa(let plugins) = try ForeignLibraryDescription(Array(ladspa.bytes.dropFirst())) else {
            Issue.record("the LADSPA seed is not a LADSPA description")
            return
        }
        #expect(plugins.first?.ports.map(\.name) == ["Gain", "Input", "Output"])
        let frei0r = try #require(inputs.first { $0.path.hasSuffix("/seed-frei0r-description") })
        guard case .frei0r(let plugin) = try ForeignLibraryDescription(Array(frei0r.bytes.dropFirst())) else {
            Issue.record("the frei0r seed is not a frei0r description")
            return
        }
        #expect(plugin.parameters.map(\.initialValue) == [.color(red: 0, green: 0, blue: 0), .double(0.25), .string("median"), nil])
        let doorbell = try #require(inputs.first { $0.path.hasSuffix("/seed-doorbell-offset") })
        #expect(try ForeignBlockDoorbell.offset(Array(doorbell.bytes.dropFirst())) == 4160)
    }

    @Test("the NaN call result the fuzzer found round-trips by its bytes")
    func nanRegression() throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.root + "/frame-decoder/regression-nan-call-result")))
        try FrameDecoderFuzzing.run(bytes)
    }
}
