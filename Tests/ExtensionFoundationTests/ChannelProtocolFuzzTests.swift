import ExtensionFoundation
import PlugindEngine
import PlugindFuzzing
import PlugindHostFuzzing
import TestSupport
import Testing

/// The channel-protocol fuzz target's corpus, replayed: what a worker wrote, interleaved with the
/// host's inputs, never traps the host's state machine, completes nothing twice and leaves nothing
/// waiting once the worker ended.
@Suite("Fuzz corpus replay: the host's protocol state machine", .tags(.unit))
struct ChannelProtocolFuzzTests {
    @Test("the seed conversations and every corpus input keep the machine's invariants")
    func corpus() throws {
        let seeds = ChannelProtocolFuzzing.seeds()
        #expect(seeds.count >= 6)
        let reached = try seeds.map { try ChannelProtocolFuzzing.run($0) }
        // Each seed reaches what it is for: the fuzzer starts from real conversations.
        #expect(reached[0] == .init(answered: 1, failed: 0, accepted: 1, asks: 0, stopped: false), "\(reached[0])")
        #expect(reached[1].failed == 1 && reached[1].accepted == 1, "\(reached[1])")
        #expect(reached[2].asks == 1 && reached[2].answered == 1, "\(reached[2])")
        #expect(reached[3].failed == 1 && reached[3].stopped, "the stuck worker is stopped after the grace: \(reached[3])")
        #expect(reached[4].answered == 1 && reached[4].accepted == 0, "\(reached[4])")
        #expect(reached[5].answered == 1, "\(reached[5])")
        #expect(reached[6].asks == 1 && reached[6].failed == 1, "a callback's handler ran, then its call failed: \(reached[6])")
        let inputs = FuzzReplay.inputs(in: [BuiltProducts.packageRoot + "/Fuzz/Corpus/channel-protocol"])
        #expect(inputs.count >= 6)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try ChannelProtocolFuzzing.run(bytes) }
        }
    }
}
