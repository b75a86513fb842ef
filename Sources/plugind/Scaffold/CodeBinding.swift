import Foundation
import PlugindBundle

/// The extension point a Swift package's code binds to (`@AppExtensionPoint.Bind` with an
/// `AppExtensionPoint.Identifier`) and the capabilities it implements (`Implementing { … }`),
/// carried into its manifest and into a C file that records them in the library as an ELF note,
/// where `plugind verify` reads them without running code.
struct CodeBinding: Equatable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    var extensionPoint: String
    var capabilities: [String] = []

    /// "the point", or "the point, implementing a, b".
    var summary: String {
        capabilities.isEmpty ? extensionPoint : "\(extensionPoint), implementing \(capabilities.joined(separator: ", "))"
    }

    /// Finds the one binding in the Swift files under `directory`. Identifiers are string
    /// literals (StaticString), so reading the source is enough; lines that are comments are
    /// skipped.
    static func find(inSourcesAt directory: String) throws(Failure) -> CodeBinding {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw Failure(description: "cannot read the sources in \(directory)")
        }
        var found: [(file: String, point: String)] = []
        var code: [(file: String, text: String)] = []
        for case let file as String in enumerator where file.hasSuffix(".swift") {
            guard let text = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8) else {
                throw Failure(description: "cannot read \(directory)/\(file)")
            }
            let withoutComments = text.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
                .joined(separator: "\n")
            found += points(in: withoutComments).map { (file, $0) }
            code.append((file, withoutComments))
        }
        let distinct = Set(found.map(\.point))
        guard let point = distinct.first else {
            throw Failure(
                description:
                    "no AppExtensionPoint.Identifier(host:name:) in the Swift files of \(directory); bind the extension in code (@AppExtensionPoint.Bind) or keep the manifest as the only statement of its extension point"
            )
        }
        guard distinct.count == 1 else {
            let places = found.map { "\($0.point) in \($0.file)" }.joined(separator: ", ")
            throw Failure(description: "the code binds to more than one extension point (\(places)); an extension binds to one")
        }
        guard ManifestParser.isReverseDNS(point) else {
            throw Failure(description: "the code binds to '\(point)', which is not a reverse-DNS extension point identifier")
        }
        return CodeBinding(extensionPoint: point, capabilities: try CapabilityReader(code).statedCapabilities())
    }

    /// The identifiers of `AppExtensionPoint.Identifier(host: "…", name: "…")` and
    /// `AppExtensionPoint.Identifier("…")` in `code`, also in the 26.2 short form inside an
    /// extension (`Identifier(host:name:)`, `AppExtension.Identifier`): an `Identifier(` that
    /// does not end a longer name or follow another type's name.
    static func points(in code: String) -> [String] {
        let literal = #""([^"\\]*)""#
        let type = #"(?<![\w.])(?:AppExtensionPoint\.|AppExtension\.)?Identifier\(\s*"#
        let hostAndName = try! NSRegularExpression(pattern: type + #"host:\s*"# + literal + #"\s*,\s*name:\s*"# + literal + #"\s*\)"#)
        let whole = try! NSRegularExpression(pattern: type + literal + #"\s*\)"#)
        let range = NSRange(code.startIndex..., in: code)
        func group(_ match: NSTextCheckingResult, _ index: Int) -> String {
            Range(match.range(at: index), in: code).map { String(code[$0]) } ?? ""
        }
        return hostAndName.matches(in: code, range: range).map { "\(group($0, 1)).\(group($0, 2))" }
            + whole.matches(in: code, range: range).map { group($0, 1) }
    }

    /// `manifest` (its text) with `extensionPoint` and `capabilities` set to this binding; the
    /// rest of the text is kept as the author wrote it.
    func applied(toManifest manifest: String) throws(Failure) -> String {
        let point = try! NSRegularExpression(pattern: #""extensionPoint"\s*:\s*"(?:[^"\\]|\\.)*""#)
        let range = NSRange(manifest.startIndex..., in: manifest)
        guard point.numberOfMatches(in: manifest, range: range) == 1 else {
            throw Failure(description: "the manifest has no single \"extensionPoint\" to update")
        }
        let pointMember = "\"extensionPoint\": \"\(extensionPoint)\""
        let list = "[" + capabilities.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        let existing = try! NSRegularExpression(pattern: #""capabilities"\s*:\s*\[[^\]]*\]"#)
        switch existing.numberOfMatches(in: manifest, range: range) {
        case 0 where !capabilities.isEmpty:
            // After the point's member, indented as it is: valid JSON whatever follows it.
            let indentation = manifestIndentation(of: "\"extensionPoint\"", in: manifest)
            return point.stringByReplacingMatches(
                in: manifest, range: range,
                withTemplate: NSRegularExpression.escapedTemplate(for: pointMember + ",\n\(indentation)\"capabilities\": \(list)"))
        case 0, 1:
            let withPoint = point.stringByReplacingMatches(
                in: manifest, range: range, withTemplate: NSRegularExpression.escapedTemplate(for: pointMember))
            return existing.stringByReplacingMatches(
                in: withPoint, range: NSRange(withPoint.startIndex..., in: withPoint),
                withTemplate: NSRegularExpression.escapedTemplate(for: "\"capabilities\": \(list)"))
        default:
            throw Failure(description: "the manifest has more than one \"capabilities\"")
        }
    }

    /// The spaces before `key` on its line.
    private func manifestIndentation(of key: String, in manifest: String) -> String {
        guard let keyRange = manifest.range(of: key) else { return "  " }
        let lineStart = manifest[..<keyRange.lowerBound].lastIndex(of: "\n").map { manifest.index(after: $0) } ?? manifest.startIndex
        return String(manifest[lineStart..<keyRange.lowerBound].prefix { $0 == " " || $0 == "\t" })
    }

    /// A C file recording the binding as a "plugind" note of type 2 (see plugind_plugin.h),
    /// linked into the library by the package's `<Name>Binding` target.
    var noteSource: String {
        let description = "extensionPoint=\(extensionPoint)\ncapabilities=\(capabilities.joined(separator: " "))"
        let literal = description.replacingOccurrences(of: "\n", with: "\\n")
        return """
            /* Written by `plugind bind` from the code's @AppExtensionPoint.Bind: do not edit; `make`
             * writes it again. Records the binding where `plugind verify` reads it without running
             * the plugin (an ELF note "plugind" of type 2, as PLUGIND_PLUGIN_BINDING does in C). */
            #include <stdint.h>

            __attribute__((used, section(".note.plugind"), aligned(4))) static const struct {
                uint32_t name_size;
                uint32_t description_size;
                uint32_t type;
                char name[8];
                char description[\(description.utf8.count)];
            } plugind_binding_record = {8, \(description.utf8.count), 2, "plugind", "\(literal)"};

            """
    }
}
