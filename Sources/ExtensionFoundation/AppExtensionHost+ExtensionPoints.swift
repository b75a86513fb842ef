public import FoundationEssentials
import Glibc
package import PlugindBundle
import PlugindEngine
import PlugindSystem

extension AppExtensionHost {
    /// Why a host's extension-point descriptors could not be written or removed.
    public struct DescriptorError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Installs a descriptor for each of `points` — identifier, this host, scope, enhanced
    /// security, `Description` and `Version` — so that `plugind` and other hosts' tools know what
    /// the points are without running this host: `plugind list --all` and `verify` say when no
    /// installed host declares a plugin's point, `info` and `browse` show its description and
    /// host. Call it when the host is installed or first runs (it rewrites only what changed):
    ///
    ///     try AppExtensionHost.current.installExtensionPointDescriptors([.textFilters, .greeters])
    ///
    /// `directory` defaults to `userExtensionPointsDirectory`; a package puts them in
    /// `/usr/share/plugind/extension-points` (`plugind points add … --directory` writes the same
    /// files at build time). Returns the files written. Linux addition: Apple's build writes the
    /// `.appext` descriptions into the app.
    @discardableResult
    public func installExtensionPointDescriptors(_ points: [AppExtensionPoint], in directory: URL? = nil) throws -> [URL] {
        let target = try descriptorDirectory(directory)
        var written: [URL] = []
        for point in points {
            try point.validated(in: self)
            do {
                written.append(URL(fileURLWithPath: try point.descriptor(in: self).install(in: target.path)))
            } catch {
                throw DescriptorError(description: error.description)
            }
        }
        return written
    }

    /// Removes the descriptors of `points` from `directory` (by default
    /// `userExtensionPointsDirectory`); returns those that were there.
    @discardableResult
    public func removeExtensionPointDescriptors(_ points: [AppExtensionPoint], from directory: URL? = nil) throws -> [URL] {
        let target = try descriptorDirectory(directory)
        var removed: [URL] = []
        for point in points {
            let file = target.appendingPathComponent(ExtensionPointDescriptor.fileName(of: point.identifier(in: self)))
            guard FileManager.default.fileExists(atPath: file.path) else { continue }
            do {
                try FileManager.default.removeItem(at: file)
            } catch {
                throw DescriptorError(description: "cannot remove \(file.path): \(ErrorText.describe(error))")
            }
            removed.append(file)
        }
        return removed
    }

    private func descriptorDirectory(_ directory: URL?) throws -> URL {
        guard let target = directory ?? userExtensionPointsDirectory else {
            throw DescriptorError(
                description:
                    "no extension-points directory outside /usr to write to; pass one (in: /usr/share/plugind/extension-points for a package)"
            )
        }
        return target
    }

    /// The points the installed hosts declare.
    package var declaredExtensionPoints: DeclaredExtensionPoints {
        DeclaredExtensionPoints.load(from: extensionPointDirectories.map(\.path))
    }
}

extension AppExtensionPoint {
    /// The descriptor `installExtensionPointDescriptors` writes for this point.
    func descriptor(in host: AppExtensionHost) -> ExtensionPointDescriptor {
        ExtensionPointDescriptor(
            identifier: identifier(in: host), host: host.identifier, scope: scopeRestriction == .none ? "none" : "application",
            enhancedSecurity: requiresEnhancedSecurity, description: pointDescription, version: version)
    }
}
