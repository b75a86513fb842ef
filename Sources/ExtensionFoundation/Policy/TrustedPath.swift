import Glibc
import PlugindBundle

/// Whether a file plugind takes decisions from (a policy file, the crash log) can be trusted:
/// the file and every directory above it (symlinks resolved) must belong to the user or root and
/// be writable by nobody else. A directory others may write is accepted only when it is owned by
/// root and has the sticky bit (/tmp), where nobody can replace entries of another user. This is
/// the rule OpenSSH applies to authorized_keys. Checked on every read: a directory's mode can
/// change without the file's identity changing.
package enum TrustedPath {
    /// Why `path` cannot be trusted, naming the file or directory at fault and the fix; nil when
    /// it can. A file that does not exist yet is judged by the directories that would hold it.
    package static func problem(_ path: String) -> String? {
        var existing = path
        var status = stat()
        while lstat(existing, &status) != 0 {
            guard errno == ENOENT, existing != "/" else { return "\(path) cannot be examined: \(String(cString: strerror(errno)))" }
            existing = parent(of: existing)
        }
        guard let resolved = canonicalPath(existing) else { return "\(existing) cannot be resolved" }
        var current = resolved
        while true {
            guard stat(current, &status) == 0 else { return "\(current) cannot be examined: \(String(cString: strerror(errno)))" }
            if let reason = problem(with: status) {
                return "\(current) \(reason), so another user could change what plugind decides; fix it with 'chmod go-w \(current)'"
                    + (status.st_uid != geteuid() && status.st_uid != 0 ? " and 'chown \(geteuid()) \(current)'" : "")
            }
            if current == "/" { return nil }
            current = parent(of: current)
        }
    }

    private static func problem(with status: stat) -> String? {
        let file = FileStatus(status)
        if let owner = file.foreignOwnerProblem { return owner }
        let sharedAndSticky = file.isDirectory && status.st_uid == 0 && status.st_mode & S_ISVTX != 0
        return sharedAndSticky ? nil : file.writableByOthersProblem
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
