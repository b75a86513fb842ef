import Foundation
import PlugindEngine
import PlugindFuzzing
import PlugindHostFuzzing

/// Every fuzz target of plugind, in one executable. Built with -sanitize=fuzzer -DFUZZING by
/// Scripts/fuzz.sh, libFuzzer drives the target PLUGIND_FUZZ_TARGET names (libFuzzer owns the
/// command line). Built normally, `plugind-fuzz TARGET FILE|DIR...` replays inputs (how a crash
/// is reproduced), and `plugind-fuzz channel-protocol|launch-pool-state --write-seeds DIR` writes that
/// target's seeds (real encodings of a worker's messages: the fuzzer could hardly guess a frame;
/// histories that reach the launch pool's soak cases).
enum FuzzTargets {
    static let all: [String: @Sendable ([UInt8]) throws -> Void] = [
        "frame-decoder": FrameDecoderFuzzing.run,
        "manifest-parser": ManifestParserFuzzing.run,
        "elf-reader": ELFReaderFuzzing.run,
        "channel-protocol": { _ = try ChannelProtocolFuzzing.run($0) },
        "launch-pool-state": { _ = try LaunchPoolStateFuzzing.run($0) },
        "policy-files": PolicyFilesFuzzing.run,
        "package": PackageFuzzing.run,
        "shared-ring": SharedRingFuzzing.run,
        "extension-point-descriptor": ExtensionPointDescriptorFuzzing.run,
        "publisher-key": PublisherKeyFuzzing.run,
        "statistics-page": StatisticsPageFuzzing.run,
        "plugin-log": PluginLogFuzzing.run,
        "activity-record": ActivityRecordFuzzing.run,
        "crash-log": CrashLogFuzzing.run,
        "worker-reports": WorkerReportFuzzing.run,
        "foreign-plugin-messages": ForeignPluginMessageFuzzing.run,
    ]

    /// The targets that write their seeds.
    static let seeds: [String: @Sendable () -> [[UInt8]]] = [
        "channel-protocol": ChannelProtocolFuzzing.seeds,
        "launch-pool-state": LaunchPoolStateFuzzing.seeds,
    ]

    static var names: String { all.keys.sorted().joined(separator: ", ") }
}

#if FUZZING
    import CFuzzerDriver

    /// The target libFuzzer drives, chosen before it starts: its callback is a C function, which
    /// cannot capture one.
    let selectedTarget = ProcessInfo.processInfo.environment["PLUGIND_FUZZ_TARGET"].flatMap { FuzzTargets.all[$0] }

    // SwiftPM links an executable's entry point under this name.
    @_cdecl("plugind_fuzz_main")
    func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        guard selectedTarget != nil else {
            FileHandle.standardError.write(Data("plugind-fuzz: set PLUGIND_FUZZ_TARGET to one of \(FuzzTargets.names)\n".utf8))
            return 2
        }
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
            do {
                try selectedTarget?(bytes)
            } catch {
                // A broken invariant: libFuzzer keeps the input that caused it.
                fatalError("\(error)")
            }
            return 0
        }
    }
#else
    @main
    enum Replay {
        static func main() {
            var arguments = Array(CommandLine.arguments.dropFirst())
            guard let name = arguments.first, let target = FuzzTargets.all[name] else {
                print(
                    "usage: plugind-fuzz TARGET FILE|DIR... | plugind-fuzz channel-protocol|launch-pool-state --write-seeds DIR (targets: \(FuzzTargets.names))"
                )
                exit(2)
            }
            arguments.removeFirst()
            if let seeds = FuzzTargets.seeds[name], arguments.first == "--write-seeds", arguments.count == 2 {
                let written = seeds().enumerated().allSatisfy { index, seed in
                    FileManager.default.createFile(atPath: arguments[1] + "/seed-\(index)", contents: Data(seed))
                }
                exit(written ? 0 : 1)
            }
            exit(FuzzReplay.main("plugind-fuzz \(name)", arguments, target))
        }
    }
#endif
