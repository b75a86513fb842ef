import FoundationEssentials
import Glibc
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

    /// Each library's own needed libraries, as the dynamic linker finds them (symlinks not
    /// followed), by the library's path and identity.
    private let resolved = Locked<[Key: [String]]>([:])
    private let resolver = LibraryResolver()

    /// The directories `bundle` needs beyond itself, sorted, the libraries in them it needs
    /// (canonical paths, sorted), and why a dependency outside the
    /// bundle is refused: one reached through a symlink, directory or file that someone other
    /// than root or the host's user owns or may write (`TrustedLibraryPath`), or why one could not
    /// be checked because the host ran out of descriptors or memory. `settled` is false when the
    /// answer may change while the bundle does not: a refusal (it rests on the owners and modes of
    /// directories outside the bundle), a host failure, or a library that could not be read; such
    /// an answer must not be remembered.
    func directories(of bundle: InspectedBundle) -> (
        directories: [String], libraries: [String], refusal: String?, hostFailure: String?, settled: Bool
    ) {
        var roots = bundle.contents.loadableFiles.map { bundle.bundlePath + "/" + $0.path }
        if bundle.usesSystemLibrary { roots.append(bundle.libraryPath) }
        var seen: Set<String> = []
        var pending = roots
        var libraries: Set<String> = []
        var refusal: String?
        var hostFailure: String?
        var settled = true
        // A dependency chain longer than this is not followed further (a loop, or a hostile file).
        while let path = pending.popLast(), seen.count < 512 {
            guard seen.insert(path).inserted else { continue }
            guard let needed = dependencies(of: path) else {
                settled = false
                continue
            }
            for dependency in needed {
                guard let canonical = canonicalPath(dependency) else { continue }
                if canonical.hasPrefix(bundle.bundlePath + "/") {
                    pending.append(canonical)
                    continue
                }
                switch TrustedLibraryPath.resolve(dependency, rule: .dependency) {
                case .success(let resolution):
                    // Canonical: the worker binds their directories without following symlinks.
                    libraries.insert(resolution.canonicalPath)
                    pending.append(resolution.canonicalPath)
                case .failure(let failure):
                    let needer = path.hasPrefix(bundle.bundlePath + "/") ? String(path.dropFirst(bundle.bundlePath.count + 1)) : path
                    let needed = dependency.lastPathComponent
                    if let code = failure.systemErrno, let exhausted = SystemError("open", Errno(rawValue: code)).exhaustedHostResource {
                        hostFailure = hostFailure ?? "\(needer) needs \(needed), which cannot be checked: \(failure); \(exhausted)"
                    } else {
                        refusal = refusal ?? "\(needer) needs \(needed), which is refused: \(failure)"
                    }
                }
            }
        }
        let directories = Set(libraries.map { $0.deletingLastPathComponent })
        return (directories.sorted(), libraries.sorted(), refusal, hostFailure, settled && refusal == nil && hostFailure == nil)
    }

    /// The libraries `path` needs; nil when it could not be read.
    private func dependencies(of path: String) -> [String]? {
        let key = Key(path: path, identity: FileIdentity(path: path))
        if let known = resolved.withLock({ $0[key] }) { return known }
        guard let file = try? ELFFile.inspect(atPath: path, extent: .dependencies) else { return nil }
        let origin = path.deletingLastPathComponent
        let found = file.needed.compactMap { resolver.candidate(for: $0, runPaths: file.runPaths, origin: origin) }
        resolved.withLock { $0[key] = found }
        return found
    }
}
