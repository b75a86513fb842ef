import Foundation

/// Builds plugin bundles from the example libraries: a directory with `manifest.json` and a copy
/// of the `.so`, so that tests can change one without touching the build.
package struct PluginFixture {
    package var library: String
    package var identifier: String
    package var extensionPoint: String
    package var name: String
    package var extra: [String: Any]
    /// Where the library comes from when it is not a product of this build (a plugin built by
    /// cargo or go in a test); nil: the example product.
    package var libraryPath: String?

    /// - Parameters:
    ///   - library: the example product, e.g. "Echo" (for libEcho.so).
    ///   - extra: more manifest keys (limits, permissions, functions, …).
    package init(
        library: String,
        identifier: String? = nil,
        extensionPoint: String = "org.plugind.tests.point",
        name: String? = nil,
        extra: [String: Any] = [:],
        libraryPath: String? = nil
    ) {
        self.library = library
        self.identifier = identifier ?? "org.plugind.tests.\(library.lowercased())"
        self.extensionPoint = extensionPoint
        self.name = name ?? library
        self.extra = extra
        self.libraryPath = libraryPath
    }

    package var manifest: [String: Any] {
        var manifest: [String: Any] = [
            "manifestVersion": 1,
            "identifier": identifier,
            "name": name,
            "version": "1.0.0",
            "extensionPoint": extensionPoint,
            "library": "lib\(library).so",
        ]
        manifest.merge(extra) { _, new in new }
        return manifest
    }

    /// Writes the bundle into `root` and returns its path.
    @discardableResult
    package func install(in root: String, bundleName: String? = nil) throws -> String {
        let bundle = root + "/" + (bundleName ?? "\(identifier).appex")
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let data = try JSONSerialization.data(withJSONObject: manifest, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let destination = bundle + "/lib\(library).so"
        try? FileManager.default.removeItem(atPath: destination)
        try FileManager.default.copyItem(atPath: try libraryPath ?? BuiltProducts.library(library), toPath: destination)
        return bundle
    }
}
