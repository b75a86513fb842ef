import Foundation
package import PlugindEngine
import PlugindFuzzing
import PlugindSystem

/// The body of the crash-log fuzz target, shared with the test that replays its corpus: the
/// host's `crashes.json`, which every launch reads (a quarantine), every worker's bad end
/// rewrites, and `plugind crashes` and `info` show. The bytes are the file in a host's state
/// directory, read and then updated as a host does when a worker that the sandbox refused ends
/// (`recordRefusals`, once with one refusal, then with as many as a count holds: a worker's count
/// is the sum of what its frames claim). A log must be read or refused with a `Problem` naming it
/// and saying why; a refused log is never written; a read one must show inert, take the update
/// without trapping, and read back with the plugin's refusals counted and the other plugins kept.
package enum CrashLogFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    static let identifier = "org.plugind.fuzz"

    package static func run(_ input: [UInt8]) throws {
        // Foundation's `FileManager.contents(atPath:)`, which the reader uses, leaks 4 KiB for
        // every empty file it reads (LeakSanitizer stops the fuzzer at once on it): not plugind's
        // to find again, so an empty file is not fed.
        guard !input.isEmpty else { return }
        let scratch = try FuzzScratch.emptyDirectory()
        let state = scratch + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let host = AppExtensionHost(
            identifier: identifier, environment: ["HOME": scratch, "PLUGIND_STATE_DIR": state, "PLUGIND_LOG": "off"])
        let path = state + "/" + CrashLog.fileName
        try FuzzScratch.write(input, to: path)
        let log = CrashLog(host: host)
        switch log.read() {
        case .failure(let problem):
            guard problem.path == path, !problem.reason.isEmpty else {
                throw InvariantViolation(description: "a refusal that does not name the log and why: \(problem)")
            }
            log.recordRefusals(identifier: identifier, count: 1, last: "refused")
            guard FileManager.default.contents(atPath: path).map({ [UInt8]($0) }) == input else {
                throw InvariantViolation(description: "a log that cannot be used (\(problem.reason)) was written")
            }
        case .success(let document):
            try expectShown(document)
            let plugin = document.plugins.keys.sorted().first ?? identifier
            for count in [1, Int.max] {
                log.recordRefusals(identifier: plugin, count: count, last: "\u{1B}[2Jrefused \u{202E}txt.exe")
                guard case .success(let after) = log.read() else {
                    throw InvariantViolation(description: "the log cannot be read once the host added \(count) refusal(s)")
                }
                guard let refusals = after.plugins[plugin]?.refusals, refusals.count >= 1 else {
                    throw InvariantViolation(
                        description: "\(count) refusal(s) added to \(plugin) left \(String(describing: after.plugins[plugin]?.refusals))")
                }
                guard Set(after.plugins.keys) == Set(document.plugins.keys).union([plugin]) else {
                    throw InvariantViolation(description: "adding refusals of \(plugin) changed which plugins the log holds")
                }
                try expectShown(after)
            }
        }
    }

    /// What `plugind crashes` and `plugind info` show of `document`: every string inert, every
    /// date formatted.
    package static func expectShown(_ document: CrashLog.Document) throws {
        let time = ISO8601DateFormatter()
        for (plugin, record) in document.plugins {
            var shown = [InertText.escape(plugin)]
            for crash in record.crashes {
                _ = time.string(from: crash.time)
                shown.append(InertText.escape(crash.reason))
                shown += (crash.backtrace ?? []).map(\.description)
                shown += crash.output.split(separator: "\n", omittingEmptySubsequences: true).map { InertText.escape(String($0)) }
            }
            if let quarantine = record.quarantine {
                _ = time.string(from: quarantine.since)
                shown.append(InertText.escape(quarantine.reason))
            }
            if let refusals = record.refusals {
                _ = time.string(from: refusals.time)
                shown.append("\(refusals.count) call(s): " + InertText.escape(refusals.last))
            }
            for text in shown { try HostFuzzChecks.expectInert(text, "the crash log of \(InertText.escape(plugin))") }
        }
    }
}
