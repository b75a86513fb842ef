import TestSupport
import Testing

@testable import plugind

/// `plugind pack --format deb`: the package name of an identifier, one-to-one and always one
/// Debian accepts.
@Suite("Debian package names of plugin identifiers", .tags(.unit))
struct DebianPackageNameTests {
    /// Debian policy 5.6.1: lower-case letters, digits, '+', '-' and '.', at least two, starting
    /// alphanumeric.
    static func isDebianPackageName(_ name: String) -> Bool {
        name.wholeMatch(of: /[a-z0-9][a-z0-9+.-]+/) != nil
    }

    @Test("identifiers that differ in case, '_' or '-' are different packages, each a valid name")
    func distinct() {
        let identifiers = ["org.a_b", "org.a-b", "Org.A-B"]
        let names = identifiers.map(DebianPackage.packageName(for:))
        #expect(Set(names).count == identifiers.count, "\(names)")
        #expect(names == ["plugind-plugin-org.a++b", "plugind-plugin-org.a-b", "plugind-plugin-+org.+a-+b"])
        for name in names { #expect(Self.isDebianPackageName(name), "\(name)") }
        // The example of `plugind pack --help`.
        #expect(DebianPackage.packageName(for: "com.Example.my_tool") == "plugind-plugin-com.+example.my++tool")
        // The names existing packages have (lower case, digits, '.', '-') are unchanged.
        #expect(DebianPackage.packageName(for: "org.plugind.tests.echo") == "plugind-plugin-org.plugind.tests.echo")
    }

    @Test("every identifier of the manifest's alphabet, up to three characters, has a name of its own and a valid one")
    func exhaustive() {
        let alphabet = Array("abAB09_-.")
        var words = [""]
        for _ in 0..<3 { words += words.flatMap { word in alphabet.map { word + String($0) } } }
        let identifiers = Set(words.filter { !$0.isEmpty }.map { "x." + $0 })
        var seen: [String: String] = [:]
        for identifier in identifiers {
            let name = DebianPackage.packageName(for: identifier)
            #expect(Self.isDebianPackageName(name), "\(identifier): \(name)")
            if let other = seen.updateValue(identifier, forKey: name) {
                Issue.record("\(identifier) and \(other) are both \(name)")
            }
        }
        #expect(seen.count == identifiers.count)
        // Bytes no manifest allows are spelled one-to-one too, never dropped or folded.
        #expect(DebianPackage.packageName(for: "a/b") != DebianPackage.packageName(for: "a b"))
        #expect(Self.isDebianPackageName(DebianPackage.packageName(for: "é/ \u{0}")))
    }
}
