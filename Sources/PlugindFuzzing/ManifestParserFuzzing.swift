import Foundation
import PlugindBundle

/// The body of the manifest-parser fuzz target, shared with the regression test that replays the
/// corpus. Any input must parse or fail with a `ManifestError`; a manifest that parses must name
/// a reverse-DNS identifier and a relative library.
package enum ManifestParserFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let result = try? ManifestParser.parse(Data(input), file: "fuzz/manifest.json") else { return }
        let manifest = result.manifest
        guard ManifestParser.isReverseDNS(manifest.identifier), !manifest.library.hasPrefix("/") else {
            throw InvariantViolation(description: "accepted an invalid manifest: \(manifest)")
        }
    }
}
