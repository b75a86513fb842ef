import Glibc

/// The subdirectories of a directory, from one `readdir` pass: the entry type the file system
/// reports spares a `stat` per entry, which matters in a root holding thousands of bundles.
package enum DirectoryListing {
    /// Names of the directories (or symlinks to directories) directly inside `path`, sorted,
    /// hidden ones left out. Empty when `path` cannot be read.
    package static func subdirectoryNames(of path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard !name.hasPrefix(".") else { continue }
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_DIR):
                names.append(name)
            case Int32(DT_LNK), Int32(DT_UNKNOWN):
                // Some file systems do not report types, and a symlink may point at a directory.
                if FileStatus(path: path + "/" + name)?.isDirectory == true { names.append(name) }
            default:
                continue
            }
        }
        return names.sorted()
    }
}
