import Foundation
import PlugindBundle

/// Reads, from a Swift extension's sources, the capabilities its binding states:
///
///     Implementing {              // or Capabilities { … }
///         Supports("text/plain")  // a name stated in place
///         Markdown()              // a type of the extension's own, whose id is a literal
///     }
///
/// without compiling or running them. A capability whose identifier only running code could
/// tell (an `id` computed from other values, a type that takes arguments) is an error naming it,
/// so that the manifest never says less, or more, than the code.
struct CapabilityReader {
    private let files: [(file: String, text: String)]

    /// `files`: each Swift file's text with its comment lines removed.
    init(_ files: [(file: String, text: String)]) {
        self.files = files
    }

    func statedCapabilities() throws(CodeBinding.Failure) -> [String] {
        let blocks = files.flatMap { file in Self.blocks(in: file.text).map { (file.file, $0) } }
        guard let (file, block) = blocks.first else { return [] }
        guard blocks.count == 1 else {
            let places = blocks.map(\.0).joined(separator: ", ")
            throw CodeBinding.Failure(description: "the code states capabilities more than once (in \(places)); an extension binds once")
        }
        let declared = declaredIdentifiers()
        var capabilities: [String] = []
        for element in Self.elements(of: block) {
            let identifier: String
            switch element {
            case .named(let name):
                identifier = name
            case .instance(let type):
                guard let known = declared[type] else {
                    throw CodeBinding.Failure(
                        description:
                            "\(file): cannot tell the identifier of the capability \(type)() without running code; give \(type) a literal id (var id: String { \"…\" }) or write Supports(\"…\")"
                    )
                }
                identifier = known
            case .unreadable(let text):
                throw CodeBinding.Failure(
                    description:
                        "\(file): cannot read the capability '\(text)' without running code; write Supports(\"…\") or a type of yours with a literal id"
                )
            }
            guard ManifestParser.isCapabilityIdentifier(identifier) else {
                throw CodeBinding.Failure(
                    description:
                        "\(file): '\(identifier)' is not a capability identifier (printable ASCII without spaces, quotes or backslashes)")
            }
            guard !capabilities.contains(identifier) else {
                throw CodeBinding.Failure(description: "\(file): the capability '\(identifier)' is stated twice")
            }
            capabilities.append(identifier)
        }
        return capabilities
    }

    // MARK: The Implementing block

    enum Element: Equatable {
        /// `Supports("…")`.
        case named(String)
        /// `SomeType()`.
        case instance(String)
        /// Anything else.
        case unreadable(String)
    }

    /// The bodies of `Implementing { … }` / `Capabilities { … }` (with or without their
    /// `AppExtension.` / `AppExtensionPoint.` prefix).
    static func blocks(in code: String) -> [Substring] {
        let opening = try! NSRegularExpression(
            pattern: #"(?<![\w.])(?:AppExtensionPoint\.|AppExtension\.)?(?:Implementing|Capabilities)\s*\{"#)
        return opening.matches(in: code, range: NSRange(code.startIndex..., in: code)).compactMap { match in
            guard let range = Range(match.range, in: code) else { return nil }
            return body(in: code, openingBraceBefore: range.upperBound)
        }
    }

    /// The text up to the brace that closes the one just before `start`.
    private static func body(in code: String, openingBraceBefore start: String.Index) -> Substring? {
        var depth = 1
        var index = start
        while index < code.endIndex {
            switch code[index] {
            case "{": depth += 1
            case "}":
                depth -= 1
                if depth == 0 { return code[start..<index] }
            default: break
            }
            index = code.index(after: index)
        }
        return nil
    }

    /// The statements of a block: one per line or per `;`.
    static func elements(of block: Substring) -> [Element] {
        let named = try! NSRegularExpression(pattern: #"^(?:AppExtensionPoint\.)?Supports\(\s*"([^"\\]*)"\s*\)$"#)
        let instance = try! NSRegularExpression(pattern: #"^([A-Z]\w*)\(\s*\)$"#)
        return block.split(whereSeparator: { $0 == "\n" || $0 == ";" }).compactMap { raw in
            let statement = raw.trimmingCharacters(in: .whitespaces)
            guard !statement.isEmpty else { return nil }
            let range = NSRange(statement.startIndex..., in: statement)
            func group(_ match: NSTextCheckingResult) -> String {
                Range(match.range(at: 1), in: statement).map { String(statement[$0]) } ?? ""
            }
            if let match = named.firstMatch(in: statement, range: range) { return .named(group(match)) }
            if let match = instance.firstMatch(in: statement, range: range) { return .instance(group(match)) }
            return .unreadable(statement)
        }
    }

    // MARK: Capability types

    /// Types conforming to `Capability` whose `id` is a literal: `let id = "…"`,
    /// `var id: String { "…" }` (or `{ return "…" }`), `static let`-free forms only.
    func declaredIdentifiers() -> [String: String] {
        let declaration = try! NSRegularExpression(
            pattern: #"(?:struct|enum|class)\s+([A-Z]\w*)\s*:\s*[^{]*\bCapability\b[^{]*\{"#)
        let identifier = try! NSRegularExpression(
            pattern: #"(?:let|var)\s+id\s*(?::\s*String\s*)?(?:=\s*|\{\s*(?:return\s+)?)"([^"\\]*)""#)
        var found: [String: String] = [:]
        for (_, code) in files {
            for match in declaration.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                guard let name = Range(match.range(at: 1), in: code).map({ String(code[$0]) }),
                    let whole = Range(match.range, in: code),
                    let body = Self.body(in: code, openingBraceBefore: whole.upperBound)
                else { continue }
                let text = String(body)
                if let id = identifier.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
                    let value = Range(id.range(at: 1), in: text)
                {
                    found[name] = String(text[value])
                }
            }
        }
        return found
    }
}
