import Glibc

/// How `FileDescriptor.open` opens a file: `open(2)`'s flags by name, so that callers outside this
/// module need no Glibc. Close-on-exec is always added.
package struct OpenOptions: OptionSet, Sendable {
    package var rawValue: CInt

    package init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    package static var readOnly: OpenOptions { OpenOptions(rawValue: O_RDONLY) }
    package static var writeOnly: OpenOptions { OpenOptions(rawValue: O_WRONLY) }
    package static var readWrite: OpenOptions { OpenOptions(rawValue: O_RDWR) }
    /// Fails unless the path is a directory.
    package static var directory: OpenOptions { OpenOptions(rawValue: O_DIRECTORY) }
    /// Fails when the last component is a symlink.
    package static var noFollow: OpenOptions { OpenOptions(rawValue: O_NOFOLLOW) }
    package static var nonBlocking: OpenOptions { OpenOptions(rawValue: O_NONBLOCK) }
}

extension FileDescriptor {
    /// Opens `path` with close-on-exec set. Wraps `open(2)`.
    package static func open(_ path: String, _ options: OpenOptions) throws(SystemError) -> FileDescriptor {
        try open(path, options.rawValue)
    }

    /// Opens `path` beneath `directory` without following any symlink (see the flags variant).
    package static func open(beneath directory: FileDescriptor, _ path: String, _ options: OpenOptions) throws(SystemError)
        -> FileDescriptor
    {
        try open(beneath: directory, path, options.rawValue)
    }
}
