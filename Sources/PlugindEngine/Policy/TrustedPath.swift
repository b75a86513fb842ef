import PlugindBundle
import PlugindSystem

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
        while case .failure(let error) = FileStatus.examining(existing, followingLinks: false) {
            guard error == .noSuchFileOrDirectory, existing != "/" else { return "\(path) cannot be examined: \(error)" }
            existing = parent(of: existing)
        }
        guard let resolved = canonicalPath(existing) else { return "\(existing) cannot be resolved" }
        var current = resolved
        while true {
            let status: FileStatus
            switch FileStatus.examining(current, followingLinks: true) {
            case .success(let found): status = found
            case .failure(let error): return "\(current) cannot be examined: \(error)"
            }
            if let reason = problem(with: status) {
                let user = effectiveUserID
                return "\(current) \(reason), so another user could change what plugind decides; fix it with 'chmod go-w \(current)'"
                    + (status.owner != user && status.owner != 0 ? " and 'chown \(user) \(current)'" : "")
            }
            if current == "/" { return nil }
            current = parent(of: current)
        }
    }

    private static func problem(with file: FileStatus) -> String? {
        if let owner = file.foreignOwnerProblem { return owner }
        let sharedAndSticky = file.isDirectory && file.owner == 0 && file.isSticky
        return sharedAndSticky ? nil : file.writableByOthersProblem
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
