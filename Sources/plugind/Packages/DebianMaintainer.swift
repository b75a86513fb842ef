/// The Maintainer of a plugin's Debian package, `Name <address>`: from `--maintainer`, else from
/// DEBEMAIL and DEBFULLNAME as Debian's own tools (dch, dh_make) read them. It goes into the
/// control file, the changelog's trailer and the copyright file, so it is checked as lintian
/// checks it (a name, one address on a host with a dot, nobody called root) and as the control
/// file needs it (one line, no characters that would end or quote the field).
struct DebianMaintainer: Equatable, CustomStringConvertible {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The name, its runs of spaces made one (the changelog's trailer ends it at two spaces).
    var name: String
    var address: String

    /// `Name <address>`, as the Maintainer field has it.
    var description: String { "\(name) <\(address)>" }

    /// The example every refusal gives.
    static let example = "Tools Team <tools@example.com>"

    /// Characters a name cannot hold: they would end, quote or split the contact (RFC 5322's
    /// specials), which lintian reads as a malformed contact or as several.
    private static let nameSpecials: Set<Unicode.Scalar> = ["<", ">", "\"", "(", ")", ",", ";", ":", "@", "[", "]", "\\"]
    /// What a local part may hold besides letters and digits (RFC 5322's atext), and '.' between them.
    private static let localSpecials: Set<Unicode.Scalar> = [
        "!", "#", "$", "%", "&", "'", "*", "+", "/", "=", "?", "^", "_", "`", "{", "|", "}", "~", "-",
    ]

    /// Reads `Name <address>`; throws naming what is wrong and what to write instead.
    static func parse(_ text: String) throws(Failure) -> DebianMaintainer {
        func refuse(_ problem: String) -> Failure {
            Failure(description: "the maintainer '\(text)' \(problem); give a name and an address, e.g. '\(example)'")
        }
        guard text.utf8.count <= 256 else { throw refuse("is longer than 256 bytes") }
        if let scalar = text.unicodeScalars.first(where: isControl) {
            throw refuse("holds the control character U+\(String(scalar.value, radix: 16, uppercase: true))")
        }
        let trimmed = text.trimmingSpaces
        guard trimmed.hasSuffix(">"), let open = trimmed.lastIndex(of: "<") else {
            throw refuse("has no address in angle brackets")
        }
        let name = trimmed[..<open].split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        let address = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
        guard !name.isEmpty else { throw refuse("has no name before the address") }
        if let special = name.unicodeScalars.first(where: nameSpecials.contains) {
            throw refuse("has '\(special)' in its name, which would end or split the field")
        }
        guard name.lowercased() != "root" else { throw refuse("is root, which lintian refuses as a maintainer") }
        try checkAddress(address, refuse: refuse)
        return DebianMaintainer(name: name, address: address)
    }

    /// The maintainer DEBEMAIL and DEBFULLNAME give (`environment` reads a variable): DEBEMAIL
    /// `Name <address>`, or DEBEMAIL an address and DEBFULLNAME the name; nil when DEBEMAIL is unset.
    static func fromEnvironment(_ environment: (String) -> String?) throws(Failure) -> DebianMaintainer? {
        guard let mail = environment("DEBEMAIL")?.trimmingSpaces, !mail.isEmpty else { return nil }
        let fullName = environment("DEBFULLNAME")?.trimmingSpaces ?? ""
        guard mail.contains("<") || !fullName.isEmpty else {
            throw Failure(
                description:
                    "DEBEMAIL is the address '\(mail)' and DEBFULLNAME, the name, is not set: set it, or pass --maintainer '\(example)'")
        }
        let text = mail.contains("<") ? mail : "\(fullName) <\(mail)>"
        do {
            return try parse(text)
        } catch {
            throw Failure(description: "DEBEMAIL and DEBFULLNAME: \(error.description)")
        }
    }

    private static func checkAddress(_ address: String, refuse: (String) -> Failure) throws(Failure) {
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw refuse("has '\(address)' as its address, which is not local-part@host")
        }
        let local = parts[0]
        let localAllowed = local.unicodeScalars.allSatisfy { $0.isASCIIAlphanumeric || localSpecials.contains($0) || $0 == "." }
        guard localAllowed, !local.hasPrefix("."), !local.hasSuffix("."), !local.contains("..") else {
            throw refuse("has '\(local)' before the '@', which is not a plain local part")
        }
        guard local.lowercased() != "root" else { throw refuse("is root's address, which lintian refuses as a maintainer") }
        let host = parts[1]
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let wellFormed =
            host.utf8.count <= 253
            && labels.allSatisfy { label in
                (1...63).contains(label.utf8.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.unicodeScalars.allSatisfy { $0.isASCIIAlphanumeric || $0 == "-" }
            }
        guard wellFormed, labels.count >= 2, labels.last?.unicodeScalars.first?.isASCIILetter == true else {
            throw refuse("has '\(host)' after the '@', which is not a host name with a domain (lintian's bogus-mail-host)")
        }
    }

    /// C0 and C1 controls, line and paragraph separators, and format characters (bidirectional
    /// overrides among them): nothing a name or an address needs, and each could change what a
    /// reader of the field sees.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    fileprivate var isASCIIAlphanumeric: Bool { isASCIILetter || ("0"..."9").contains(self) }
}

extension StringProtocol {
    /// Without the spaces (and tabs) at either end.
    var trimmingSpaces: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
