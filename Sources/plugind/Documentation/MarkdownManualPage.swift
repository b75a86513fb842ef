import Foundation

/// A manual page from one of the repository's Markdown documents (`plugind-manifest(5)` from
/// Documentation/ManifestReference.md), so that the reference is written once. Understands what
/// those documents use: headings, paragraphs, fenced code, lists, tables, `code`, **bold** and
/// links (shown as their text).
enum MarkdownManualPage {
    static func page(_ markdown: String, name: String, section: Int, summary: String, version: String) -> String {
        var page = Roff.title(name, section: section, version: version)
        page += ".SH NAME\n\(Roff.escape(name)) \\- \(Roff.escape(summary))\n"
        var paragraph: [String] = []
        var inCode = false
        func flush() {
            if !paragraph.isEmpty { page += ".PP\n" + inline(paragraph.joined(separator: " ")) + "\n" }
            paragraph = []
        }
        for rawLine in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(rawLine)
            if line.hasPrefix("```") {
                flush()
                page += inCode ? ".fi\n.RE\n" : ".PP\n.RS 4\n.nf\n"
                inCode.toggle()
                continue
            }
            if inCode {
                page += "\\&" + Roff.escape(line) + "\n"
                continue
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty {
                flush()
            } else if line.hasPrefix("# ") {
                flush()
                page += ".SH DESCRIPTION\n.PP\n" + inline(String(line.dropFirst(2))) + "\n"
            } else if line.hasPrefix("## ") || line.hasPrefix("### ") {
                flush()
                let level = line.hasPrefix("## ") ? ".SH" : ".SS"
                page +=
                    "\(level) \"" + inline(String(line.drop { $0 == "#" }.dropFirst())).replacingOccurrences(of: "\"", with: "\\(dq")
                    + "\"\n"
            } else if trimmed.hasPrefix("|") {
                flush()
                page += tableRow(trimmed)
            } else if trimmed.hasPrefix("- ") || trimmed.hasPrefix("* ") {
                flush()
                page += ".IP \\(bu 2\n" + inline(String(trimmed.dropFirst(2))) + "\n"
            } else if let first = trimmed.first, first.isNumber, let dot = trimmed.firstIndex(of: "."),
                trimmed[..<dot].allSatisfy(\.isNumber), trimmed[trimmed.index(after: dot)...].hasPrefix(" ")
            {
                flush()
                page += ".IP \(trimmed[..<dot]). 4\n" + inline(String(trimmed[trimmed.index(dot, offsetBy: 2)...])) + "\n"
            } else {
                paragraph.append(trimmed)
            }
        }
        flush()
        return page
    }

    /// A table row as a tagged paragraph: the first cell the tag, the others its text. The
    /// header's separator row (`|---|`) is dropped.
    private static func tableRow(_ line: String) -> String {
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = cells.first, !cells.allSatisfy({ $0.allSatisfy { $0 == "-" || $0 == ":" } }) else { return "" }
        return ".TP\n" + inline(first) + "\n" + cells.dropFirst().map(inline).joined(separator: "; ") + "\n"
    }

    /// Inline Markdown: `code` and **bold** in bold, links as their text.
    static func inline(_ text: String) -> String {
        var result = ""
        var bold = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if character == "`" || text[index...].hasPrefix("**") {
                result += bold ? "\\fR" : "\\fB"
                bold.toggle()
                index = text.index(index, offsetBy: character == "`" ? 1 : 2)
                continue
            }
            if character == "[", let close = text[index...].firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix("("),
                let end = text[close...].firstIndex(of: ")")
            {
                result += Roff.escape(String(text[text.index(after: index)..<close]))
                index = text.index(after: end)
                continue
            }
            result += Roff.character(character)
            index = text.index(after: index)
        }
        if bold { result += "\\fR" }
        return result.hasPrefix(".") || result.hasPrefix("'") ? "\\&" + result : result
    }
}

/// The manual pages of section 5, each written from a Markdown reference of the repository
/// (`plugind help --man NAME FILE`, run by Scripts/stage.sh).
enum ReferencePage {
    struct Page {
        var name: String
        var summary: String
        var source: String
    }

    static let all: [String: Page] = [
        "manifest": Page(
            name: "plugind-manifest", summary: "the manifest.json of a plugind plugin bundle", source: "Documentation/ManifestReference.md"),
        "policy": Page(
            name: "plugind-policy", summary: "plugind's policy files, policy.json and rules.json", source: "Documentation/PolicyFiles.md"),
    ]
}
