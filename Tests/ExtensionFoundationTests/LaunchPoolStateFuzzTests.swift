import PlugindFuzzing
import PlugindHostFuzzing
import TestSupport
import Testing

/// The launch-pool-state fuzz target, replayed: its seeds, its corpus, and a few thousand random
/// histories, each checked on every step (no spare handed out twice, no effect on a process that
/// ended, nothing completed twice) and after the stop (every process accounted for).
@Suite("Fuzz replay: the launch pool's state machine", .tags(.unit))
struct LaunchPoolStateFuzzTests {
    @Test("the seed histories reach what they are for")
    func seeds() throws {
        let seeds = LaunchPoolStateFuzzing.seeds()
        let reached = try seeds.map { try LaunchPoolStateFuzzing.run($0) }
        #expect(reached[0].forked == 1, "\(reached[0])")
        #expect(reached[1].launchersLost == 1 && reached[1].forked == 1, "\(reached[1])")
        #expect(
            reached[2].sparesEnded >= 1 && reached[2].sparesHanded == 0, "the spare made before the change serves no launch: \(reached[2])")
        #expect(reached[3].primed == 1, "\(reached[3])")
        #expect(reached[4].settled == 1, "\(reached[4])")
        #expect(reached[5].forked >= 1, "\(reached[5])")
        let inputs = FuzzReplay.inputs(in: [BuiltProducts.packageRoot + "/Fuzz/Corpus/launch-pool-state"])
        #expect(inputs.count >= seeds.count)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try LaunchPoolStateFuzzing.run(bytes) }
        }
    }

    @Test("thousands of random histories keep the machine's invariants")
    func randomHistories() throws {
        // A fixed seed: a failure names the history, which replays the same everywhere.
        var generator = SplitMix(seed: 0x6c61_756e_6368)
        var total = LaunchPoolStateFuzzing.Reached()
        for history in 0..<4000 {
            let length = 16 + Int(generator.next() % 600)
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            do {
                let reached = try LaunchPoolStateFuzzing.run(bytes)
                total.forked += reached.forked
                total.launchersLost += reached.launchersLost
                total.sparesHanded += reached.sparesHanded
                total.sparesEnded += reached.sparesEnded
                total.primed += reached.primed
                total.settled += reached.settled
            } catch {
                Issue.record("history \(history) (\(bytes.count) bytes: \(bytes)): \(error)")
                return
            }
        }
        // The histories reach the machine's paths, not only its refusals.
        #expect(total.forked > 100 && total.launchersLost > 100, "\(total)")
        #expect(total.sparesHanded > 100 && total.sparesEnded > 100 && total.primed > 10 && total.settled > 10, "\(total)")
    }
}

/// A small, fixed-seed generator (SplitMix64): the same histories on every run.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
