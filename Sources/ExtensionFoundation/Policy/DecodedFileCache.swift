import PlugindBundle
import PlugindWire
import Synchronization

/// Decoded contents of the small files read at every launch and scan (policy files, the crash
/// log), kept by file identity: while a file's device, inode, size and times are unchanged, it
/// is neither read nor decoded again. Every writer replaces these files by rename or rewrites
/// them in place, and either changes the identity. A missing file is remembered as missing.
final class DecodedFileCache<Value: Sendable>: Sendable {
    private struct Entry {
        var identity: FileIdentity?
        var value: Value
    }

    private let entries = Mutex<[String: Entry]>([:])

    /// The decoded contents of `path`, from `decode` when the file changed since last time.
    func value(at path: String, decode: (String) -> Value) -> Value {
        let identity = FileStatus(path: path)?.identity
        if let cached = entries.withLock({ $0[path] }), cached.identity == identity { return cached.value }
        let value = decode(path)
        // Kept only if the file did not change while it was read.
        if FileStatus(path: path)?.identity == identity {
            entries.withLock { $0[path] = Entry(identity: identity, value: value) }
        }
        return value
    }
}
