import CPlugindShims
import Glibc

/// Replacing a file whole, so that a reader sees the old contents or the new, never a mix, and a
/// crash never loses the previous version.
package enum AtomicFile {
    /// Replaces `path` with `bytes`: a new file beside it (created exclusively, close-on-exec, with
    /// `mode`), written and synced, renamed over `path`; then the directory is synced, so that
    /// the rename itself survives a crash. Concurrent replacers never share a temporary file.
    package static func replace(_ path: String, with bytes: [UInt8], mode: UInt32 = 0o600) throws(SystemError) {
        var template = Array((path + ".XXXXXX").utf8CString)
        var fd: CInt = -1
        try checkShim("mkostemp", template.withUnsafeMutableBufferPointer { plugind_shim_make_temporary_file($0.baseAddress!, &fd) })
        let file = FileDescriptor(rawValue: fd)
        let temporary = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var renamed = false
        defer {
            file.close()
            if !renamed { unlink(temporary) }
        }
        try file.writeAll(bytes)
        guard fchmod(fd, mode_t(mode)) == 0 else { throw SystemError("fchmod", .current) }
        guard fsync(fd) == 0 else { throw SystemError("fsync", .current) }
        guard rename(temporary, path) == 0 else { throw SystemError("rename", .current) }
        renamed = true
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        if let handle = try? FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY) {
            _ = fsync(handle.rawValue)
            handle.close()
        }
    }

    /// Swaps what `first` and `second` name in one step (both must exist): a directory replaced
    /// this way is the old one or the new one to every reader and after any crash, never absent.
    package static func exchange(_ first: String, _ second: String) throws(SystemError) {
        try checkShim("renameat2(RENAME_EXCHANGE)", plugind_shim_exchange_paths(first, second))
    }
}
