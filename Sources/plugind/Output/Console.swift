import Foundation
import Glibc
import PlugindSystem

/// The terminal: text and bytes to stdout, messages to stderr, and whether each is a terminal.
/// Text never carries a control character other than a line break or a tab, nor an invisible or
/// direction-changing one: values from outside (manifests, plugins, file names) are escaped
/// where they are put into the text (`String.inert`), and whatever slipped through is escaped
/// here.
struct Console {
    var standardErrorIsTerminal: Bool { isatty(2) == 1 }
    var standardInputIsTerminal: Bool { isatty(0) == 1 }

    func out(_ text: String) {
        write(text, to: .standardOutput)
    }

    func err(_ text: String) {
        write(text, to: .standardError)
    }

    func error(_ message: String) {
        err("error: \(message)\n")
    }

    func warning(_ message: String) {
        err("warning: \(message)\n")
    }

    /// Terminal control plugind itself sends (redrawing a progress bar): written as is.
    func errControl(_ sequence: String) {
        try? FileDescriptor.standardError.writeAll(Array(sequence.utf8))
    }

    /// Writes bytes to stdout exactly.
    func outBytes(_ bytes: [UInt8]) throws {
        try FileDescriptor.standardOutput.writeAll(bytes)
    }

    /// Pretty, key-sorted JSON on stdout, one document, with its `formatVersion`.
    func json<Document: JSONDocument>(_ document: Document) throws {
        try writeJSON(VersionedJSON(document: document), formatting: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// Compact JSON on one line, with its `formatVersion` (for streams such as `watch --json`).
    func jsonLine<Document: JSONDocument>(_ document: Document) throws {
        try writeJSON(VersionedJSON(document: document), formatting: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// JSON keeps the data: C0 controls are escaped by the encoder, and what it leaves as it is
    /// although a terminal acts on it (DEL, C1 controls, invisible or direction-changing
    /// characters) is escaped here the JSON way.
    private func writeJSON<Value: Encodable>(_ value: Value, formatting: JSONEncoder.OutputFormatting) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = formatting
        // Times as scripts read them ("2026-12-01T14:30:15Z"), not seconds since 2001.
        encoder.dateEncodingStrategy = .iso8601
        let text = String(decoding: try encoder.encode(value), as: UTF8.self)
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if InertText.needsJSONEscape(scalar) {
                let hex = String(scalar.value, radix: 16)
                escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        try? FileDescriptor.standardOutput.writeAll(Array((escaped + "\n").utf8))
    }

    /// Reads one line from the terminal (for confirmations). Nil at end of input.
    func readLine() -> String? {
        Swift.readLine(strippingNewline: true)
    }

    private func write(_ text: String, to descriptor: FileDescriptor) {
        // Output to a closed pipe ends quietly: plugind ignores SIGPIPE and stops writing.
        try? descriptor.writeAll(Array(InertText.escapeKeepingLines(text).utf8))
    }
}

extension String {
    /// The string from outside shown inert: control characters, escape sequences, line breaks and
    /// direction overrides escaped (`InertText`).
    var inert: String { InertText.escape(self) }
}
