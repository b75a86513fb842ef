import Foundation
import PlugindSystem

/// The plugin kits other than C and Swift, and their probes' libraries: the C++ one is a product
/// of this build; the Rust and Go ones are built here, once per test process, with Debian's cargo
/// and go, offline.
package enum PluginKitBuild: String, CaseIterable, Sendable, CustomStringConvertible {
    case cpp

    package var description: String { rawValue }

    /// How the probe's "throw" request reaches the host.
    package var thrownDescription: String {
        switch self {
        case .cpp: "C++ exception: asked to throw"
        }
    }

    /// The probe's library.
    package func probeLibrary() async throws -> String {
        switch self {
        case .cpp: try BuiltProducts.library("CppKitProbe")
        }
    }
}
