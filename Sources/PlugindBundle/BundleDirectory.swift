import Glibc
import PlugindSystem

/// A bundle directory opened once for its inspection: the descriptor every file of it is examined
/// through, its canonical path and its status.
struct BundleDirectory {
    let descriptor: CInt
    /// Canonical: symlinks and `..` resolved.
    let path: String
    let status: FileStatus

    /// The bundle directory at `path`, which may lead through symlinks.
    static func open(_ path: String) -> Result<BundleDirectory, Errno> {
        guard let canonical = canonicalPath(path) else { return .failure(.current) }
        return open(canonical: canonical, relativeTo: AT_FDCWD, as: canonical)
    }

    /// The bundle directory `name` in `directory`, itself canonical and open as `descriptor`
    /// (unless that is negative): opened as it is when it is a plain entry, which is the usual
    /// case and spares the path walks of `realpath` and of an absolute path.
    static func open(_ name: String, inCanonicalDirectory directory: String, descriptor: CInt) -> Result<BundleDirectory, Errno> {
        let path = directory + "/" + name
        guard !name.contains("/"), name != ".", name != ".." else { return open(path) }
        switch open(canonical: path, relativeTo: descriptor >= 0 ? descriptor : AT_FDCWD, as: descriptor >= 0 ? name : path) {
        case .success(let bundle): return .success(bundle)
        // Not followed: a symlink (ENOTDIR with O_DIRECTORY, ELOOP without), resolved first.
        case .failure(let error) where error.rawValue == ENOTDIR || error.rawValue == ELOOP: return open(path)
        case .failure(let error): return .failure(error)
        }
    }

    /// Opens `relativePath` in `directory`, whose canonical path is `path`.
    private static func open(canonical path: String, relativeTo directory: CInt, as relativePath: String) -> Result<
        BundleDirectory, Errno
    > {
        let descriptor = openat(directory, relativePath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(.current) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let error = Errno.current
            close(descriptor)
            return .failure(error)
        }
        return .success(BundleDirectory(descriptor: descriptor, path: path, status: FileStatus(status)))
    }

    /// The canonical path of `relativePath` inside the bundle, nil when it does not exist; with
    /// its status when it is a plain entry that is not a symlink (the usual library, found with
    /// one `fstatat`, whose status is the file's).
    func canonicalEntry(_ relativePath: String) -> (path: String, status: FileStatus?)? {
        let full = path + "/" + relativePath
        guard !relativePath.contains("/"), relativePath != ".", relativePath != ".." else {
            return canonicalPath(full).map { ($0, nil) }
        }
        var status = stat()
        guard fstatat(descriptor, relativePath, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        guard status.st_mode & S_IFMT != S_IFLNK else { return canonicalPath(full).map { ($0, nil) } }
        return (full, FileStatus(status))
    }
}
