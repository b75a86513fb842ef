import ExtensionFoundation
import PlugindEngine
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("The host's shared-memory region for requests", .tags(.unit))
struct SharedRequestRegionTests {
    @Test("space is taken from the front and comes back only when every placed request is answered")
    func placement() throws {
        let layout = SharedMemoryLayout(regionSize: 64 << 10)
        let (memory, descriptor) = try SharedMemory.create(size: layout.totalSize)
        descriptor.close()
        var region = SharedRequestRegion(memory: memory, layout: layout)
        let first = [UInt8](repeating: 1, count: 40_000)
        let second = [UInt8](repeating: 2, count: 20_000)
        #expect(first.withUnsafeBytes { region.place($0, for: 1) } == SharedMemoryLocation(offset: 0, length: 40_000))
        // No room for a second 40 000 bytes; 20 000 go after the first, 64-byte aligned.
        #expect(first.withUnsafeBytes { region.place($0, for: 2) } == nil)
        #expect(second.withUnsafeBytes { region.place($0, for: 3) } == SharedMemoryLocation(offset: 40_000, length: 20_000))
        #expect(memory.copyBytes(at: layout.toWorkerOffset + 40_000, count: 20_000) == second)
        // Answering one of two gives nothing back; answering the last gives everything back.
        region.release(1)
        #expect(second.withUnsafeBytes { region.place($0, for: 4) } == nil)
        region.release(99)
        region.release(3)
        #expect(first.withUnsafeBytes { region.place($0, for: 5) } == SharedMemoryLocation(offset: 0, length: 40_000))
        #expect(region.placedCount == 3)
    }
}
