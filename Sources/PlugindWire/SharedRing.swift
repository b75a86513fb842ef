package import PlugindSystem

/// Where one ring lies in the shared memory (`SharedMemoryLayout`): its words, each on a cache
/// line of its own (a side's stores to its word then never slow the other side's loads of its
/// own), and its bytes.
package struct SharedRingLayout: Equatable, Sendable {
    package let wordsOffset: Int
    package let bytesOffset: Int
    /// A power of two, so that positions map to offsets with a mask.
    package let capacity: Int

    package init(wordsOffset: Int, bytesOffset: Int, capacity: Int) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "a ring's capacity is a power of two")
        self.wordsOffset = wordsOffset
        self.bytesOffset = bytesOffset
        self.capacity = capacity
    }

    /// Bytes written so far (64 bits, written by the producer only).
    var headOffset: Int { wordsOffset }
    /// Bytes read so far (64 bits, written by the consumer only).
    var tailOffset: Int { wordsOffset + 64 }
    /// Nonzero while the consumer polls the ring: the producer need not wake it (32 bits, the
    /// consumer's).
    var pollingOffset: Int { wordsOffset + 128 }
    /// 1 once the producer sent a wake-up the consumer has not taken yet (32 bits, both).
    var wakePendingOffset: Int { wordsOffset + 192 }
    /// 1 while the producer waits for room (32 bits: the producer sets it, the consumer clears it
    /// and wakes the producer).
    var producerWaitingOffset: Int { wordsOffset + 256 }
}

/// A ring in shared memory that carries one direction's byte stream of frames, as a pipe would,
/// without a system call while the consumer is awake. Each side keeps its own position and only
/// publishes it; the other side's published position is untrusted (the other process may be
/// hostile) and checked on every read of it, so that the worst a hostile peer achieves is a
/// `SharedRingError` (a protocol violation) or silence (a timeout), never a read or write outside
/// the ring. What a consumer reads is copied out before it is decoded.
///
/// Wake-ups: a consumer that polls says so (`setPolling`), and the producer then sends none. A
/// consumer about to sleep clears that, fences, and looks once more (`mayWait`); a producer
/// publishes its bytes, fences, and sends a wake-up when the consumer does not poll and none is
/// pending (`consumerNeedsWake`). With the fences on both sides one of them sees the other: no
/// wake-up is lost. How a wake-up travels is the caller's (a frame on the pipe, which the
/// host's event loop already waits on and which tells either side when the other is gone).
package struct SharedRingProducer: Sendable {
    package let memory: SharedMemory
    package let layout: SharedRingLayout
    /// Bytes written so far, published or not.
    private var head: UInt64 = 0
    /// Bytes published to the consumer.
    private var published: UInt64 = 0

    package init(memory: SharedMemory, layout: SharedRingLayout) {
        self.memory = memory
        self.layout = layout
    }

    /// Free bytes, as the consumer's published position says.
    package func room() throws(SharedRingError) -> Int {
        let tail = memory.loadCounter(at: layout.tailOffset)
        let used = published &- tail
        guard used <= UInt64(layout.capacity) else {
            throw SharedRingError("the reader's position \(tail) is not within \(layout.capacity) bytes behind the writer's \(published)")
        }
        // A reader that moves its position back while bytes wait unpublished would make this
        // negative: no room, never a negative count.
        return max(0, layout.capacity - Int(used) - Int(head - published))
    }

    /// Copies as much of `bytes` as there is room for, unpublished; returns the count.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) throws(SharedRingError) -> Int {
        let count = min(bytes.count, try room())
        guard count > 0, let source = bytes.baseAddress else { return 0 }
        let start = Int(head & UInt64(layout.capacity - 1))
        let first = min(count, layout.capacity - start)
        _ = memory.copy(UnsafeRawBufferPointer(start: source, count: first), to: layout.bytesOffset + start)
        if first < count {
            _ = memory.copy(UnsafeRawBufferPointer(start: source + first, count: count - first), to: layout.bytesOffset)
        }
        head += UInt64(count)
        return count
    }

    /// Makes what was appended visible to the consumer.
    package mutating func publish() {
        guard head != published else { return }
        published = head
        memory.storeCounter(published, at: layout.headOffset)
    }

    /// After `publish`: whether the consumer must be woken, because it does not poll and no
    /// wake-up is pending. True claims the wake-up: the caller must send it.
    package func consumerNeedsWake() -> Bool {
        SharedMemory.fence()
        guard memory.loadWord(at: layout.pollingOffset) == 0 else { return false }
        return memory.exchangeWord(1, at: layout.wakePendingOffset) == 0
    }

    /// Asks the consumer to wake this side once it has read something; true when there is room
    /// already (nothing to wait for, and the request is withdrawn).
    package func announceWaitingForRoom() throws(SharedRingError) -> Bool {
        memory.storeWord(1, at: layout.producerWaitingOffset)
        SharedMemory.fence()
        guard try room() > 0 else { return false }
        memory.storeWord(0, at: layout.producerWaitingOffset)
        return true
    }

    /// Sleeps until the consumer wakes this side after `announceWaitingForRoom`, at most
    /// `timeoutMicroseconds` (the other process may never wake it).
    package func waitForRoom(timeoutMicroseconds: UInt32) {
        memory.waitWhileWord(at: layout.producerWaitingOffset, is: 1, timeoutMicroseconds: timeoutMicroseconds)
    }
}

/// The reading side of a ring (see `SharedRingProducer`).
package struct SharedRingConsumer: Sendable {
    package let memory: SharedMemory
    package let layout: SharedRingLayout
    /// Bytes read so far.
    private var tail: UInt64 = 0

    package init(memory: SharedMemory, layout: SharedRingLayout) {
        self.memory = memory
        self.layout = layout
    }

    /// Bytes waiting, as the producer's published position says.
    package func available() throws(SharedRingError) -> Int {
        let head = memory.loadCounter(at: layout.headOffset)
        let waiting = head &- tail
        guard waiting <= UInt64(layout.capacity) else {
            throw SharedRingError("the writer's position \(head) is not within \(layout.capacity) bytes ahead of the reader's \(tail)")
        }
        return Int(waiting)
    }

    /// Copies what is waiting into `destination`, as much as fits, and publishes the new
    /// position; returns the count.
    package mutating func read(into destination: UnsafeMutableRawBufferPointer) throws(SharedRingError) -> Int {
        let count = min(destination.count, try available())
        guard count > 0, let target = destination.baseAddress else { return 0 }
        let start = Int(tail & UInt64(layout.capacity - 1))
        let first = min(count, layout.capacity - start)
        if let source = memory.bytes(at: layout.bytesOffset + start, count: first) {
            target.copyMemory(from: source.baseAddress!, byteCount: first)
        }
        if first < count, let source = memory.bytes(at: layout.bytesOffset, count: count - first) {
            (target + first).copyMemory(from: source.baseAddress!, byteCount: count - first)
        }
        tail += UInt64(count)
        memory.storeCounter(tail, at: layout.tailOffset)
        return count
    }

    /// After `read`: whether the producer waits for room and must be woken. True claims it: the
    /// caller must wake the producer.
    package func producerNeedsWake() -> Bool {
        SharedMemory.fence()
        return memory.loadWord(at: layout.producerWaitingOffset) != 0 && memory.exchangeWord(0, at: layout.producerWaitingOffset) != 0
    }

    /// Wakes the producer after `producerNeedsWake` said so.
    package func wakeProducer() {
        memory.wakeWord(at: layout.producerWaitingOffset)
    }

    /// How far this side has read: its own count, which the copy in the shared memory only
    /// publishes.
    package var readPosition: UInt64 { tail }

    /// Whether bytes wait past `readPosition`, the reader's own count (a copy of this consumer
    /// may hold an older one), by the writer's published position: a hint for a poller that does
    /// not hold the reading consumer (`read` checks the position again). Never the read
    /// position's copy in the shared memory, which the other process can overwrite: a forged one
    /// made every look see input that no read could take, and the lookers spin.
    package func hasInput(past readPosition: UInt64) -> Bool {
        memory.loadCounter(at: layout.headOffset) != readPosition
    }

    /// Says whether this side polls the ring, so that the producer sends no wake-up meanwhile.
    package func setPolling(_ polling: Bool) {
        memory.storeWord(polling ? 1 : 0, at: layout.pollingOffset)
    }

    /// Before sleeping until a wake-up: stops polling and looks once more. False when bytes
    /// arrived meanwhile (read them instead of sleeping).
    package func mayWait() throws(SharedRingError) -> Bool {
        setPolling(false)
        SharedMemory.fence()
        return try available() == 0
    }

    /// A wake-up arrived: the next one the producer needs it sends. Read the ring after this.
    package func wakeTaken() {
        memory.storeWord(0, at: layout.wakePendingOffset)
        SharedMemory.fence()
    }
}

/// A ring in a state no honest peer leaves it in.
package struct SharedRingError: Error, Equatable, Sendable, CustomStringConvertible {
    package let reason: String

    package init(_ reason: String) {
        self.reason = reason
    }

    package var description: String { "the shared-memory ring is in an impossible state: \(reason)" }
}
