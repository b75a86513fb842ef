import Foundation
import PlugindFuzzing
import TestSupport
import Testing

@Suite("Fuzz corpus replay")
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

    @Test("every manifest-parser input parses or is rejected, without failing its invariants")
    func manifestParser() throws {
        let inputs = FuzzReplay.inputs(in: [Self.root + "/manifest-parser"])
        #expect(inputs.count >= 5)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ManifestParserFuzzing.run(bytes) }
        }
    }

    @Test("the NaN call result the fuzzer found round-trips by its bytes")
    func nanRegression() throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.root + "/frame-decoder/regression-nan-call-result")))
        try FrameDecoderFuzzing.run(bytes)
    }
}
