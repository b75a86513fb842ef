import Foundation

/// A plugin's licence as `pack --format deb --license` takes it, an SPDX licence expression
/// (`Apache-2.0`, `GPL-3.0-or-later`, `MIT OR Apache-2.0`, `LicenseRef-Example-Proprietary`), and
/// as the package's machine-readable copyright file (DEP-5) writes it: licences Debian ships in
/// /usr/share/common-licenses under Debian's short names and pointing there, as lintian requires
/// for the GPL family and Apache-2.0; any other with the address of its SPDX text.
struct DebianLicense: Equatable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A licence Debian ships in /usr/share/common-licenses.
    struct CommonLicense: Equatable {
        /// DEP-5's short name, e.g. GPL-3+.
        var shortName: String
        /// The file in /usr/share/common-licenses.
        var file: String
        /// Its title, e.g. "the GNU General Public License, version 3".
        var title: String
        var orLater: Bool
    }

    /// The expression as given.
    var expression: String
    /// The licences it names, each once, in order (exceptions left out).
    var identifiers: [String]
    /// The exceptions it names (after WITH).
    var exceptions: [String]

    /// Every SPDX identifier of a licence in Debian's /usr/share/common-licenses (base-files),
    /// the deprecated spellings too.
    static let common: [String: CommonLicense] = {
        var table: [String: CommonLicense] = [:]
        func add(_ identifiers: [String], _ shortName: String, _ file: String, _ title: String, orLater: Bool = false) {
            for identifier in identifiers {
                table[identifier] = CommonLicense(shortName: shortName, file: file, title: title, orLater: orLater)
            }
        }
        add(["Apache-2.0"], "Apache-2.0", "Apache-2.0", "the Apache License, Version 2.0")
        add(["Artistic-1.0-Perl"], "Artistic", "Artistic", "the Artistic License (Perl's)")
        add(["CC0-1.0"], "CC0-1.0", "CC0-1.0", "the Creative Commons CC0 1.0 Universal public domain dedication")
        add(["MPL-1.1"], "MPL-1.1", "MPL-1.1", "the Mozilla Public License, version 1.1")
        add(["MPL-2.0"], "MPL-2.0", "MPL-2.0", "the Mozilla Public License, version 2.0")
        for (spdx, debian, title) in [
            ("GPL-1.0", "GPL-1", "the GNU General Public License, version 1"),
            ("GPL-2.0", "GPL-2", "the GNU General Public License, version 2"),
            ("GPL-3.0", "GPL-3", "the GNU General Public License, version 3"),
            ("LGPL-2.0", "LGPL-2", "the GNU Library General Public License, version 2"),
            ("LGPL-2.1", "LGPL-2.1", "the GNU Lesser General Public License, version 2.1"),
            ("LGPL-3.0", "LGPL-3", "the GNU Lesser General Public License, version 3"),
            ("GFDL-1.2", "GFDL-1.2", "the GNU Free Documentation License, version 1.2"),
            ("GFDL-1.3", "GFDL-1.3", "the GNU Free Documentation License, version 1.3"),
        ] {
            add([spdx, spdx + "-only"], debian, debian, title)
            add([spdx + "+", spdx + "-or-later"], debian + "+", debian, title, orLater: true)
        }
        return table
    }()

    /// Reads an SPDX licence expression: licence identifiers (`LicenseRef-…` for one of the
    /// publisher's own) joined by AND and OR, an exception after WITH, parentheses; one line.
    init(spdx text: String) throws(Failure) {
        func refuse(_ problem: String) -> Failure {
            Failure(
                description:
                    "the licence '\(text)' \(problem); give an SPDX licence expression such as Apache-2.0, GPL-3.0-or-later, 'MIT OR Apache-2.0' or LicenseRef-<name> for your own terms"
            )
        }
        guard (1...256).contains(text.utf8.count) else { throw refuse("is empty or longer than 256 bytes") }
        var tokens: [String] = []
        var word = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case " ", "(", ")":
                if !word.isEmpty { tokens.append(word) }
                word = ""
                if scalar != " " { tokens.append(String(scalar)) }
            case "a"..."z", "A"..."Z", "0"..."9", ".", "-", "+", ":":
                word.unicodeScalars.append(scalar)
            default:
                throw refuse("holds '\(scalar.escaped(asASCII: true))', which no licence identifier has")
            }
        }
        if !word.isEmpty { tokens.append(word) }
        var parser = Parser(tokens: tokens)
        do throws(Parser.Problem) {
            try parser.expression()
            guard parser.position == tokens.count else {
                throw Parser.Problem(message: "has '\(tokens[parser.position])' where it should end")
            }
        } catch {
            throw refuse(error.message)
        }
        expression = tokens.joined(separator: " ").replacingOccurrences(of: "( ", with: "(").replacingOccurrences(of: " )", with: ")")
        identifiers = parser.licences.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
        exceptions = parser.exceptions.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    /// The expression in DEP-5's spelling: Debian's short names for common licences, and, or
    /// and with in lower case.
    var shortName: String {
        expression.split(separator: " ", omittingEmptySubsequences: true).map { token -> String in
            var token = String(token)
            let opening = token.prefix { $0 == "(" }
            let closing = token.reversed().prefix { $0 == ")" }
            token = String(token.dropFirst(opening.count).dropLast(closing.count))
            switch token {
            case "AND", "OR", "WITH": token = token.lowercased()
            default: token = Self.common[token]?.shortName ?? token
            }
            return opening + token + String(closing)
        }.joined(separator: " ")
    }

    /// The text of the stand-alone License paragraph of `identifier` (lines without the leading
    /// space); `licenceFiles` are the bundle's own licence texts as installed.
    static func paragraph(for identifier: String, licenceFiles: [String]) -> String {
        var text: String
        if let common = common[identifier] {
            let terms = common.orLater ? "\(common.title), or (at your option) any later version" : common.title
            text =
                "The plugin may be used and passed on under the terms of \(terms). On Debian systems, the full text of \(common.title) is in /usr/share/common-licenses/\(common.file)."
        } else if identifier.hasPrefix("LicenseRef-") || identifier.hasPrefix("DocumentRef-") {
            text = "The publisher's own terms, which they name \(identifier); ask them (Upstream-Contact) for the text."
        } else {
            text = "The text of this licence is at https://spdx.org/licenses/\(identifier).html."
        }
        if !licenceFiles.isEmpty, common[identifier] == nil {
            text += " The plugin's own licence text is installed with it: \(licenceFiles.joined(separator: ", "))."
        }
        return text
    }

    /// Recursive descent over the tokens: expression = term ((AND | OR) term)*; term = '('
    /// expression ')' | identifier [WITH identifier].
    private struct Parser {
        struct Problem: Error {
            var message: String
        }

        let tokens: [String]
        var position = 0
        var licences: [String] = []
        var exceptions: [String] = []
        var depth = 0

        init(tokens: [String]) { self.tokens = tokens }

        mutating func expression() throws(Problem) {
            try term()
            while position < tokens.count, tokens[position] == "AND" || tokens[position] == "OR" {
                position += 1
                try term()
            }
        }

        mutating func term() throws(Problem) {
            guard position < tokens.count else { throw Problem(message: "ends where a licence should follow") }
            let token = tokens[position]
            position += 1
            if token == "(" {
                depth += 1
                guard depth <= 16 else { throw Problem(message: "nests parentheses more than 16 deep") }
                try expression()
                guard position < tokens.count, tokens[position] == ")" else { throw Problem(message: "has a '(' that is not closed") }
                position += 1
                depth -= 1
                return
            }
            try licences.append(Self.identifier(token))
            if position < tokens.count, tokens[position] == "WITH" {
                position += 1
                guard position < tokens.count else { throw Problem(message: "ends where an exception should follow WITH") }
                try exceptions.append(Self.identifier(tokens[position]))
                position += 1
            }
        }

        static func identifier(_ token: String) throws(Problem) -> String {
            let operators: Set<String> = ["AND", "OR", "WITH", "(", ")", "and", "or", "with"]
            guard !operators.contains(token) else {
                throw Problem(message: "has '\(token)' where a licence should be (operators are AND, OR and WITH)")
            }
            guard let first = token.unicodeScalars.first,
                ("a"..."z").contains(first) || ("A"..."Z").contains(first) || ("0"..."9").contains(first)
            else { throw Problem(message: "has '\(token)', which is not a licence identifier") }
            return token
        }
    }
}
