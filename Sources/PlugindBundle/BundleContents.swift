import Glibc
import PlugindSystem

/// Every entry of a bundle directory, read without following a symlink and checked against the
/// rules a bundle must follow: only regular files, directories and symlinks that stay inside;
/// no hard links; nothing writable by another user; names without control characters; bounded
/// count, depth and size. The approval pins a digest of it (`BundleDigest`), and a launch loads
/// exactly the bytes pinned.
package struct BundleContents: Sendable, Hashable {
    /// One entry, by its path relative to the bundle directory.
    package struct Entry: Sendable, Hashable {
        package enum Kind: Sendable, Hashable {
            case directory
            /// A regular file; `isLoadable` when it is an ELF file (which a launch hands to the
            /// worker as a sealed copy).
            case file(isLoadable: Bool)
            case symlink(target: String)
        }

        package var path: String
        package var kind: Kind
        /// `lstat` of the entry: ownership and mode for the rules, identity as a cache hint.
        package var status: FileStatus

        package init(path: String, kind: Kind, status: FileStatus) {
            self.path = path
            self.kind = kind
            self.status = status
        }

        package var isRegularFile: Bool {
            if case .file = kind { return true }
            return false
        }

        package var isLoadable: Bool {
            if case .file(true) = kind { return true }
            return false
        }
    }

    /// Entries sorted by path (byte order), the bundle directory itself not among them.
    package var entries: [Entry]
    /// The bundle directory's own status.
    package var directory: FileStatus

    package init(entries: [Entry], directory: FileStatus) {
        self.entries = entries
        self.directory = directory
    }

    /// Where a bundle carries its publisher's signature: not part of the signed contents.
    package static let signatureFileName = "plugind-signature.json"

    /// Limits on what a bundle may hold.
    package enum Limits {
        package static let entries = 1024
        package static let depth = 16
        package static let fileBytes: UInt64 = 1 << 30
        package static let loadableFiles = 64
        package static let nameBytes = 255
    }

    package func entry(_ path: String) -> Entry? {
        entries.first { $0.path == path }
    }

    package var loadableFiles: [Entry] { entries.filter(\.isLoadable) }
    package var regularFiles: [Entry] { entries.filter(\.isRegularFile) }

    /// Why a bundle breaks a rule: the entry and what is wrong with it.
    package struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        package var path: String
        package var reason: String
        package var fix: String

        package var description: String { "\(path) \(reason)" }
    }

    /// Reads the bundle at `path` (canonical). Throws the first rule the bundle breaks.
    package static func read(bundleAt path: String) throws(Problem) -> BundleContents {
        let root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard root >= 0 else {
            throw Problem(
                path: path, reason: "cannot be opened: \(String(cString: strerror(errno)))", fix: "check the bundle's permissions")
        }
        defer { close(root) }
        var status = stat()
        guard fstat(root, &status) == 0 else {
            throw Problem(
                path: path, reason: "cannot be examined: \(String(cString: strerror(errno)))", fix: "check the bundle's permissions")
        }
        return try read(directory: root, status: FileStatus(status), bundlePath: path, user: effectiveUserID).contents
    }

    /// A file of the bundle its reader has already read as text, with the status it had on the
    /// descriptor it was read through.
    package struct FileReadAsText: Sendable {
        package var path: String
        package var status: FileStatus

        package init(path: String, status: FileStatus) {
            self.path = path
            self.status = status
        }
    }

    /// Reads the bundle open as `directory` (a directory opened without following a symlink,
    /// whose listing this uses up; its status `status`, its canonical path `bundlePath`), checking
    /// ownership against `user`. A `textFile` found with the status it was read with is not
    /// opened again and is not loadable (it began with text, not ELF's magic); the first bytes
    /// (up to 64, an ELF header) of the entry `keepingHeaderOf` are returned.
    package static func read(
        directory: CInt, status: FileStatus, bundlePath: String, user: UInt32, textFile: FileReadAsText? = nil,
        keepingHeaderOf headerPath: String? = nil
    ) throws(Problem) -> (contents: BundleContents, header: [UInt8]?) {
        var reader = Reader(bundlePath: bundlePath, user: user, textFile: textFile, headerPath: headerPath)
        try reader.walk(directory: directory, relativePath: "", depth: 0)
        reader.entries.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        let contents = BundleContents(entries: reader.entries, directory: status)
        try contents.checkSymlinks(bundlePath: bundlePath)
        return (contents, reader.header)
    }

    /// Re-examines every entry (one `lstat` each, relative to `directory`, an open directory
    /// holding the bundle as `name`) and says whether any differs from when the contents were
    /// read: the catalog's cheap check for an unchanged bundle. An entry added or removed shows
    /// as a changed directory. `followingLink`: `name` is a symlink to the bundle, whose target
    /// must be the directory the contents were read from.
    package func isUnchanged(name: String, in directory: CInt, followingLink: Bool) -> Bool {
        var status = stat()
        guard fstatat(directory, name, &status, followingLink ? 0 : AT_SYMLINK_NOFOLLOW) == 0, FileStatus(status) == self.directory else {
            return false
        }
        // Each entry's path below `directory` is written into one buffer on the stack: a string
        // made per entry costs an allocation and its release, a visible share of a rescan (`perf`).
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(PATH_MAX)) { buffer in
            guard let base = buffer.baseAddress else { return false }
            /// Copies `text` to `offset`; the offset after it, nil when it does not fit.
            func write(_ text: String, at offset: Int) -> Int? {
                var text = text
                return text.withUTF8 { bytes in
                    guard offset + bytes.count < buffer.count else { return nil }
                    if let source = bytes.baseAddress { (base + offset).update(from: source, count: bytes.count) }
                    return offset + bytes.count
                }
            }
            guard let nameEnd = write(name, at: 0), nameEnd + 1 < buffer.count else { return false }
            base[nameEnd] = UInt8(ascii: "/")
            for entry in entries {
                guard let end = write(entry.path, at: nameEnd + 1) else { return false }
                base[end] = 0
                let examined = base.withMemoryRebound(to: CChar.self, capacity: end + 1) {
                    fstatat(directory, $0, &status, AT_SYMLINK_NOFOLLOW) == 0
                }
                guard examined, FileStatus(status) == entry.status else { return false }
            }
            return true
        }
    }

    /// Symlinks must resolve, within the bundle, to an entry of it.
    private func checkSymlinks(bundlePath: String) throws(Problem) {
        let byPath = Dictionary(entries.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        for entry in entries {
            guard case .symlink = entry.kind else { continue }
            var current = entry
            var hops = 0
            while case .symlink(let target) = current.kind {
                hops += 1
                guard !target.hasPrefix("/"), hops <= 8, let resolved = Self.resolve(target, from: current.path),
                    let next = byPath[resolved]
                else {
                    throw Problem(
                        path: bundlePath + "/" + entry.path,
                        reason: "is a symlink that leads outside the bundle or to nothing in it",
                        fix: "copy the file into the bundle instead of linking to it, or use a relative link to a file in the bundle"
                    )
                }
                current = next
            }
        }
    }

    /// `target` of a symlink at `linkPath`, both relative to the bundle, resolved lexically; nil
    /// when it climbs out.
    package static func resolve(_ target: String, from linkPath: String) -> String? {
        var components = linkPath.split(separator: "/").dropLast().map(String.init)
        for component in target.split(separator: "/") {
            switch component {
            case ".": continue
            case "..":
                guard !components.isEmpty else { return nil }
                components.removeLast()
            default: components.append(String(component))
            }
        }
        return components.isEmpty ? nil : components.joined(separator: "/")
    }

    private struct Reader {
        let bundlePath: String
        let user: UInt32
        let textFile: FileReadAsText?
        let headerPath: String?
        var entries: [Entry] = []
        var loadableCount = 0
        var header: [UInt8]?

        init(bundlePath: String, user: UInt32, textFile: FileReadAsText?, headerPath: String?) {
            self.bundlePath = bundlePath
            self.user = user
            self.textFile = textFile
            self.headerPath = headerPath
        }

        mutating func walk(directory: CInt, relativePath: String, depth: Int) throws(Problem) {
            guard depth < Limits.depth else {
                throw problem(relativePath, "is nested more than \(Limits.depth) directories deep", "flatten the bundle's layout")
            }
            let names = try listing(directory, relativePath)
            for name in names {
                let path = relativePath.isEmpty ? name : relativePath + "/" + name
                if path == BundleContents.signatureFileName { continue }
                try checkName(name, path)
                var status = stat()
                guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw problem(path, "cannot be examined: \(String(cString: strerror(errno)))", "check its permissions")
                }
                let fileStatus = FileStatus(status)
                // A symlink's own mode means nothing (it is always 0777); replacing it takes write
                // access to its directory, which is checked.
                let isSymlink = status.st_mode & S_IFMT == S_IFLNK
                if let reason = isSymlink ? fileStatus.foreignOwnerProblem(user: user) : fileStatus.writableByOthersProblem(user: user) {
                    throw problem(path, reason, "run 'chmod -R go-w' on the bundle, and own it yourself")
                }
                guard entries.count < Limits.entries else {
                    throw problem("", "has more than \(Limits.entries) entries", "ship fewer files, or pack data into fewer files")
                }
                switch status.st_mode & S_IFMT {
                case S_IFDIR:
                    entries.append(Entry(path: path, kind: .directory, status: fileStatus))
                    let child = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    guard child >= 0 else {
                        throw problem(path, "cannot be opened: \(String(cString: strerror(errno)))", "check its permissions")
                    }
                    defer { close(child) }
                    try walk(directory: child, relativePath: path, depth: depth + 1)
                case S_IFREG:
                    guard status.st_nlink == 1 else {
                        throw problem(
                            path, "has \(status.st_nlink) hard links: another name for it, outside the bundle, could change it",
                            "copy the file instead of linking it")
                    }
                    guard UInt64(status.st_size) <= Limits.fileBytes else {
                        throw problem(path, "is larger than \(ByteCount(Limits.fileBytes))", "ship smaller files")
                    }
                    let loadable: Bool
                    if let textFile, textFile.path == path, textFile.status == fileStatus {
                        loadable = false
                    } else {
                        loadable = try isELF(directory, name, path)
                    }
                    if loadable {
                        guard loadableCount < Limits.loadableFiles else {
                            throw problem(
                                path, "is one library too many: a bundle may hold \(Limits.loadableFiles)", "ship fewer libraries")
                        }
                        loadableCount += 1
                    }
                    entries.append(Entry(path: path, kind: .file(isLoadable: loadable), status: fileStatus))
                case S_IFLNK:
                    entries.append(Entry(path: path, kind: .symlink(target: try linkTarget(directory, name, path)), status: fileStatus))
                default:
                    throw problem(
                        path, "is a device file, socket or FIFO; a bundle holds only files, directories and symlinks",
                        "remove it from the bundle")
                }
            }
        }

        private func problem(_ path: String, _ reason: String, _ fix: String) -> Problem {
            Problem(path: path.isEmpty ? bundlePath : bundlePath + "/" + path, reason: reason, fix: fix)
        }

        private func listing(_ directory: CInt, _ path: String) throws(Problem) -> [String] {
            let listing: StrictDirectoryListing.Listing
            do {
                listing = try StrictDirectoryListing.read(directory, limit: Limits.entries)
            } catch {
                throw problem(path, "cannot be listed: \(error)", "check its permissions")
            }
            // Decoded strictly: a repaired name would be shown, digested and opened as a file
            // that is not the one on disk.
            guard !listing.foundNameNotUTF8 else {
                throw problem("", "has a file whose name is not valid UTF-8", "rename it")
            }
            guard !listing.isTruncated else {
                throw problem("", "has more than \(Limits.entries) entries", "ship fewer files, or pack data into fewer files")
            }
            return listing.names
        }

        private func checkName(_ name: String, _ path: String) throws(Problem) {
            // Names are shown to the owner and written one per line into the digest: no control
            // characters (UTF-8 validity is checked when the directory is read).
            guard name.utf8.count <= Limits.nameBytes,
                !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || InertText.isHidden($0) })
            else {
                throw problem(path, "has a name with control or invisible characters", "rename it")
            }
        }

        /// Whether the file begins with ELF's magic; its first bytes are kept as `header` when
        /// it is the entry asked for.
        private mutating func isELF(_ directory: CInt, _ name: String, _ path: String) throws(Problem) -> Bool {
            let file = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            guard file >= 0 else { throw problem(path, "cannot be read: \(String(cString: strerror(errno)))", "make it readable") }
            defer { close(file) }
            // As many bytes as an ELF header: the same one read whether the header is kept or not.
            var bytes = [UInt8](repeating: 0, count: 64)
            let count = bytes.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
            let isELF = count >= 4 && bytes[0] == 0x7F && bytes[1] == 0x45 && bytes[2] == 0x4C && bytes[3] == 0x46
            if isELF && path == headerPath { header = Array(bytes[..<count]) }
            return isELF
        }

        private func linkTarget(_ directory: CInt, _ name: String, _ path: String) throws(Problem) -> String {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes {
                readlinkat(directory, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count)
            }
            guard count > 0 else { throw problem(path, "cannot be read: \(String(cString: strerror(errno)))", "check it") }
            return String(decoding: buffer[..<count], as: UTF8.self)
        }
    }
}
