import CArchive
import Foundation
import Glibc
package import PlugindBundle
import PlugindSystem
import PlugindWire

/// A plugin package: one gzip-compressed POSIX tar (pax) archive of a signed bundle's regular
/// files and directories, at the archive's top level, written and read through libarchive. A
/// package is read with nothing trusted: every entry is checked before a byte of it is
/// written, and only into a fresh directory of the reader's own.
package enum PluginPackage {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// Caps on what a package may hold: those of a bundle, since a package unpacks into one.
    package enum Limits {
        package static let entries = BundleContents.Limits.entries
        package static let depth = BundleContents.Limits.depth
        package static let entryBytes = Int64(BundleContents.Limits.fileBytes)
        package static let totalBytes: Int64 = 4 << 30
        package static let nameBytes = BundleContents.Limits.nameBytes
    }

    // MARK: Writing

    /// Writes the bundle at `bundlePath` (its `contents`) to `output` through a temporary file
    /// renamed into place.
    package static func write(bundleAt bundlePath: String, contents: BundleContents, to output: String) throws(Failure) {
        let temporary = output + ".partial-\(getpid())"
        guard let archive = archive_write_new() else { throw Failure("cannot start an archive") }
        defer { archive_write_free(archive) }
        guard archive_write_add_filter_gzip(archive) == ARCHIVE_OK, archive_write_set_format_pax_restricted(archive) == ARCHIVE_OK,
            archive_write_open_filename(archive, temporary) == ARCHIVE_OK
        else {
            throw Failure("cannot write \(temporary): \(message(archive))")
        }
        var finished = false
        defer { if !finished { unlink(temporary) } }
        for item in contents.entries {
            try append(item, from: bundlePath, to: archive)
        }
        if let signature = BundleSignatureFile.entry(in: bundlePath) {
            try append(signature, from: bundlePath, to: archive)
        }
        guard archive_write_close(archive) == ARCHIVE_OK else { throw Failure("cannot finish \(temporary): \(message(archive))") }
        guard rename(temporary, output) == 0 else {
            throw Failure("cannot rename \(temporary) to \(output): \(String(cString: strerror(errno)))")
        }
        finished = true
    }

    private static func append(_ item: BundleContents.Entry, from bundlePath: String, to archive: OpaquePointer) throws(Failure) {
        guard let entry = archive_entry_new() else { throw Failure("cannot allocate an archive entry") }
        defer { archive_entry_free(entry) }
        archive_entry_set_pathname(entry, item.path)
        // Reproducible and owner-free: the bytes and the execute bit are all that is kept.
        archive_entry_set_uid(entry, 0)
        archive_entry_set_gid(entry, 0)
        archive_entry_set_mtime(entry, 0, 0)
        switch item.kind {
        case .directory:
            archive_entry_set_filetype(entry, S_IFDIR)
            archive_entry_set_perm(entry, 0o755)
            guard archive_write_header(archive, entry) == ARCHIVE_OK else { throw Failure("cannot add \(item.path): \(message(archive))") }
        case .symlink:
            throw Failure("\(item.path) is a symlink: packages hold regular files and directories only")
        case .file:
            archive_entry_set_filetype(entry, S_IFREG)
            archive_entry_set_perm(entry, item.status.mode & 0o100 != 0 ? 0o755 : 0o644)
            archive_entry_set_size(entry, Int64(item.status.identity.size))
            guard archive_write_header(archive, entry) == ARCHIVE_OK else { throw Failure("cannot add \(item.path): \(message(archive))") }
            let fd = open(bundlePath + "/" + item.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw Failure("cannot read \(item.path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var written: UInt64 = 0
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw Failure("cannot read \(item.path): \(String(cString: strerror(errno)))") }
                if count == 0 { break }
                guard archive_write_data(archive, buffer, count) == count else {
                    throw Failure("cannot add \(item.path): \(message(archive))")
                }
                written += UInt64(count)
            }
            guard written == item.status.identity.size else { throw Failure("\(item.path) changed while it was packed") }
        }
    }

    // MARK: Reading

    /// One checked archive entry: where it goes, and what it is.
    private struct Item {
        var relative: String
        var shown: String
        var isDirectory: Bool
        var size: Int64
        var executable: Bool
    }

    /// Reads the package at `path` entry by entry, checking every header (names, kinds, modes,
    /// counts, sizes, the total) before `body` sees the entry and its data.
    private static func readEntries(_ path: String, _ body: (OpaquePointer, Item) throws(Failure) -> Void) throws(Failure) {
        guard let archive = archive_read_new() else { throw Failure("cannot start reading \(path)") }
        defer { archive_read_free(archive) }
        // Only what `write` produces, so no other parser of libarchive sees hostile input.
        archive_read_support_filter_gzip(archive)
        archive_read_support_format_tar(archive)
        guard archive_read_open_filename(archive, path, 1 << 16) == ARCHIVE_OK else {
            throw Failure("\(path) is not a plugin package: \(message(archive))")
        }
        var count = 0
        var total: Int64 = 0
        var entry: OpaquePointer?
        while true {
            let status = archive_read_next_header(archive, &entry)
            if status == ARCHIVE_EOF { break }
            guard status == ARCHIVE_OK, let entry else {
                if count == 0 { throw Failure("\(path) is not a plugin package: \(message(archive))") }
                throw Failure("\(path) is corrupt or truncated after \(count) entries: \(message(archive))")
            }
            count += 1
            let name = archive_entry_pathname(entry).map { String(cString: $0) } ?? ""
            let shown = InertText.escape(name)
            guard count <= Limits.entries else { throw Failure("\(path) holds more than \(Limits.entries) entries") }
            let relative = try checkedPath(name, shown: shown)
            let mode = archive_entry_mode(entry)
            if archive_entry_hardlink(entry) != nil || archive_entry_symlink(entry) != nil {
                throw Failure("entry '\(shown)' is a link: packages hold regular files and directories only")
            }
            guard mode & 0o7000 == 0 else { throw Failure("entry '\(shown)' has a setuid, setgid or sticky bit") }
            switch mode & S_IFMT {
            case S_IFDIR:
                try body(archive, Item(relative: relative, shown: shown, isDirectory: true, size: 0, executable: false))
            case S_IFREG:
                let size = archive_entry_size(entry)
                guard archive_entry_size_is_set(entry) != 0, size >= 0, size <= Limits.entryBytes else {
                    throw Failure("entry '\(shown)' is larger than \(Limits.entryBytes) bytes")
                }
                total += size
                guard total <= Limits.totalBytes else { throw Failure("\(path) unpacks to more than \(Limits.totalBytes) bytes") }
                try body(archive, Item(relative: relative, shown: shown, isDirectory: false, size: size, executable: mode & 0o100 != 0))
            default:
                throw Failure("entry '\(shown)' is not a regular file or a directory (a device, fifo or socket)")
            }
        }
        guard count > 0 else { throw Failure("\(path) is empty") }
    }

    /// Unpacks the package at `path` into `directory` (new, empty, the caller's own). Nothing is
    /// written until a first pass, which writes nothing, has checked every header and the
    /// publisher's signature against the digest of the bytes the archive holds: a package that
    /// is unsigned, whose signature does not hold, or that is larger than the caps writes not a
    /// byte (a gzip bomb costs the time to decompress it, not the disk).
    package static func unpack(_ path: String, into directory: String) throws(Failure) {
        try checkSignature(path)
        try readEntries(path) { (archive, item) throws(Failure) in
            let target = directory + "/" + item.relative
            if item.isDirectory {
                try makeDirectories(directory, item.relative, shown: item.shown)
                return
            }
            if let slash = item.relative.lastIndex(of: "/") {
                try makeDirectories(directory, String(item.relative[..<slash]), shown: item.shown)
            }
            try extract(archive, size: item.size, to: target, executable: item.executable, shown: item.shown)
        }
    }

    /// The first pass: hashes every file as the archive holds it (no byte written), makes the
    /// bundle's digest as the unpacked bundle's would be, and checks the signature entry against
    /// it. Throws naming why the package would not install.
    private static func checkSignature(_ path: String) throws(Failure) {
        var files: [String: (digest: String, size: Int64, executable: Bool)] = [:]
        var directories: Set<String> = []
        var signature: [UInt8]?
        try readEntries(path) { (archive, item) throws(Failure) in
            // Directories the unpacking would make for a file's path count as entries too.
            var parent = item.isDirectory ? item.relative : ""
            if !item.isDirectory, let slash = item.relative.lastIndex(of: "/") { parent = String(item.relative[..<slash]) }
            while !parent.isEmpty {
                directories.insert(parent)
                parent = parent.lastIndex(of: "/").map { String(parent[..<$0]) } ?? ""
            }
            if item.isDirectory { return }
            guard files[item.relative] == nil, signature == nil || item.relative != BundleContents.signatureFileName else {
                throw Failure("cannot unpack entry '\(item.shown)': it appears twice in the package")
            }
            if item.relative == BundleContents.signatureFileName {
                guard item.size <= Int64(BundleSignature.maximumBytes) else {
                    throw Failure("\(BundleContents.signatureFileName) is larger than \(BundleSignature.maximumBytes) bytes")
                }
                var bytes: [UInt8] = []
                try readData(archive, size: item.size, shown: item.shown) { bytes += $0 }
                signature = bytes
                return
            }
            var stream = SHA256Stream()
            try readData(archive, size: item.size, shown: item.shown) { piece in piece.withUnsafeBytes { stream.update($0) } }
            files[item.relative] = (stream.finish(), item.size, item.executable)
        }
        guard let signature else {
            throw Failure(
                "\(path) carries no publisher signature; nothing was unpacked (sign the bundle with 'plugind sign' before 'plugind pack')")
        }
        guard let decoded = try? StrictJSONDecoder().decode(BundleSignature.self, from: signature) else {
            throw Failure("\(BundleContents.signatureFileName) in \(path) is not a plugind signature; nothing was unpacked")
        }
        let entries =
            directories.map { BundleDigest.ListedEntry.directory(path: $0) }
            + files.map { .file(path: $0.key, sha256: $0.value.digest, size: UInt64($0.value.size), executable: $0.value.executable) }
        let listing = BundleDigest.listing(entries)
        switch decoded.check(digest: SHA256Digest.hex(of: Data(listing.utf8))) {
        case .valid: return
        case .unsigned: throw Failure("\(path) carries no publisher signature; nothing was unpacked")
        case .invalid(let reason, _): throw Failure("the signature in \(path) is invalid (\(reason)); nothing was unpacked")
        }
    }

    /// Passes the entry's data, piece by piece, to `body`; refuses more or fewer bytes than the
    /// header declared.
    private static func readData(_ archive: OpaquePointer, size: Int64, shown: String, _ body: ([UInt8]) throws(Failure) -> Void)
        throws(Failure)
    {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var remaining = size
        while true {
            let count = archive_read_data(archive, &buffer, buffer.count)
            guard count >= 0 else { throw Failure("entry '\(shown)' is corrupt or truncated: \(message(archive))") }
            if count == 0 { break }
            guard Int64(count) <= remaining else { throw Failure("entry '\(shown)' holds more than its declared size") }
            try body(Array(buffer[..<count]))
            remaining -= Int64(count)
        }
        guard remaining == 0 else { throw Failure("entry '\(shown)' is truncated: \(remaining) of \(size) bytes missing") }
    }

    /// `name` as a relative path of at most `Limits.depth` components, none of them empty, "."
    /// or "..".
    private static func checkedPath(_ name: String, shown: String) throws(Failure) -> String {
        var path = name
        while path.hasSuffix("/") { path.removeLast() }
        if path.hasPrefix("./") { path.removeFirst(2) }
        guard !path.isEmpty, !path.hasPrefix("/") else { throw Failure("entry '\(shown)' has an absolute or empty path") }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            throw Failure("entry '\(shown)' leaves the bundle or has an empty component ('..', '.', '//')")
        }
        guard components.count <= Limits.depth, components.allSatisfy({ $0.utf8.count <= Limits.nameBytes }) else {
            throw Failure("entry '\(shown)' is nested too deep or has too long a name")
        }
        guard path.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
            throw Failure("entry '\(shown)' has control characters in its name")
        }
        return path
    }

    /// Creates each missing directory of `relative` under `root`. Never follows a symlink (none
    /// can exist: nothing but directories and regular files is ever created here).
    private static func makeDirectories(_ root: String, _ relative: String, shown: String) throws(Failure) {
        var path = root
        for component in relative.split(separator: "/") {
            path += "/" + component
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw Failure("cannot create the directory of entry '\(shown)': \(String(cString: strerror(errno)))")
            }
            var status = stat()
            guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
                throw Failure("entry '\(shown)' needs a directory where a file was unpacked")
            }
        }
    }

    private static func extract(_ archive: OpaquePointer, size: Int64, to target: String, executable: Bool, shown: String) throws(Failure) {
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, executable ? 0o755 : 0o644)
        guard fd >= 0 else {
            let reason = errno == EEXIST ? "it appears twice in the package" : String(cString: strerror(errno))
            throw Failure("cannot unpack entry '\(shown)': \(reason)")
        }
        defer { close(fd) }
        try readData(archive, size: size, shown: shown) { (piece) throws(Failure) in
            var offset = 0
            while offset < piece.count {
                let written = piece.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, piece.count - offset) }
                guard written > 0 else { throw Failure("cannot write entry '\(shown)': \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
        fchmod(fd, executable ? 0o755 : 0o644)
    }

    private static func message(_ archive: OpaquePointer) -> String {
        archive_error_string(archive).map { String(cString: $0) } ?? "unknown libarchive error"
    }
}

/// The signature file of a bundle as a package entry (it is not part of `BundleContents`).
enum BundleSignatureFile {
    package static func entry(in bundlePath: String) -> BundleContents.Entry? {
        let path = bundlePath + "/" + BundleContents.signatureFileName
        guard let status = FileStatus(path: path), status.mode & S_IFMT == S_IFREG else { return nil }
        return BundleContents.Entry(path: BundleContents.signatureFileName, kind: .file(isLoadable: false), status: status)
    }
}
