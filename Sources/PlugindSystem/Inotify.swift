import Glibc

/// An inotify instance, non-blocking and close-on-exec. Wraps `inotify_init1(2)`,
/// `inotify_add_watch(2)`, `inotify_rm_watch(2)` and the reads of its events.
package struct Inotify: Sendable {
    package let descriptor: FileDescriptor

    /// What a directory watch reports: entries created, deleted, moved in or out, written and
    /// closed, or changed in their attributes; the directory itself deleted or moved.
    package static let directoryChanges: UInt32 =
        UInt32(IN_CREATE) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM) | UInt32(IN_MOVED_TO) | UInt32(IN_CLOSE_WRITE)
        | UInt32(IN_ATTRIB) | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF)

    package init() throws(SystemError) {
        let fd = try retryingInterrupts("inotify_init1") { inotify_init1(CInt(IN_NONBLOCK | IN_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Watches `path` for `mask`; the watch's number, or nil when it cannot be watched (gone,
    /// not permitted, or the user's watch limit reached).
    package func addWatch(_ path: String, mask: UInt32) -> Int32? {
        let watch = inotify_add_watch(descriptor.rawValue, path, mask)
        return watch >= 0 ? watch : nil
    }

    package func removeWatch(_ watch: Int32) {
        _ = inotify_rm_watch(descriptor.rawValue, watch)
    }

    /// Reads every event waiting, without blocking, handing each read's bytes to `body`.
    package func drain(_ body: (ArraySlice<UInt8>) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }
            if count > 0 {
                body(buffer[..<count])
                continue
            }
            if count < 0 && errno == EINTR { continue }
            return
        }
    }

    /// One event of a read: its watch and the name it concerns (empty for the watched path
    /// itself).
    package struct Event: Equatable {
        package var watch: Int32
        package var name: String
    }

    /// The events in `bytes`, a read from an inotify descriptor; nil when they are malformed.
    package static func events(in bytes: ArraySlice<UInt8>) -> [Event]? {
        let headerSize = MemoryLayout<inotify_event>.size
        var events: [Event] = []
        var offset = bytes.startIndex
        while offset + headerSize <= bytes.endIndex {
            let (watch, nameLength) = bytes.withUnsafeBytes { raw in
                let start = offset - bytes.startIndex
                return (
                    raw.loadUnaligned(fromByteOffset: start, as: Int32.self),
                    Int(raw.loadUnaligned(fromByteOffset: start + 12, as: UInt32.self))
                )
            }
            let nameBytes = bytes[(offset + headerSize)..<min(offset + headerSize + nameLength, bytes.endIndex)]
            events.append(Event(watch: watch, name: String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)))
            offset += headerSize + nameLength
        }
        return offset == bytes.endIndex ? events : nil
    }
}
