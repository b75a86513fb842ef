import Foundation
import PlugindEngine
import PlugindFuzzing
import PlugindSystem

/// The body of the activity-record fuzz target, shared with the test that replays its corpus: a
/// plugin's record under `<state>/activity` (its last launch, how many, the requests its workers
/// answered and failed), which hosts of the user rewrite and `plugind info` shows. The bytes are
/// the file. It must be read or ignored without trapping, and a record read must show as `info`
/// shows it. What a host adds to a record when a worker ends is private to ExtensionFoundation
/// (its counts saturate); this target reaches the reading only.
package enum ActivityRecordFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    static let plugin = "org.plugind.fuzz"

    package static func run(_ input: [UInt8]) throws {
        // Foundation's `FileManager.contents(atPath:)`, which the reader uses, leaks 4 KiB for
        // every empty file it reads (LeakSanitizer stops the fuzzer at once on it): not plugind's
        // to find again, so an empty file is not fed.
        guard !input.isEmpty else { return }
        let directory = try FuzzScratch.emptyDirectory()
        try FuzzScratch.write(input, to: directory + "/" + plugin + ".json")
        let store = PluginActivityStore(directory: directory)
        guard let record = store.record(of: plugin) else { return }
        // Another plugin's name, and one that is a path, find nothing.
        guard store.record(of: "org.plugind.other") == nil, store.record(of: "../" + plugin) == nil else {
            throw InvariantViolation(description: "a record was found under a name that is not the plugin's")
        }
        let time = ISO8601DateFormatter()
        let shown =
            "launched \(record.lastLaunch.map { time.string(from: $0) } ?? "never") (\(record.launches) launch(es)); "
            + "\(record.requestsAnswered) request(s) answered, \(record.requestsFailed) failed"
            + (record.lastEnd.map { "; last worker ended \(time.string(from: $0))" } ?? "")
        try HostFuzzChecks.expectInert(shown, "an activity record")
    }
}
