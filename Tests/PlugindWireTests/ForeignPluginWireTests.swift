import PlugindWire
import TestSupport
import Testing

@Suite("Shared memory: a foreign plugin's data area", .tags(.unit))
struct SharedMemoryDataAreaTests {
    @Test("a data area follows the two payload regions, a whole number of pages; the worker finds it from the header's size")
    func dataArea() throws {
        let limits = ResourceLimits(maxMessageBytes: 1 << 20)
        let layout = try #require(SharedMemoryLayout(limits: limits, dataBytes: 3 * 32_768 + 5))
        #expect(layout.dataSize == 102_400)
        #expect(layout.dataOffset == SharedMemoryLayout.headerSize + 2 * layout.regionSize)
        #expect(layout.totalSize == layout.dataOffset + layout.dataSize)
        #expect(SharedMemoryLayout(totalSize: layout.totalSize, dataSize: UInt64(layout.dataSize)) == layout)
        // Sizes that no layout has: not whole pages, larger than the mapping, leaving no regions.
        #expect(SharedMemoryLayout(totalSize: layout.totalSize, dataSize: 100) == nil)
        #expect(SharedMemoryLayout(totalSize: layout.totalSize, dataSize: UInt64(layout.totalSize) + 4096) == nil)
        #expect(SharedMemoryLayout(totalSize: layout.totalSize, dataSize: UInt64(layout.totalSize - SharedMemoryLayout.headerSize)) == nil)
        // A worker with a data area always gets shared memory, even with small messages; a data
        // area larger than any adapter asks is refused.
        #expect(SharedMemoryLayout(limits: ResourceLimits(maxMessageBytes: 1024), dataBytes: 4096) != nil)
        #expect(SharedMemoryLayout(limits: ResourceLimits(maxMessageBytes: 1024)) == nil)
        #expect(SharedMemoryLayout(limits: limits, dataBytes: ForeignPluginAdapter.maximumDataBytes + 1) == nil)
    }

    @Test("adapter requests, layouts and parameter values encode and decode to themselves; trailing bytes are refused")
    func adapterMessages() throws {
        let requests: [ForeignPluginRequest] = [
            .describe, .instantiate(sampleRate: 44_100, maximumFrames: 256), .run(frames: 64), .reset, .openDoorbell,
            .construct(width: 64, height: 48),
            .setParameter(index: 2, value: .color(red: 0.5, green: 1, blue: 0)), .setParameter(index: 0, value: .string("median")),
            .getParameter(index: 3), .update(time: 0.04),
        ]
        for request in requests {
            #expect(try ForeignPluginRequest(request.encoded) == request)
            #expect(throws: WireError.self) { try ForeignPluginRequest(request.encoded + [0]) }
        }
        let layout = ForeignPortLayout(offsets: [0, 64, 32_832])
        #expect(try ForeignPortLayout(layout.encoded) == layout)
        #expect(throws: WireError.self) { try ForeignPluginRequest([0x7F]) }
        #expect(ForeignPluginAdapter.aligned(65) == 128)
        #expect(ForeignPluginAdapter.aligned(UInt64.max) == nil)
    }

    @Test("a doorbell's numbers skip 0 and the refused bit; only the answer to the block rung counts; its place lies inside the area")
    func doorbell() throws {
        typealias Doorbell = ForeignBlockDoorbell
        #expect(Doorbell.sequence(after: 0) == 1)
        #expect(Doorbell.sequence(after: 41) == 42)
        #expect(Doorbell.sequence(after: 0x7FFF_FFFF) == 1)
        // A word a worker wrote is not a number the host rings: the next one is still in range.
        #expect(Doorbell.sequence(after: 0xFFFF_FFFF) == 1)
        #expect(Doorbell.sequence(after: 0x8000_0005) == 6)
        var sequence: UInt32 = 0x7FFF_FFF0
        for _ in 0..<40 {
            sequence = Doorbell.sequence(after: sequence)
            #expect(sequence != 0 && sequence & Doorbell.refusedBit == 0)
        }
        #expect(Doorbell.answer(42, to: 42) == .ran)
        #expect(Doorbell.answer(42 | Doorbell.refusedBit, to: 42) == .refused)
        // The last block's answer, a later number, or garbage: no answer yet.
        for word: UInt32 in [0, 41, 43, 0xFFFF_FFFF, 41 | Doorbell.refusedBit] { #expect(Doorbell.answer(word, to: 42) == .pending) }
        #expect(Doorbell.isPlace(0, inAreaOf: 128))
        #expect(Doorbell.isPlace(4096, inAreaOf: 4096 + 128))
        #expect(!Doorbell.isPlace(4096, inAreaOf: 4096 + 127))
        #expect(!Doorbell.isPlace(32, inAreaOf: 4096))
        #expect(!Doorbell.isPlace(UInt64.max - 63, inAreaOf: 4096))
        #expect(try Doorbell.offset(Doorbell.encoded(offset: 4160)) == 4160)
        #expect(throws: WireError.self) { try Doorbell.offset([1, 2, 3]) }
        #expect(throws: WireError.self) { try Doorbell.offset(Doorbell.encoded(offset: 64) + [0]) }
    }
}

@Suite("LADSPA control defaults", .tags(.unit))
struct LADSPADefaultTests {
    static func port(hints: UInt32, _ lower: Float, _ upper: Float) -> LADSPAPortDescription {
        LADSPAPortDescription(name: "c", flags: 0x5, hints: hints, lowerBound: lower, upperBound: upper)
    }

    @Test("ladspa.h's hint rules, as analyseplugin applies them")
    func rules() {
        let bounded: UInt32 = 0x3
        // Middle of 0…1; low and high of a logarithmic 1…100 (geometric); maximum; 440.
        #expect(Self.port(hints: bounded | 0xC0, 0, 1).defaultValue(sampleRate: 48_000) == 0.5)
        #expect(abs(Self.port(hints: bounded | 0x10 | 0x80, 1, 100).defaultValue(sampleRate: 48_000) - 3.1622777) < 1e-5)
        #expect(abs(Self.port(hints: bounded | 0x10 | 0x100, 1, 100).defaultValue(sampleRate: 48_000) - 31.622776) < 1e-4)
        #expect(Self.port(hints: bounded | 0x140, 0, 7).defaultValue(sampleRate: 48_000) == 7)
        #expect(Self.port(hints: 0x2C0, 0, 0).defaultValue(sampleRate: 48_000) == 440)
        // "0 to …, default 0.1": low reads the upper bound field though the port is unbounded above.
        #expect(abs(Self.port(hints: 0x1 | 0x80, 0, 0.4).defaultValue(sampleRate: 48_000) - 0.1) < 1e-7)
        // A zero bound of a logarithmic port gives 0, as exp(log(0)…) does.
        #expect(Self.port(hints: bounded | 0x10 | 0x80, 0, 1).defaultValue(sampleRate: 48_000) == 0)
        // Scaled by the sample rate; an integer port rounds ties to even.
        #expect(Self.port(hints: bounded | 0x8 | 0xC0, 0, 0.5).defaultValue(sampleRate: 48_000) == 12_000)
        #expect(Self.port(hints: bounded | 0x20 | 0xC0, 0, 5).defaultValue(sampleRate: 48_000) == 2)
        // No default hint: the lower bound, else the upper, else 0; a default outside the bounds
        // (cmt's delay_0.01s declares 1 for 0…0.01) is brought inside them.
        #expect(Self.port(hints: 0x2, 0, -3).defaultValue(sampleRate: 48_000) == -3)
        #expect(Self.port(hints: 0, 0, 0).defaultValue(sampleRate: 48_000) == 0)
        #expect(Self.port(hints: bounded | 0x240, 0, 0.01).defaultValue(sampleRate: 48_000) == 0.01)
    }
}
