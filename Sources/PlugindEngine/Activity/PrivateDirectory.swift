import Glibc

/// Directories plugind makes for a user's own records (logs, activity, statistics pages).
enum PrivateDirectory {
    /// Makes `path` and every missing directory above it, each 0700; true when `path` is a
    /// directory afterwards.
    static func make(_ path: String) -> Bool {
        if mkdir(path, 0o700) == 0 || errno == EEXIST { return true }
        guard errno == ENOENT else { return false }
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard !parent.isEmpty, make(parent) else { return false }
        return mkdir(path, 0o700) == 0 || errno == EEXIST
    }
}
