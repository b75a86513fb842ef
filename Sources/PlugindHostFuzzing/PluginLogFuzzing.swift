import Foundation
import PlugindEngine
import PlugindFuzzing
import PlugindSystem

/// The body of the plugin-log fuzz target, shared with the test that replays its corpus: what
/// `plugind logs` reads. The first byte picks the source, the rest is its text. Even: a part of
/// the per-user log file (`plugins.log` or `events.log` by the first byte's second bit, JSON
/// lines), read as `logs` reads it, whole and from an offset the second byte picks (`--follow`).
/// Odd: `journalctl --output=json` lines, as `logs` turns them
/// into entries (anyone who can write to the journal can write `SYSLOG_IDENTIFIER=plugind`). Every
/// input must be read without trapping; only complete lines are taken, and the offset moves past
/// exactly them; an entry read must show inert and with a date, and must go back into the journal
/// or the file as exactly its own fields (no plugin text adds one) and come out the same; a
/// message is cut to `maximumMessageBytes`, saying how much, before it is recorded.
package enum PluginLogFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    /// How hosts write a line of the log file (`JSONEncoder.activityRecords`, internal to
    /// ExtensionFoundation) and how `logs` reads one.
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
    static var decoder: JSONDecoder { JSONDecoder() }

    package static func run(_ input: [UInt8]) throws {
        guard let source = input.first else { return }
        let text = Array(input.dropFirst())
        try checkBounded(String(decoding: text, as: UTF8.self))
        if source % 2 == 0 {
            try checkFile(text, part: source & 2 == 0 ? .pluginOutput : .events, from: input.count > 1 ? Int(input[1]) * 16 : 0)
        } else {
            try checkJournal(text)
        }
    }

    private static func checkFile(_ contents: [UInt8], part: PluginLogFile.Part, from offset: Int) throws {
        let directory = try FuzzScratch.emptyDirectory()
        let file = PluginLogFile(directory: directory)
        let path = file.path(of: part)
        try FuzzScratch.write(contents, to: path)
        // Inputs are far below what one read takes (`readLimit`): every complete line is read.
        for start in [0, offset] {
            let (lines, end) = file.lines(of: path, from: start)
            let complete = contents.count > start ? contents[start...].lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? start : start
            guard end == max(start, complete) else {
                throw InvariantViolation(description: "reading from \(start) of \(contents.count) bytes ends at \(end), not \(complete)")
            }
            guard lines.allSatisfy({ !$0.isEmpty && !$0.contains(UInt8(ascii: "\n")) }) else {
                throw InvariantViolation(description: "a line read holds a line break or nothing")
            }
        }
        let entries = file.entries()
        guard entries.count <= contents.count / 2 + 1 else {
            throw InvariantViolation(description: "\(entries.count) entries in \(contents.count) bytes")
        }
        for entry in entries { try checkEntry(entry) }
    }

    private static func checkJournal(_ contents: [UInt8]) throws {
        for line in contents.split(separator: UInt8(ascii: "\n")) {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
                let entry = PluginLogEntry(journalObject: object)
            else { continue }
            try checkEntry(entry)
        }
    }

    /// What `logs` shows of `entry` (a date, the plugin's strings inert), and what recording it
    /// again makes of it.
    private static func checkEntry(_ entry: PluginLogEntry) throws {
        let stamp = formatter.string(from: Date(timeIntervalSince1970: Double(entry.time) / 1_000_000))
        guard !stamp.isEmpty else { throw InvariantViolation(description: "no date for \(entry.time)") }
        for text in [entry.plugin, entry.message, entry.level ?? "", entry.hostIdentifier ?? "", entry.hostExecutable ?? ""] {
            try HostFuzzChecks.expectInert(InertText.escape(text), "a log entry's text")
        }
        try HostFuzzChecks.expectRecordable(entry)
        var bounded = entry
        bounded.message = PluginLogEntry.bounded(entry.message)
        try HostFuzzChecks.expectRecordable(bounded)
    }

    /// `PluginLogEntry.bounded`: at most `maximumMessageBytes` of the message, a prefix of it, and
    /// a note of what was cut.
    private static func checkBounded(_ message: String) throws {
        let bounded = PluginLogEntry.bounded(message)
        if message.utf8.count <= PluginLogEntry.maximumMessageBytes {
            guard bounded == message else { throw InvariantViolation(description: "a short message was changed") }
            return
        }
        // By bytes: the note's space may join the last character kept into one.
        let bytes = Array(bounded.utf8)
        let note = Array(" [… ".utf8)
        guard
            let at = stride(from: bytes.count - note.count, through: 0, by: -1).first(where: {
                bytes[$0..<$0 + note.count].elementsEqual(note)
            })
        else {
            throw InvariantViolation(description: "a long message was cut without saying so")
        }
        guard at <= PluginLogEntry.maximumMessageBytes, message.utf8.starts(with: bytes[..<at]),
            bytes.count <= PluginLogEntry.maximumMessageBytes + 64
        else {
            throw InvariantViolation(description: "a message of \(message.utf8.count) bytes was cut to \(bounded.utf8.count)")
        }
    }

    /// `logs`'s own (its time stamps).
    private static let formatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        return formatter
    }()
}
