import FoundationEssentials
import Glibc
import PlugindSystem

/// The digest an approval (and a publisher's signature) pins: SHA-256 of a canonical listing of
/// every entry of a bundle, one line each, sorted by path:
///
///     plugind-bundle-digest 1
///     d <path>                                  a directory
///     f <sha256> <size> <x or -> <path>         a regular file: its SHA-256, size, execute bit
///     l <byte count> <target> <path>            a symlink and its contents
///
/// Paths never hold a line break (`BundleContents` refuses them), and a symlink's target is
/// length-prefixed, so two different bundles never have the same listing.
package struct BundleDigest: Sendable, Hashable, Codable {
    /// The digest of the listing.
    package var digest: String
    /// SHA-256 of each regular file, by path.
    package var files: [String: String]

    package init(digest: String, files: [String: String]) {
        self.digest = digest
        self.files = files
    }

    package static let header = "plugind-bundle-digest 1\n"

    /// The digest of `contents`, with each file's SHA-256 from `fileDigest`.
    package static func compute(_ contents: BundleContents, fileDigest: (BundleContents.Entry) throws -> String) rethrows -> BundleDigest {
        var files: [String: String] = [:]
        for entry in contents.entries where entry.isRegularFile {
            files[entry.path] = try fileDigest(entry)
        }
        let text = listing(contents, files: files)
        return BundleDigest(digest: SHA256Digest.hex(of: Data(text.utf8)), files: files)
    }

    /// The canonical listing of `contents` with the given file digests.
    package static func listing(_ contents: BundleContents, files: [String: String]) -> String {
        listing(
            contents.entries.map { entry in
                switch entry.kind {
                case .directory: .directory(path: entry.path)
                case .file:
                    .file(
                        path: entry.path, sha256: files[entry.path] ?? "", size: entry.status.identity.size,
                        executable: entry.status.mode & 0o100 != 0)
                case .symlink(let target): .symlink(path: entry.path, target: target)
                }
            })
    }

    /// One line of a listing, for a bundle known only from elsewhere (a package's archive).
    package enum ListedEntry: Sendable {
        case directory(path: String)
        case file(path: String, sha256: String, size: UInt64, executable: Bool)
        case symlink(path: String, target: String)

        var path: String {
            switch self {
            case .directory(let path), .file(let path, _, _, _), .symlink(let path, _): path
            }
        }
    }

    /// The canonical listing of `entries`, in any order.
    package static func listing(_ entries: [ListedEntry]) -> String {
        var text = header
        for entry in entries.sorted(by: { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }) {
            switch entry {
            case .directory(let path):
                text += "d \(path)\n"
            case .file(let path, let sha256, let size, let executable):
                text += "f \(sha256) \(size) \(executable ? "x" : "-") \(path)\n"
            case .symlink(let path, let target):
                text += "l \(target.utf8.count) \(target) \(path)\n"
            }
        }
        return text
    }
}
