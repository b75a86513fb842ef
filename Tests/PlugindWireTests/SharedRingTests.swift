import Foundation
import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Shared rings: the byte stream, its wake-ups, and a peer that lies about positions", .tags(.unit))
struct SharedRingTests {
    /// Two mappings of one memfd: the two processes' views of the same memory.
    private func sharedPair() throws -> (SharedMemory, SharedMemory) {
        let layout = SharedMemoryLayout(regionSize: 16 << 10)
        let (first, descriptor) = try SharedMemory.create(size: layout.totalSize)
        defer { descriptor.close() }
        return (first, try SharedMemory.map(descriptor))
    }

    private let layout = SharedMemoryLayout.toWorkerRing

    @Test("bytes written in pieces of every size come out in order, across many wrap-arounds, and never more than fit")
    func streamAcrossWraps() throws {
        let (writerView, readerView) = try sharedPair()
        var producer = SharedRingProducer(memory: writerView, layout: layout)
        var consumer = SharedRingConsumer(memory: readerView, layout: layout)
        let sent = (0..<(layout.capacity * 5 + 123)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        var received: [UInt8] = []
        var offset = 0
        var pieces = 0
        var buffer = [UInt8](repeating: 0, count: 7_777)
        while received.count < sent.count {
            let piece = 1 + (pieces * 997) % 9_000
            pieces += 1
            if offset < sent.count {
                let appended = try sent.withUnsafeBytes {
                    try producer.append(UnsafeRawBufferPointer(rebasing: $0[offset..<min(sent.count, offset + piece)]))
                }
                #expect(appended <= layout.capacity)
                offset += appended
                // Not published yet: the reader sees none of it.
                #expect(try consumer.available() == offset - appended - received.count)
                producer.publish()
            }
            #expect(try consumer.available() == offset - received.count)
            let take = 1 + (pieces * 389) % buffer.count
            let count = try buffer.withUnsafeMutableBytes { try consumer.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<take])) }
            received += buffer[..<count]
            #expect(try producer.room() == layout.capacity - (offset - received.count))
        }
        #expect(received == sent)
        #expect(pieces > 5)
    }

    @Test("a full ring takes nothing more; the reader's progress makes room, and a waiting writer learns of it once")
    func fullRingAndTheWaitingWriter() throws {
        let (writerView, readerView) = try sharedPair()
        var producer = SharedRingProducer(memory: writerView, layout: layout)
        var consumer = SharedRingConsumer(memory: readerView, layout: layout)
        let block = [UInt8](repeating: 0xAB, count: layout.capacity + 10)
        #expect(try block.withUnsafeBytes { try producer.append($0) } == layout.capacity)
        producer.publish()
        #expect(try block.withUnsafeBytes { try producer.append($0) } == 0)
        // The writer asks to be told; nothing has been read, so it must wait.
        #expect(try producer.announceWaitingForRoom() == false)
        var buffer = [UInt8](repeating: 0, count: 100)
        #expect(try buffer.withUnsafeMutableBytes { try consumer.read(into: $0) } == 100)
        #expect(buffer == [UInt8](repeating: 0xAB, count: 100))
        #expect(consumer.producerNeedsWake())
        #expect(!consumer.producerNeedsWake())
        #expect(try producer.room() == 100)
        // Room before the writer asks: it does not wait, and nobody is asked to wake it.
        #expect(try producer.announceWaitingForRoom())
        #expect(!consumer.producerNeedsWake())
    }

    @Test("one wake-up at a time, none while the reader polls, and none lost when the reader stops polling")
    func wakeUps() throws {
        let (writerView, readerView) = try sharedPair()
        var producer = SharedRingProducer(memory: writerView, layout: layout)
        var consumer = SharedRingConsumer(memory: readerView, layout: layout)
        let frame: [UInt8] = [1, 2, 3]
        _ = try frame.withUnsafeBytes { try producer.append($0) }
        producer.publish()
        #expect(producer.consumerNeedsWake())
        // Pending: the next write sends none.
        _ = try frame.withUnsafeBytes { try producer.append($0) }
        producer.publish()
        #expect(!producer.consumerNeedsWake())
        consumer.wakeTaken()
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(try buffer.withUnsafeMutableBytes { try consumer.read(into: $0) } == 6)
        #expect(try consumer.mayWait())
        // Polling: nothing to send.
        consumer.setPolling(true)
        _ = try frame.withUnsafeBytes { try producer.append($0) }
        producer.publish()
        #expect(!producer.consumerNeedsWake())
        // The reader stops polling and looks once more before it sleeps: it finds the bytes that
        // came without a wake-up.
        #expect(try consumer.mayWait() == false)
        #expect(try buffer.withUnsafeMutableBytes { try consumer.read(into: $0) } == 3)
        #expect(try consumer.mayWait())
        _ = try frame.withUnsafeBytes { try producer.append($0) }
        producer.publish()
        #expect(producer.consumerNeedsWake())
    }

    @Test("positions no honest peer publishes: an error for the side that reads them, never a read or write outside the ring")
    func impossiblePositions() throws {
        let (writerView, readerView) = try sharedPair()
        let head = layout.wordsOffset
        let tail = layout.wordsOffset + 64
        var consumer = SharedRingConsumer(memory: readerView, layout: layout)
        var buffer = [UInt8](repeating: 0, count: 64)
        for lie in [UInt64(layout.capacity + 1), .max, UInt64(1) << 63] {
            writerView.storeCounter(lie, at: head)
            #expect(throws: SharedRingError.self) { try consumer.available() }
            #expect(throws: SharedRingError.self) { try buffer.withUnsafeMutableBytes { try consumer.read(into: $0) } }
        }
        writerView.storeCounter(0, at: head)
        var producer = SharedRingProducer(memory: writerView, layout: layout)
        // The reader claims to have read bytes never written, or to be far behind.
        for lie in [UInt64(1), .max - UInt64(layout.capacity)] {
            readerView.storeCounter(lie, at: tail)
            #expect(throws: SharedRingError.self) { try producer.room() }
            #expect(throws: SharedRingError.self) { try buffer.withUnsafeBytes { try producer.append($0) } }
        }
    }

    @Test("a reader that moves its position back while bytes wait unpublished leaves no room, never a negative count")
    func roomNeverNegative() throws {
        let (writerView, readerView) = try sharedPair()
        var producer = SharedRingProducer(memory: writerView, layout: layout)
        var consumer = SharedRingConsumer(memory: readerView, layout: layout)
        let block = [UInt8](repeating: 0xCD, count: layout.capacity)
        #expect(try block.withUnsafeBytes { try producer.append($0) } == layout.capacity)
        producer.publish()
        var buffer = [UInt8](repeating: 0, count: 100)
        #expect(try buffer.withUnsafeMutableBytes { try consumer.read(into: $0) } == 100)
        #expect(try block.withUnsafeBytes { try producer.append(UnsafeRawBufferPointer(rebasing: $0[..<100])) } == 100)
        // Still within a ring's length behind the writer's published position, so not a lie the
        // position check catches; but 50 of the 100 bytes waiting unpublished no longer fit.
        readerView.storeCounter(50, at: layout.wordsOffset + 64)
        #expect(try producer.room() == 0)
        #expect(try block.withUnsafeBytes { try producer.append($0) } == 0)
        #expect(try producer.announceWaitingForRoom() == false)
    }
}
