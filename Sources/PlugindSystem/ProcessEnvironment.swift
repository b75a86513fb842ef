import Glibc

/// What the running process knows about where it is: its variables and its own executable.
package enum ProcessEnvironment {
    /// One variable, read on its own: the whole environment as a dictionary would be built on a
    /// launch's path for one value. Wraps `getenv(3)`.
    package static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// The running executable's path, symlinks resolved (`/proc/self/exe`); nil when the kernel
    /// cannot say (the file was deleted or replaced since it started).
    package static var executablePath: String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX) + 1) { buffer in
            guard let base = buffer.baseAddress else { return nil }
            let count = readlink("/proc/self/exe", base, buffer.count - 1)
            guard count > 0 else { return nil }
            base[count] = 0
            let path = String(cString: base)
            return path.hasSuffix(" (deleted)") ? nil : path
        }
    }

    /// Whether `path` is a regular file this process may execute. Wraps `stat(2)` and `access(2)`.
    package static func isExecutableFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }
}
