import PlugindBundle
import PlugindSystem
import PlugindWire

/// Decoded contents of the small files read at every launch and scan (policy files, the crash
/// log), kept by file identity: while a file's device, inode, size and times are unchanged, it
/// is neither read nor decoded again. Every writer replaces these files by rename or rewrites
/// them in place, and either changes the identity. A missing file is remembered as missing; a
/// file that exists but could not be read (no descriptors left, an I/O error) is not remembered
/// at all, so that a passing failure never outlives itself.
final class DecodedFileCache<Value: Sendable>: Sendable {
    private struct Entry {
        var identity: FileIdentity?
        var value: Value
    }

    private let entries = Locked<[String: Entry]>([:])

    /// What `decode` made of a file.
    enum Decoded {
        /// From the file's bytes (well-formed or not), or its absence: may be remembered.
        case contents(Value)
        /// The file could not be read: used this once.
        case unreadable(Value)
    }

    /// The decoded contents of `path`, from `decode` when the file changed since last time.
    func value(at path: String, decode: (String) -> Decoded) -> Value {
        let identity = FileStatus(path: path)?.identity
        if let cached = entries.withLock({ $0[path] }), cached.identity == identity { return cached.value }
        switch decode(path) {
        case .unreadable(let value):
            return value
        case .contents(let value):
            // Kept only if the file did not change while it was read.
            if FileStatus(path: path)?.identity == identity {
                entries.withLock { $0[path] = Entry(identity: identity, value: value) }
            }
            return value
        }
    }
}
