import Foundation

/// Text for roff, the language of manual pages: what a line of plain text must become so that
/// `man` shows it as written.
enum Roff {
    /// Escapes backslashes, and a leading `.` or `'` that would read as a request; hyphens become
    /// `\-` so that options copy and paste as typed.
    static func escape(_ text: String) -> String {
        var escaped = text.map(character).joined()
        if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = "\\&" + escaped }
        return escaped
    }

    /// One character as roff writes it: the few with a meaning escaped, and everything beyond
    /// ASCII as a named glyph (`\(en`) or by its code point (`\[u2026]`), so that the page shows
    /// the same in a terminal without a UTF-8 locale.
    static func character(_ character: Character) -> String {
        switch character {
        case "\\": return "\\e"
        case "-": return "\\-"
        case "–": return "\\(en"
        case "—": return "\\(em"
        case "…": return "..."
        case "‘": return "\\(oq"
        case "’": return "\\(cq"
        case "“": return "\\(lq"
        case "”": return "\\(rq"
        case "×": return "\\(mu"
        case "→": return "\\(->"
        case "≤": return "\\(<="
        case "≥": return "\\(>="
        default:
            guard !character.isASCII else { return String(character) }
            return character.unicodeScalars.map { scalar in
                let hex = String(scalar.value, radix: 16, uppercase: true)
                return "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }.joined()
        }
    }

    /// A paragraph that was wrapped for the terminal: its lines joined, so that `man` fills it to
    /// the reader's width.
    static func paragraph(_ text: String) -> String {
        escape(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " "))
    }

    /// `.TH`: the page's title line.
    static func title(_ name: String, section: Int, version: String) -> String {
        ".TH \"\(name.uppercased())\" \"\(section)\" \"\" \"plugind \(version)\" \"plugind manual\"\n"
    }

    /// Labelled rows (an option and its meaning) as tagged paragraphs.
    static func rows(_ rows: [(String, String)]) -> String {
        rows.map { label, meaning in ".TP\n.B \(escape(label))\n\(escape(meaning))\n" }.joined()
    }
}
