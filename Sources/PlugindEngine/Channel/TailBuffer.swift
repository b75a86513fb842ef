/// Keeps the last `capacity` bytes written to it: the worker's stdout and stderr, shown with
/// errors, however much the plugin prints.
struct TailBuffer: Sendable {
    let capacity: Int
    private var storage: [UInt8] = []
    private var start = 0

    init(capacity: Int) {
        self.capacity = capacity
        storage.reserveCapacity(capacity)
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        var input = bytes.count > capacity ? UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - capacity)...]) : bytes
        if storage.count < capacity {
            let taken = min(capacity - storage.count, input.count)
            storage.append(contentsOf: input[..<taken])
            input = UnsafeRawBufferPointer(rebasing: input[taken...])
        }
        // Full: overwrite the oldest bytes, which start at `start`.
        while !input.isEmpty {
            let count = min(capacity - start, input.count)
            storage.withUnsafeMutableBytes { destination in
                UnsafeMutableRawBufferPointer(rebasing: destination[start..<start + count])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: input[..<count]))
            }
            start = (start + count) % capacity
            input = UnsafeRawBufferPointer(rebasing: input[count...])
        }
    }

    /// The kept bytes in order.
    var bytes: [UInt8] {
        Array(storage[start...] + storage[..<start])
    }

    /// The kept bytes as text, starting at a line boundary when one is near.
    var text: String {
        var kept = bytes
        if storage.count == capacity, let newline = kept.firstIndex(of: 0x0A), newline < 256 {
            kept.removeSubrange(...newline)
        }
        return String(decoding: kept, as: UTF8.self)
    }
}
