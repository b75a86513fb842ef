/// Text from a source plugind does not trust (a manifest, a plugin's log line or error message, a
/// file name), made inert for a terminal: control characters, ANSI escape sequences and
/// characters that are invisible or change the direction of text are shown as escapes, so that
/// the text can neither move the cursor, hide what follows it, nor look like something else.
/// `\` itself is doubled, so that an escape in the output always means an escaped character.
package enum InertText {
    /// `text` with every unsafe character escaped: `\e` for ESC, `\n`, `\r`, `\t`, `\\`, and
    /// `\u{…}` for any other control, invisible or direction-changing character.
    package static func escape(_ text: String) -> String {
        escape(text, where: needsEscape)
    }

    /// Like `escape`, but line breaks, tabs and backslashes stay as they are: for text plugind
    /// formatted itself, as a last line of defence at the terminal (a value from outside that
    /// could hold a line break is escaped with `escape` where it is put into the text).
    package static func escapeKeepingLines(_ text: String) -> String {
        escape(text) { scalar in scalar != "\n" && scalar != "\t" && scalar != "\\" && needsEscape(scalar) }
    }

    private static func escape(_ text: String, where unsafe: (Unicode.Scalar) -> Bool) -> String {
        // The common case, plain printable text, costs one pass and no copy.
        guard text.unicodeScalars.contains(where: unsafe) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard unsafe(scalar) else {
                result.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\u{1B}": result += "\\e"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\\": result += "\\\\"
            default: result += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value < 0x20 || value == 0x7F || (0x80...0x9F).contains(value) || value == 0x5C || isHidden(scalar)
    }

    /// What a JSON encoder leaves raw although a terminal acts on it: DEL, the C1 controls (U+009B
    /// starts an escape sequence on many terminals, U+0085 breaks the line) and the hidden
    /// characters below. Together with the C0 controls every encoder escapes, the set `escape`
    /// escapes.
    package static func needsJSONEscape(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value == 0x7F || (0x80...0x9F).contains(value) || isHidden(scalar)
    }

    /// Characters that print nothing visible or reorder the text around them: bidirectional
    /// embeddings, overrides, isolates and marks, zero-width characters, line and paragraph
    /// separators.
    package static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200B...0x200F, 0x2028...0x202E, 0x2060...0x2069, 0xFEFF: true
        default: false
        }
    }
}
