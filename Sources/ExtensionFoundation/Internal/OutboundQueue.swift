/// Bytes for the worker that the pipe did not take yet, in order.
struct OutboundQueue: Sendable {
    private var chunks: [[UInt8]] = []
    private var head = 0
    /// Bytes of `chunks[head]` already written.
    private var offset = 0

    var isEmpty: Bool { head == chunks.count }

    /// Queues `header` and `payload` minus the first `written` bytes of the two together.
    mutating func append(_ header: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer, skipping written: Int) {
        if written < header.count {
            chunks.append(Array(header[written...]))
            if !payload.isEmpty { chunks.append(Array(payload)) }
        } else if written - header.count < payload.count {
            chunks.append(Array(payload[(written - header.count)...]))
        }
    }

    /// Calls `body` with the oldest unwritten bytes.
    func withFirstChunk<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        chunks[head].withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
    }

    /// Marks `count` bytes of the first chunk as written.
    mutating func consume(_ count: Int) {
        offset += count
        if offset == chunks[head].count {
            head += 1
            offset = 0
            if head == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                head = 0
            }
        }
    }

    mutating func removeAll() {
        chunks.removeAll()
        head = 0
        offset = 0
    }
}
