import Foundation
import PlugindSystem

/// The plugind source tree, which plugin projects build against: the C header and, for Swift
/// plugins, PluginKit as a local package. Found through `$PLUGIND_SOURCE`, or by walking up from
/// the running executable (a `swift build` puts it under `.build/` of the checkout).
struct SourceCheckout {
    let root: String

    static let headerPath = "Sources/PlugindPluginABI/include/plugind_plugin.h"

    var header: String { root + "/" + Self.headerPath }

    /// The C++ kit, beside the C header.
    var cppKitHeader: String { root + "/Sources/PlugindPluginABI/include/plugind_plugin.hpp" }

    /// The package identity SwiftPM gives a path dependency: its directory name, lowercased.
    var packageIdentity: String { (root as NSString).lastPathComponent.lowercased() }

    static func locate(environment: [String: String] = ProcessInfo.processInfo.environment) throws(CommandFailure) -> SourceCheckout {
        if let explicit = environment["PLUGIND_SOURCE"], !explicit.isEmpty {
            guard FileManager.default.fileExists(atPath: explicit + "/" + headerPath) else {
                throw CommandFailure(
                    message: "PLUGIND_SOURCE=\(explicit) is not a plugind checkout (no \(headerPath))", status: .unavailable)
            }
            return SourceCheckout(root: explicit)
        }
        let executable = ProcessEnvironment.executablePath ?? CommandLine.arguments[0]
        var directory = (executable as NSString).deletingLastPathComponent
        while directory != "/" && !directory.isEmpty {
            if FileManager.default.fileExists(atPath: directory + "/" + headerPath),
                FileManager.default.fileExists(atPath: directory + "/Package.swift")
            {
                return SourceCheckout(root: directory)
            }
            directory = (directory as NSString).deletingLastPathComponent
        }
        throw CommandFailure(
            message:
                "cannot find the plugind source tree (for plugind_plugin.h and PluginKit); set PLUGIND_SOURCE to your plugind checkout (a C plugin needs only the installed plugind-dev package)",
            status: .unavailable
        )
    }
}
