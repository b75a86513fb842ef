import PlugindSystem
import PlugindWire
import TestSupport
import Testing

/// What each side reads, decided once for host and worker: a pipe (here, bytes handed in) and
/// then the peer's ring (here, shared memory of this process), with no system call.
@Suite("FrameSource: pipe, then ring, and what may travel where", .tags(.unit))
struct FrameSourceTests {
    struct Ring {
        var producer: SharedRingProducer
        let consumer: SharedRingConsumer

        init(_ layout: SharedRingLayout) throws {
            let (memory, descriptor) = try SharedMemory.create(size: SharedMemoryLayout(regionSize: 16 << 10).totalSize)
            defer { descriptor.close() }
            producer = SharedRingProducer(memory: memory, layout: layout)
            consumer = SharedRingConsumer(memory: memory, layout: layout)
        }

        mutating func write(_ bytes: [UInt8]) throws {
            let appended = try bytes.withUnsafeBytes { try producer.append($0) }
            #expect(appended == bytes.count)
            producer.publish()
        }
    }

    static func frame(_ kind: FrameKind, _ payload: [UInt8] = [], id: UInt64 = 0) -> [UInt8] {
        FrameHeader(kind: kind, requestID: id, payloadLength: payload.count).bytes + payload
    }

    static func feed(_ source: inout FrameSource, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            offset += source.receiveFromPipe { buffer in
                let count = min(buffer.count, bytes.count - offset)
                buffer.copyBytes(from: bytes[offset..<offset + count])
                return count
            }
        }
    }

    static func drainRing(_ source: inout FrameSource) throws -> [Frame] {
        var frames: [Frame] = []
        while try source.receiveFromRing(atMost: 100) > 0 {
            while let frame = try source.nextRingFrame() { frames.append(frame) }
        }
        return frames
    }

    @Test("a worker's frames: pipe, then ring; its wake-ups are taken; its signal handlers' reports still come by the pipe")
    func workerStream() throws {
        var source = FrameSource(from: .worker, maximumPayload: 1 << 20)
        var ring = try Ring(SharedMemoryLayout.toHostRing)
        // A wake-up may come ahead of the `ready` being read: the worker switched first.
        Self.feed(&source, Self.frame(.log, [1]) + Self.frame(.wakeHost))
        var frames: [Frame] = []
        #expect(try source.takePipeFrames(into: &frames))
        #expect(frames.map(\.header.kind) == [.log])

        source.switchToRing(ring.consumer)
        for id in 1...40 { try ring.write(Self.frame(.response, Array(repeating: UInt8(id), count: id * 7), id: UInt64(id))) }
        let read = try Self.drainRing(&source)
        #expect(read.map(\.header.requestID) == (1...40).map(UInt64.init))
        #expect(read.allSatisfy { $0.payload == Array(repeating: UInt8($0.header.requestID), count: Int($0.header.requestID) * 7) })

        frames = []
        Self.feed(&source, Self.frame(.wakeHost) + Self.frame(.fatalSignal, [0, 0, 0, 11]))
        #expect(try source.takePipeFrames(into: &frames))
        #expect(frames.map(\.header.kind) == [.fatalSignal])

        Self.feed(&source, Self.frame(.log, [2]))
        #expect(throws: WireError.self) { try source.takePipeFrames(into: &frames) }
    }

    @Test("a host's frames: a wake-up before its switch breaks the protocol; after it, only wake-ups travel on the pipe")
    func hostStream() throws {
        var early = FrameSource(from: .host, maximumPayload: 1 << 20)
        Self.feed(&early, Self.frame(.wake))
        var woken = false
        #expect(throws: WireError.self) { try early.nextPipeFrame(woken: &woken) }

        var source = FrameSource(from: .host, maximumPayload: 1 << 20)
        var ring = try Ring(SharedMemoryLayout.toWorkerRing)
        Self.feed(&source, Self.frame(.request, [9], id: 7) + Self.frame(.switchToRing))
        #expect(try source.nextPipeFrame(woken: &woken)?.header.requestID == 7)
        #expect(try source.nextPipeFrame(woken: &woken)?.header.kind == .switchToRing)
        source.switchToRing(ring.consumer)
        try ring.write(Self.frame(.request, [1, 2, 3], id: 8))
        #expect(try Self.drainRing(&source).map(\.header.requestID) == [8])
        Self.feed(&source, Self.frame(.wake) + Self.frame(.wake))
        #expect(try source.nextPipeFrame(woken: &woken) == nil)
        #expect(woken)
        Self.feed(&source, Self.frame(.request, [], id: 9))
        #expect(throws: WireError.self) { try source.nextPipeFrame(woken: &woken) }
    }

    @Test("bytes the pipe holds when the stream switches stay the pipe's; a frame cut short at the end is an error")
    func switchKeepsPipeBytes() throws {
        var source = FrameSource(from: .worker, maximumPayload: 1 << 20)
        let ring = try Ring(SharedMemoryLayout.toHostRing)
        let half = Self.frame(.fatalSignal, [0, 0, 0, 11])
        Self.feed(&source, Array(half.prefix(10)))
        source.switchToRing(ring.consumer)
        Self.feed(&source, Array(half.dropFirst(10)))
        var frames: [Frame] = []
        _ = try source.takePipeFrames(into: &frames)
        #expect(frames.map(\.header.kind) == [.fatalSignal])
        Self.feed(&source, Array(Self.frame(.fatalSignal, [1]).prefix(5)))
        #expect(throws: WireError.self) { try source.finish() }
    }
}
