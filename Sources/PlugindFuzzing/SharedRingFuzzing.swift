import PlugindSystem
import PlugindWire

/// The body of the shared-ring fuzz target, shared with the test that replays its corpus: one
/// ring of the memory host and worker share (`SharedRing`), driven by a script in which the other
/// side may lie. Each step is a byte that picks an operation, and the bytes after it its argument:
/// this side appends, publishes, reads, asks what waits or what room there is, goes through the
/// wake-up handshake, or the peer stores any value in a word of the ring (the position it
/// publishes, a wake-up word). This side must never trap, never touch memory outside the ring,
/// and fail only with `SharedRingError`; it never reads more than the ring holds nor sees more
/// waiting than that; and until the peer first lies about a position, everything is exact: what
/// is read is what was written, in order, and room and waiting bytes are what was written and read.
package enum SharedRingFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    /// The bytes of the script, consumed as the steps ask for them; zeros once it has ended.
    private struct Script {
        private let bytes: [UInt8]
        private var offset = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func step() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func byte() -> UInt8 { step() ?? 0 }

        /// A size from 0 to `maximum`, from two bytes.
        mutating func size(upTo maximum: Int) -> Int { (Int(byte()) << 8 | Int(byte())) % (maximum + 1) }

        mutating func word64() -> UInt64 { (0..<8).reduce(UInt64(0)) { value, _ in value << 8 | UInt64(byte()) } }
    }

    /// The byte written at stream position `position`: a pattern no shift of it repeats soon.
    private static func pattern(_ position: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: position &* 131 &+ position >> 9) }

    package static func run(_ input: [UInt8]) throws {
        let (memory, descriptor) = try SharedMemory.create(size: SharedMemoryLayout(regionSize: SharedMemoryLayout.threshold).totalSize)
        descriptor.close()
        let ring = SharedMemoryLayout.toHostRing
        let capacity = ring.capacity
        var producer = SharedRingProducer(memory: memory, layout: ring)
        var consumer = SharedRingConsumer(memory: memory, layout: ring)
        var script = Script(input)
        // What the honest sides did: appended, published and read, as stream positions.
        var written: UInt64 = 0
        var published: UInt64 = 0
        var read: UInt64 = 0
        var honest = true
        var buffer = [UInt8](repeating: 0, count: capacity + 64)
        func violation(_ description: String) -> InvariantViolation {
            InvariantViolation(description: description + " (written \(written), published \(published), read \(read), honest \(honest))")
        }
        func expectRingError(_ error: any Error, _ operation: String) throws {
            guard error is SharedRingError else { throw violation("\(operation) failed with \(error), not a SharedRingError") }
            if honest { throw violation("\(operation) found an impossible state no one made: \(error)") }
        }
        while let step = script.step() {
            switch step % 8 {
            case 0:
                let count = script.size(upTo: capacity + 64)
                let bytes = (0..<count).map { pattern(written + UInt64($0)) }
                do {
                    let appended = try bytes.withUnsafeBytes { try producer.append($0) }
                    guard appended >= 0, appended <= count, appended <= capacity else {
                        throw violation("appended \(appended) of \(count) bytes to a ring of \(capacity)")
                    }
                    if honest, appended != min(count, capacity - Int(written - read)) {
                        throw violation("appended \(appended) of \(count) bytes with \(capacity - Int(written - read)) free")
                    }
                    written += UInt64(appended)
                } catch let error as InvariantViolation {
                    throw error
                } catch {
                    try expectRingError(error, "append")
                }
            case 1:
                producer.publish()
                published = written
            case 2:
                let count = script.size(upTo: buffer.count)
                do {
                    let got = try buffer.withUnsafeMutableBytes {
                        try consumer.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<count]))
                    }
                    guard got >= 0, got <= count, got <= capacity else {
                        throw violation("read \(got) bytes into \(count) from a ring of \(capacity)")
                    }
                    if honest {
                        guard got == min(count, Int(published - read)) else {
                            throw violation("read \(got) of \(count) bytes with \(published - read) published")
                        }
                        if let wrong = (0..<got).first(where: { buffer[$0] != pattern(read + UInt64($0)) }) {
                            throw violation("byte \(read + UInt64(wrong)) of the stream came out changed")
                        }
                    }
                    read += UInt64(got)
                } catch let error as InvariantViolation {
                    throw error
                } catch {
                    try expectRingError(error, "read")
                }
            case 3:
                do {
                    let waiting = try consumer.available()
                    guard waiting >= 0, waiting <= capacity else { throw violation("\(waiting) bytes wait in a ring of \(capacity)") }
                    if honest, waiting != Int(published - read) {
                        throw violation("\(waiting) bytes wait, \(published - read) were published")
                    }
                } catch let error as InvariantViolation {
                    throw error
                } catch {
                    try expectRingError(error, "available")
                }
            case 4:
                do {
                    let room = try producer.room()
                    guard room <= capacity else { throw violation("\(room) bytes of room in a ring of \(capacity)") }
                    if honest, room != capacity - Int(written - read) { throw violation("\(room) bytes of room, \(written - read) in use") }
                } catch let error as InvariantViolation {
                    throw error
                } catch {
                    try expectRingError(error, "room")
                }
            case 5:
                // The peer publishes a position of its choosing: the writer's or the reader's.
                let lie = script.word64()
                memory.storeCounter(lie, at: ring.wordsOffset + (script.byte() % 2 == 0 ? 0 : 64))
                honest = false
            case 6:
                // The peer stores any value in a wake-up word: waits and wake-ups may go wrong,
                // positions and bytes may not.
                memory.storeWord(UInt32(truncatingIfNeeded: script.word64()), at: ring.wordsOffset + 128 + 64 * Int(script.byte() % 3))
            default:
                do {
                    switch script.byte() % 6 {
                    case 0: _ = producer.consumerNeedsWake()
                    case 1: _ = try consumer.mayWait()
                    case 2: consumer.wakeTaken()
                    case 3: if consumer.producerNeedsWake() { consumer.wakeProducer() }
                    case 4: _ = try producer.announceWaitingForRoom()
                    default:
                        consumer.setPolling(script.byte() % 2 == 0)
                        if honest, consumer.hasInput(past: consumer.readPosition) != (published != read) {
                            throw violation("hasInput disagrees with what was published and read")
                        }
                    }
                } catch let error as InvariantViolation {
                    throw error
                } catch {
                    try expectRingError(error, "the wake-up handshake")
                }
            }
        }
    }
}
