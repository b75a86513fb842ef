import CPlugindShims
import Glibc

/// A copy of a file in a sealed memfd: once sealed, nobody (this process, the worker, the file's
/// owner) can change its bytes. A launch hands the worker sealed copies of the plugin's libraries,
/// so that what runs is exactly what the host read and hashed.
package enum SealedFile {
    /// Copies what `source` reads, to its end, into a new memfd, passing every piece to `observe`
    /// (which hashes it) as it goes, then seals the copy. Refuses a source larger than
    /// `maximumBytes`. Returns the sealed copy (close-on-exec) and its size.
    package static func copy(
        from source: FileDescriptor,
        name: String,
        maximumBytes: UInt64,
        observe: (UnsafeRawBufferPointer) -> Void
    ) throws(SystemError) -> (FileDescriptor, UInt64) {
        var raw: CInt = -1
        // memfd names are capped at 249 bytes; the name only helps someone reading /proc.
        try checkShim("memfd_create", plugind_shim_sealed_file_create(String(name.utf8.prefix(200)) ?? "plugind", &raw))
        let copy = FileDescriptor(rawValue: raw)
        do throws(SystemError) {
            var total: UInt64 = 0
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                let count = try source.read(into: buffer)
                if count == 0 { break }
                total += UInt64(count)
                guard total <= maximumBytes else { throw SystemError("copy \(name)", Errno(rawValue: EFBIG)) }
                let piece = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                observe(piece)
                try copy.writeAll(piece)
            }
            try checkShim("seal \(name)", plugind_shim_sealed_file_seal(copy.rawValue))
            return (copy, total)
        } catch {
            copy.close()
            throw error
        }
    }
}

extension SealedFile {
    /// A sealed, execute-only copy of the executable at `path`, for `SpawnRequest.executableDescriptor`.
    /// A process that executes an image it may not read is not dumpable from its first
    /// instruction: between its exec and its own `PR_SET_DUMPABLE` call, nobody of its uid can
    /// trace it (only a caller with CAP_DAC_OVERRIDE, such as root, can read the copy).
    package static func executableCopy(of path: String, maximumBytes: UInt64 = 1 << 30) throws(SystemError) -> FileDescriptor {
        let source = try FileDescriptor.open(path, O_RDONLY)
        defer { source.close() }
        let (copy, _) = try SealedFile.copy(from: source, name: "plugind-worker", maximumBytes: maximumBytes) { _ in }
        do throws(SystemError) {
            try checkShim("chmod \(path)'s copy", plugind_shim_sealed_file_restrict_to_execution(copy.rawValue))
        } catch {
            copy.close()
            throw error
        }
        return copy
    }

    /// Replaces the sealed copy at `descriptor` with one this process alone holds (same number
    /// and close-on-exec flag, another inode), read without moving the shared file position.
    package static func makePrivate(_ descriptor: FileDescriptor) throws(SystemError) {
        try checkShim("copy a sealed file", plugind_shim_sealed_file_make_private(descriptor.rawValue))
    }
}

extension FileDescriptor {
    /// Opens `path` beneath the open directory `directory` without following any symlink (a
    /// component that is one fails with ELOOP) and without climbing out of it.
    package static func open(beneath directory: FileDescriptor, _ path: String, _ flags: CInt) throws(SystemError) -> FileDescriptor {
        var raw: CInt = -1
        try checkShim("open \(path)", plugind_shim_open_beneath(directory.rawValue, path, flags, &raw))
        return FileDescriptor(rawValue: raw)
    }
}
