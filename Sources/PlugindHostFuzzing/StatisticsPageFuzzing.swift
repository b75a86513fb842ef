import Foundation
package import PlugindEngine
import PlugindFuzzing
import PlugindSystem

/// The body of the statistics-page fuzz target, shared with the tests that replay its corpus: the
/// page a host publishes for each running worker, which `plugind top` reads from this user's
/// runtime directory and, run by root, from every user's. The bytes are the page's file, read as
/// `top` reads it (`WorkerStatistics.read`: a regular file, no link followed, one bounded
/// `pread`). What is read must be what the page parser makes of the file's first kilobyte; a file
/// whose header is a page's must be read; and the counters `top` shows must come out without
/// trapping, whatever the writer put there: requests ended (answered and failed) and in flight,
/// never more than started. `top`'s table itself (`WorkerTable`, `TopModel`) is in the `plugind`
/// executable, which a fuzz target cannot link: `Tests/CLITests/StatisticsPageCorpusTests.swift`
/// replays this corpus through it.
package enum StatisticsPageFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    /// How much of a page `top` reads.
    static let readBytes = 1024

    package static func run(_ input: [UInt8]) throws {
        let path = try FuzzScratch.emptyDirectory() + "/1-2" + WorkerStatisticsLayout.fileSuffix
        try FuzzScratch.write(input, to: path)
        let read = WorkerStatistics.read(at: path)
        let parsed = WorkerStatistics(page: Array(input.prefix(readBytes)))
        guard read?.statistics == parsed else {
            throw InvariantViolation(
                description: "the file reader read \(String(describing: read)), the page is \(String(describing: parsed))")
        }
        guard let statistics = parsed else {
            if hasPageHeader(input) { throw InvariantViolation(description: "a page with a valid header was not read") }
            return
        }
        try check(statistics)
    }

    /// The counters and texts of a page read back, as `top` computes and shows them.
    package static func check(_ statistics: WorkerStatistics) throws {
        let ended = statistics.requestsEnded
        let inFlight = statistics.requestsInFlight
        let (sum, overflow) = statistics.requestsAnswered.addingReportingOverflow(statistics.requestsFailed)
        guard ended == (overflow ? .max : sum) else {
            throw InvariantViolation(
                description: "ended is \(ended) for \(statistics.requestsAnswered) answered and \(statistics.requestsFailed) failed")
        }
        guard inFlight <= statistics.requestsStarted, inFlight == statistics.requestsStarted.subtractingSaturating(ended) else {
            throw InvariantViolation(description: "in flight is \(inFlight) for \(statistics.requestsStarted) started and \(ended) ended")
        }
        // The numbers survive a write and a read; the texts are cut to their fields, never past.
        guard let again = WorkerStatistics(page: statistics.encoded) else {
            throw InvariantViolation(description: "a page read back does not read once written again: \(statistics)")
        }
        guard again.state == statistics.state, again.hostPID == statistics.hostPID, again.workerPID == statistics.workerPID,
            again.startedNanoseconds == statistics.startedNanoseconds, again.requestsStarted == statistics.requestsStarted,
            again.requestsAnswered == statistics.requestsAnswered, again.requestsFailed == statistics.requestsFailed,
            again.memoryLimit == statistics.memoryLimit
        else {
            throw InvariantViolation(description: "the numbers of \(statistics) came back as \(again)")
        }
        let texts = [statistics.plugin, statistics.pluginVersion, statistics.hostIdentifier, statistics.hostExecutable]
        for text in texts {
            guard !text.utf8.contains(0) else {
                throw InvariantViolation(description: "a text field holds a NUL: \(text.debugDescription)")
            }
            try HostFuzzChecks.expectInert(InertText.escape(text), "a page's text")
        }
        _ = statistics.state.name
    }

    /// Whether `bytes` begin as a page `top` must read: long enough, this magic and layout version,
    /// a known state.
    private static func hasPageHeader(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 896, Array(bytes[0..<8]) == Array("PLGDSTAT".utf8) else { return false }
        func word(at offset: Int) -> UInt32 {
            bytes[offset..<offset + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        return word(at: 8) == 1 && WorkerStatisticsLayout.State(rawValue: word(at: 12)) != nil
    }
}
