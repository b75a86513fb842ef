import Glibc

/// A NUL-terminated copy of a string that a handle owns, for the `const char *` the C API hands
/// out: valid until the handle is released.
final class OwnedCString: @unchecked Sendable {
    // Written once in init and only read after: safe to share.
    let pointer: UnsafeMutablePointer<CChar>?

    init(_ text: String) {
        pointer = strdup(text)
    }

    deinit {
        free(pointer)
    }

    var constPointer: UnsafePointer<CChar>? { pointer.map { UnsafePointer($0) } }
}

/// A copy of `bytes` in memory from `malloc`, the caller's to free with `plugind_bytes_free`;
/// never NULL for an empty reply (one byte is allocated), nil only when memory ran out.
func mallocCopy(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8>? {
    guard let memory = malloc(max(bytes.count, 1))?.assumingMemoryBound(to: UInt8.self) else { return nil }
    bytes.withUnsafeBufferPointer { buffer in
        if let base = buffer.baseAddress { memory.update(from: base, count: buffer.count) }
    }
    return memory
}

/// The bytes a C caller passed: nil when a non-empty buffer is NULL.
func copiedBytes(_ bytes: UnsafePointer<UInt8>?, _ length: Int) -> [UInt8]? {
    guard length > 0 else { return [] }
    guard let bytes else { return nil }
    return Array(UnsafeBufferPointer(start: bytes, count: length))
}

/// A C string argument as Swift text: nil for NULL or bytes that are not UTF-8.
func text(_ string: UnsafePointer<CChar>?) -> String? {
    guard let string else { return nil }
    return String(validatingCString: string)
}
