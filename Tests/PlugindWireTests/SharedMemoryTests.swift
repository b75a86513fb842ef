import Foundation
import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Shared memory: layout, locations, frames and the mapping", .tags(.unit))
struct SharedMemoryTests {
    @Test("shared requests and responses round-trip and carry only their location")
    func frames() throws {
        let location = SharedMemoryLocation(offset: 4096, length: 1 << 20)
        let request = HostMessage.sharedRequest(id: 7, connection: 2, location).encode()
        #expect(request.header.flags == .sharedMemory)
        #expect(request.payload.count == SharedMemoryLocation.encodedSize)
        #expect(try HostMessage(request) == .sharedRequest(id: 7, connection: 2, location))
        let response = WorkerMessage.sharedResponse(id: 7, location).encode()
        #expect(try WorkerMessage(response) == .sharedResponse(id: 7, location))
    }

    @Test("the flag is refused on any other kind, and a location must be exactly 16 bytes")
    func misuse() {
        var call = HostMessage.call(id: 1, function: 0, arguments: []).encode()
        call.header.flags = .sharedMemory
        #expect(throws: WireError.self) { try HostMessage(call) }
        var event = WorkerMessage.event(requestID: 1, bytes: [1]).encode()
        event.header.flags = .sharedMemory
        #expect(throws: WireError.self) { try WorkerMessage(event) }
        var short = WorkerMessage.sharedResponse(id: 1, SharedMemoryLocation(offset: 0, length: 1)).encode()
        short.payload.removeLast()
        short.header.payloadLength -= 1
        #expect(throws: WireError.self) { try WorkerMessage(short) }
        // Flags no version defines are still refused in the header.
        var header = FrameHeader(kind: .response, flags: FrameFlags(rawValue: 1 << 3), requestID: 1, payloadLength: 0).bytes
        #expect(throws: WireError.self) {
            try header.withUnsafeMutableBytes {
                try FrameHeader.decode(UnsafeRawBufferPointer($0), direction: .workerToHost, maximumPayload: 16)
            }
        }
    }

    @Test("a location is accepted only when it lies inside the region, overflow included")
    func ranges() {
        let region = 64 << 10
        #expect(SharedMemoryLocation(offset: 0, length: UInt64(region)).range(inRegionOf: region) == 0..<region)
        #expect(SharedMemoryLocation(offset: UInt64(region), length: 0).range(inRegionOf: region) == region..<region)
        #expect(SharedMemoryLocation(offset: 1, length: UInt64(region)).range(inRegionOf: region) == nil)
        #expect(SharedMemoryLocation(offset: UInt64(region) + 1, length: 0).range(inRegionOf: region) == nil)
        #expect(SharedMemoryLocation(offset: .max, length: 2).range(inRegionOf: region) == nil)
        #expect(SharedMemoryLocation(offset: 8, length: .max - 4).range(inRegionOf: region) == nil)
    }

    @Test("the region follows the message and address-space limits, and small limits get none")
    func layout() throws {
        let standard = try #require(SharedMemoryLayout(limits: ResourceLimits(maxMessageBytes: 64 << 20)))
        #expect(standard.regionSize == SharedMemoryLayout.maximumRegionSize)
        let capped = try #require(SharedMemoryLayout(limits: ResourceLimits(addressSpaceBytes: 64 << 20, maxMessageBytes: 64 << 20)))
        #expect(capped.regionSize == 8 << 20)
        let odd = try #require(SharedMemoryLayout(limits: ResourceLimits(maxMessageBytes: 100_000)))
        #expect(odd.regionSize == 102_400)
        #expect(SharedMemoryLayout(limits: ResourceLimits(maxMessageBytes: 12 << 10)) == nil)
        #expect(SharedMemoryLayout(totalSize: standard.totalSize, dataSize: 0) == standard)
        #expect(SharedMemoryLayout(totalSize: standard.totalSize + 1, dataSize: 0) == nil)
    }

    @Test("the memfd is sealed: the other process can neither shrink nor grow it")
    func seals() throws {
        let layout = SharedMemoryLayout(regionSize: 64 << 10)
        let (memory, descriptor) = try SharedMemory.create(size: layout.totalSize)
        defer { descriptor.close() }
        #expect(memory.size == layout.totalSize)
        #expect(ftruncate(descriptor.rawValue, 0) == -1 && errno == EPERM)
        #expect(ftruncate(descriptor.rawValue, off_t(layout.totalSize * 2)) == -1 && errno == EPERM)
        // A second mapping of the same descriptor sees the same bytes.
        let other = try SharedMemory.map(descriptor)
        let bytes: [UInt8] = [1, 2, 3]
        #expect(bytes.withUnsafeBytes { memory.copy($0, to: layout.toHostOffset) })
        #expect(other.copyBytes(at: layout.toHostOffset, count: 3) == bytes)
        memory.storeCounter(42, at: SharedMemoryLayout.consumedResponsesOffset)
        #expect(other.loadCounter(at: SharedMemoryLayout.consumedResponsesOffset) == 42)
        // Out of bounds is refused, not clamped.
        #expect(other.copyBytes(at: layout.totalSize - 2, count: 3) == nil)
        #expect(!bytes.withUnsafeBytes { other.copy($0, to: layout.totalSize - 2) })
    }

    @Test("a file that is not a sealed memfd is not mapped")
    func unsealed() throws {
        let path = FileManager.default.temporaryDirectory.path + "/plugind-unsealed-\(getpid())"
        try Data(count: 8192).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let descriptor = try FileDescriptor.open(path, O_RDWR)
        defer { descriptor.close() }
        #expect(throws: SystemError.self) { try SharedMemory.map(descriptor) }
    }
}
