import Foundation
import PlugindBundle
import PlugindSystem
import PlugindWire

/// The directories outside a bundle that its libraries' dependencies resolve to (`DT_NEEDED`,
/// followed to the end), read from the files without loading them: the worker's view binds them
/// read-only. Remembered per library file identity; a wrong guess costs a failed load, never
/// access, since the directories are read-only system ones.
final class DependencyDirectories: Sendable {
    static let shared = DependencyDirectories()

    private struct Key: Hashable {
        var path: String
        var identity: FileIdentity?
    }

    /// Each library's own needed libraries, resolved, by the library's path and identity.
    private let resolved = Locked<[Key: [String]]>([:])
    /// Canonical paths of the system directories dependencies live in (/lib/x86_64-linux-gnu →
    /// /usr/lib/x86_64-linux-gnu): resolving them took most of a launch's planning. Kept for the
    /// life of the process; a directory that became a symlink since costs a failed load.
    private let canonicalDirectories = Locked<[String: String]>([:])
    private let resolver = LibraryResolver()

    /// The directories `bundle` needs beyond itself, sorted.
    func directories(of bundle: InspectedBundle) -> [String] {
        var roots = bundle.contents.loadableFiles.map { bundle.bundlePath + "/" + $0.path }
        if bundle.usesSystemLibrary { roots.append(bundle.libraryPath) }
        var seen: Set<String> = []
        var pending = roots
        var directories: Set<String> = []
        // A dependency chain longer than this is not followed further (a loop, or a hostile file).
        while let path = pending.popLast(), seen.count < 512 {
            guard seen.insert(path).inserted else { continue }
            for dependency in dependencies(of: path) {
                if !dependency.hasPrefix(bundle.bundlePath + "/"),
                    let canonical = canonicalDirectory((dependency as NSString).deletingLastPathComponent)
                {
                    // Canonical: the worker binds without following symlinks.
                    directories.insert(canonical)
                }
                pending.append(dependency)
            }
        }
        return directories.sorted()
    }

    private func canonicalDirectory(_ directory: String) -> String? {
        if let known = canonicalDirectories.withLock({ $0[directory] }) { return known }
        guard let canonical = canonicalPath(directory) else { return nil }
        canonicalDirectories.withLock { $0[directory] = canonical }
        return canonical
    }

    private func dependencies(of path: String) -> [String] {
        let key = Key(path: path, identity: FileIdentity(path: path))
        if let known = resolved.withLock({ $0[key] }) { return known }
        guard let file = try? ELFFile.inspect(atPath: path) else { return [] }
        let origin = (path as NSString).deletingLastPathComponent
        let found = file.needed.compactMap { resolver.resolve($0, runPaths: file.runPaths, origin: origin) }
        resolved.withLock { $0[key] = found }
        return found
    }
}
