import Foundation
import PlugindEngine
import PlugindSystem

/// Checks the host-side fuzz targets share.
enum HostFuzzChecks {
    struct InvariantViolation: Error, CustomStringConvertible {
        var description: String
    }

    /// `text`, as it reaches a terminal, holds nothing a terminal acts on: no control character
    /// (C0, DEL, C1) and nothing hidden or direction-changing.
    static func expectInert(_ text: String, _ what: String) throws {
        if let scalar = text.unicodeScalars.first(where: { $0.value < 0x20 || InertText.needsJSONEscape($0) }) {
            throw InvariantViolation(
                description: "\(what) reaches the terminal with U+\(String(scalar.value, radix: 16)): \(text.debugDescription)")
        }
    }

    /// The fields of a datagram of the journal's native protocol, as journald parses it: `NAME=value`
    /// lines, or the name, a line break, a 64-bit little-endian length, the bytes and a line break.
    static func journalFields(of datagram: [UInt8]) throws -> [(String, String)] {
        var fields: [(String, String)] = []
        var offset = 0
        while offset < datagram.count {
            guard let end = datagram[offset...].firstIndex(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "=") }) else {
                throw InvariantViolation(description: "a journal datagram ends inside a field name")
            }
            let name = String(decoding: datagram[offset..<end], as: UTF8.self)
            if datagram[end] == UInt8(ascii: "=") {
                let valueEnd = datagram[(end + 1)...].firstIndex(of: UInt8(ascii: "\n")) ?? datagram.count
                fields.append((name, String(decoding: datagram[(end + 1)..<valueEnd], as: UTF8.self)))
                offset = valueEnd + 1
            } else {
                guard end + 9 <= datagram.count else { throw InvariantViolation(description: "a journal datagram's length is cut") }
                let length = datagram[(end + 1)..<(end + 9)].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let start = end + 9
                guard length <= UInt64(datagram.count - start), start + Int(length) < datagram.count,
                    datagram[start + Int(length)] == UInt8(ascii: "\n")
                else {
                    throw InvariantViolation(description: "a journal datagram's binary field of \(length) bytes does not fit")
                }
                fields.append((name, String(decoding: datagram[start..<(start + Int(length))], as: UTF8.self)))
                offset = start + Int(length) + 1
            }
        }
        return fields
    }

    /// What `entry` becomes in the journal and in the log file, and back: its datagram holds
    /// exactly its fields (no text of a plugin adds or changes one), and its line of the log file
    /// is one line that reads back as the entry.
    static func expectRecordable(_ entry: PluginLogEntry) throws {
        let fields = try journalFields(of: entry.journalDatagram)
        let expected = entry.journalFields
        guard fields.count == expected.count, zip(fields, expected).allSatisfy({ $0.0 == $1.0 && $0.1 == $1.1 }) else {
            throw InvariantViolation(description: "the journal would read \(fields) for the fields \(expected)")
        }
        let line = try PluginLogFuzzing.encoder.encode(entry)
        guard !line.contains(UInt8(ascii: "\n")) else {
            throw InvariantViolation(description: "an entry takes more than one line of the log file: \(entry)")
        }
        let reread = try PluginLogFuzzing.decoder.decode(PluginLogEntry.self, from: line)
        guard reread == entry else { throw InvariantViolation(description: "the log file's line of \(entry) reads back as \(reread)") }
    }
}
