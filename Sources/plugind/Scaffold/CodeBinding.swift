import Foundation
import PlugindBundle

/// The extension point a Swift package's code binds to (`@AppExtensionPoint.Bind` with an
/// `AppExtensionPoint.Identifier`), carried into its manifest and into a C file that records it
/// in the library as an ELF note, where `plugind verify` reads it without running code.
struct CodeBinding: Equatable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    var extensionPoint: String

    /// Finds the one binding in the Swift files under `directory`. Identifiers are string
    /// literals (StaticString), so reading the source is enough; lines that are comments are
    /// skipped.
    static func find(inSourcesAt directory: String) throws(Failure) -> CodeBinding {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw Failure(description: "cannot read the sources in \(directory)")
        }
        var found: [(file: String, point: String)] = []
        for case let file as String in enumerator where file.hasSuffix(".swift") {
            guard let text = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8) else {
                throw Failure(description: "cannot read \(directory)/\(file)")
            }
            let code = text.split(separator: "\n", omittingEmptySubsequences: false)
                .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
                .joined(separator: "\n")
            found += points(in: code).map { (file, $0) }
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
        return CodeBinding(extensionPoint: point)
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

    /// `manifest` (its text) with `extensionPoint` set to this binding; the rest of the text is
    /// kept as the author wrote it.
    func applied(toManifest manifest: String) throws(Failure) -> String {
        let pattern = try! NSRegularExpression(pattern: #""extensionPoint"\s*:\s*"(?:[^"\\]|\\.)*""#)
        let range = NSRange(manifest.startIndex..., in: manifest)
        guard pattern.numberOfMatches(in: manifest, range: range) == 1 else {
            throw Failure(description: "the manifest has no single \"extensionPoint\" to update")
        }
        return pattern.stringByReplacingMatches(
            in: manifest, range: range, withTemplate: NSRegularExpression.escapedTemplate(for: "\"extensionPoint\": \"\(extensionPoint)\""))
    }

    /// A C file recording the binding as a "plugind" note of type 2 (see plugind_plugin.h),
    /// linked into the library by the package's `<Name>Binding` target.
    var noteSource: String {
        let description = "extensionPoint=\(extensionPoint)"
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
            } plugind_binding_record = {8, \(description.utf8.count), 2, "plugind", "\(description)"};

            """
    }
}
