import Glibc

/// The response a plugin builds through `append` and `reserve`, bounded by the plugin's message
/// limit. The plugin sees it as an opaque `plugind_plugin_response *`. It starts in the worker's
/// shared-memory region when that is free, so a large response is written where the host reads
/// it, without another copy; it moves to worker-owned memory if it outgrows the region.
final class ResponseBuffer {
    private var heap: UnsafeMutableRawPointer?
    private var heapCapacity = 0
    /// The shared region offered for the current response, if any.
    private var sharedRegion: UnsafeMutableRawBufferPointer?
    /// Whether the bytes so far are in `sharedRegion` (else in `heap`).
    private(set) var isInSharedRegion = false
    private(set) var count = 0
    let limit: Int
    /// Set when the plugin tried to grow the response past `limit`.
    private(set) var attemptedSize: Int?
    private(set) var errorMessage: String?

    init(limit: Int) {
        self.limit = limit
    }

    deinit {
        free(heap)
    }

    private var storage: UnsafeMutableRawPointer? {
        isInSharedRegion ? sharedRegion?.baseAddress : heap
    }

    private var capacity: Int {
        isInSharedRegion ? min(sharedRegion?.count ?? 0, limit) : heapCapacity
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
            if isInSharedRegion {
                // Outgrew the shared region: continue in worker memory.
                if newCapacity > heapCapacity {
                    guard let grown = realloc(heap, max(newCapacity, 1)) else { return nil }
                    heap = grown
                    heapCapacity = newCapacity
                }
                if let heap, let shared = sharedRegion?.baseAddress, count > 0 { heap.copyMemory(from: shared, byteCount: count) }
                isInSharedRegion = false
            } else {
                guard let grown = realloc(heap, max(newCapacity, 1)) else { return nil }
                heap = grown
                heapCapacity = newCapacity
            }
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

    /// Forgets everything, keeping the memory for the next request. The next response starts in
    /// `sharedRegion` when one is given.
    func reset(sharedRegion: UnsafeMutableRawBufferPointer? = nil) {
        count = 0
        attemptedSize = nil
        errorMessage = nil
        self.sharedRegion = sharedRegion
        isInSharedRegion = sharedRegion != nil
    }

    var opaque: OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
    }

    static func from(_ opaque: OpaquePointer) -> ResponseBuffer {
        Unmanaged<ResponseBuffer>.fromOpaque(UnsafeRawPointer(opaque)).takeUnretainedValue()
    }
}
