import Foundation

/// Where `swift build` put the executables and example plugins the tests use. A missing artefact
/// is a test failure with a hint, never a silent skip.
package enum BuiltProducts {
    package struct Missing: Error, CustomStringConvertible {
        package var path: String
        package var description: String { "\(path) does not exist; run 'swift build' before the tests" }
    }

    /// The directory of the running test executable, where SwiftPM also puts every product.
    package static var directory: String {
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return (executable as NSString).deletingLastPathComponent
        }
        return (CommandLine.arguments[0] as NSString).deletingLastPathComponent
    }

    package static func path(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        return path
    }

    /// `lib<Name>.so` of an example plugin.
    package static func library(_ name: String) throws -> String {
        try path("lib\(name).so")
    }

    package static func worker() throws -> String { try path("plugind-worker") }
    package static func plugind() throws -> String { try path("plugind") }

    /// The package root (for example manifests under ExamplePlugins/).
    package static var packageRoot: String {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) {
                return directory.path
            }
            directory.deleteLastPathComponent()
        }
        return FileManager.default.currentDirectoryPath
    }
}
