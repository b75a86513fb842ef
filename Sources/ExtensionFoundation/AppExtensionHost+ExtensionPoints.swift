public import Foundation
package import PlugindBundle
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
            let descriptor = try point.descriptor(in: self).validated(at: target.path)
            let file = target.appendingPathComponent(ExtensionPointDescriptor.fileName(of: descriptor.identifier))
            let bytes = descriptor.encoded()
            if (try? Data(contentsOf: file)).map({ [UInt8]($0) == bytes }) == true {
                written.append(file)
                continue
            }
            do {
                try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
                // Readable by every user: other users' plugind reads what a system host declares.
                try AtomicFile.replace(file.path, with: bytes, mode: 0o644)
            } catch {
                throw DescriptorError(description: "cannot write \(file.path): \(error)")
            }
            written.append(file)
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
                throw DescriptorError(description: "cannot remove \(file.path): \(error.localizedDescription)")
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
