import Glibc

/// The response a plugin builds through `append` and `reserve`: worker-owned memory, bounded by
/// the plugin's message limit. The plugin sees it as an opaque `plugind_plugin_response *`.
final class ResponseBuffer {
    private(set) var storage: UnsafeMutableRawPointer?
    private(set) var count = 0
    private var capacity = 0
    let limit: Int
    /// Set when the plugin tried to grow the response past `limit`.
    private(set) var attemptedSize: Int?
    private(set) var errorMessage: String?

    init(limit: Int) {
        self.limit = limit
    }

    deinit {
        free(storage)
    }

    var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage, count: count)
    }

    /// Room for `length` more bytes at the end, or nil past the limit or out of memory.
    func reserve(_ length: Int) -> UnsafeMutableRawPointer? {
        let (needed, overflow) = count.addingReportingOverflow(length)
        guard !overflow, needed <= limit else {
            attemptedSize = overflow ? Int.max : needed
            return nil
        }
        if needed > capacity {
            let newCapacity = min(max(needed, capacity * 2, 4096), limit)
            guard let grown = realloc(storage, max(newCapacity, 1)) else { return nil }
            storage = grown
            capacity = newCapacity
        }
        let start = storage.map { $0 + count }
        count = needed
        return start
    }

    /// Copies `length` bytes to the end. Returns 0, EMSGSIZE over the limit, ENOMEM.
    func append(_ bytes: UnsafeRawPointer?, _ length: Int) -> Int32 {
        if length == 0 { return 0 }
        guard let bytes else { return EINVAL }
        guard let destination = reserve(length) else { return attemptedSize != nil ? EMSGSIZE : ENOMEM }
        destination.copyMemory(from: bytes, byteCount: length)
        return 0
    }

    func setError(_ message: String) {
        errorMessage = message
    }

    /// Forgets everything, keeping the memory for the next request.
    func reset() {
        count = 0
        attemptedSize = nil
        errorMessage = nil
    }

    var opaque: OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
    }

    static func from(_ opaque: OpaquePointer) -> ResponseBuffer {
        Unmanaged<ResponseBuffer>.fromOpaque(UnsafeRawPointer(opaque)).takeUnretainedValue()
    }
}
