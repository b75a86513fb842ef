import ExtensionFoundation
import Foundation
import PlugindFuzzing

// Built with -sanitize=fuzzer -DFUZZING by Scripts/fuzz.sh: libFuzzer drives the test function.
// Built normally: replays the files or directories given as arguments, or with
// `--write-seeds DIR` writes the seed conversations (real encodings of a worker's messages).
#if FUZZING
    import CFuzzerDriver

    // SwiftPM links an executable's entry point under this name.
    @_cdecl("fuzz_channel_protocol_main")
    func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
            do {
                try ChannelProtocolFuzzing.run(bytes)
            } catch {
                fatalError("\(error)")
            }
            return 0
        }
    }
#else
    @main
    enum Replay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == "--write-seeds", arguments.count == 2 {
                let written = ChannelProtocolFuzzing.seeds().enumerated().allSatisfy { index, seed in
                    FileManager.default.createFile(atPath: arguments[1] + "/seed-\(index)", contents: Data(seed))
                }
                exit(written ? 0 : 1)
            }
            exit(FuzzReplay.main("fuzz-channel-protocol", arguments) { _ = try ChannelProtocolFuzzing.run($0) })
        }
    }
#endif
