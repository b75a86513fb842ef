import ExtensionFoundation
import Foundation
import PlugindFuzzing

// Built with -sanitize=fuzzer -DFUZZING by Scripts/fuzz.sh: libFuzzer drives the test function.
// Built normally: replays the files or directories given as arguments.
#if FUZZING
    import CFuzzerDriver

    // SwiftPM links an executable's entry point under this name.
    @_cdecl("fuzz_policy_files_main")
    func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
            do {
                try PolicyFilesFuzzing.run(bytes)
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
            exit(FuzzReplay.main("fuzz-policy-files", Array(CommandLine.arguments.dropFirst()), PolicyFilesFuzzing.run))
        }
    }
#endif
