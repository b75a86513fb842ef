import Foundation
import PlugindBundle
import TestSupport
import Testing

@Suite("Extension point version ranges", .tags(.unit))
struct PointVersionRangeTests {
    func parse(_ range: Any) throws(ManifestError) -> PointVersionRange? {
        var object = ManifestParserTests.valid
        object["extensionPointVersions"] = range
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return try ManifestParser.parse(data, file: "/b/manifest.json").manifest.extensionPointVersions
    }

    @Test("minimum is included, below excluded; either may be left out")
    func contains() throws {
        let range = try #require(try parse(["minimum": "2.0", "below": "3.0"]))
        #expect(range.contains(HostVersion("2.0")!) && range.contains(HostVersion("2.9.9")!))
        #expect(!range.contains(HostVersion("1.9")!) && !range.contains(HostVersion("3.0")!) && !range.contains(HostVersion("3")!))
        #expect(range.description == "2.0 or later, before 3.0")
        #expect(try parse(["minimum": "2"])?.contains(HostVersion("10.0")!) == true)
        #expect(try parse(["below": "2"])?.contains(HostVersion("1.99")!) == true)
    }

    @Test(
        "a range that is not one is refused, naming the key",
        arguments: [
            ("2.0", "must be an object"), (["minimum": 2], "must be a version such as 2.0, found number"),
            (["minimum": "two"], "found 'two'"), (["maximum": "3.0"], "has 'maximum'"),
            (["minimum": "3.0", "below": "3.0"], "is empty"), ([String: String](), "must give 'minimum', 'below' or both"),
        ] as [(any Sendable, String)])
    func refused(_ range: any Sendable, _ message: String) {
        do {
            _ = try parse(range)
            Issue.record("accepted \(range)")
        } catch {
            #expect(error.description.contains("extensionPointVersions"), "\(error)")
            #expect(error.description.contains(message), "\(error)")
        }
    }
}
