import Glibc
import PlugindSystem
import PlugindWire

/// The worker's view of the shared memory the host passed as descriptor 5 (see
/// `SharedMemoryLayout`): requests are read in place, responses written in place.
struct WorkerSharedMemory {
    static let descriptor = FileDescriptor(rawValue: 5)

    let memory: SharedMemory
    let layout: SharedMemoryLayout
    /// Responses placed in the region so far; the host's counter catches up as it reads them.
    private(set) var responsesSent: UInt64 = 0

    /// Maps descriptor 5 and closes it, so that the plugin never holds it. Nil when the host
    /// passed none or it is not a usable region; requests and responses then take the pipe.
    static func take() -> WorkerSharedMemory? {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { return nil }
        defer { descriptor.close() }
        guard let memory = try? SharedMemory.map(descriptor), let layout = SharedMemoryLayout(totalSize: memory.size) else {
            return nil
        }
        return WorkerSharedMemory(memory: memory, layout: layout)
    }

    /// The bytes of a request at `location` in the host's region, or nil when it lies outside.
    func request(at location: SharedMemoryLocation) -> UnsafeRawBufferPointer? {
        guard let range = location.range(inRegionOf: layout.regionSize) else { return nil }
        return memory.bytes(at: layout.toWorkerOffset + range.lowerBound, count: range.count).map(UnsafeRawBufferPointer.init)
    }

    /// The worker's region, when the host has read every response placed there before.
    var freeResponseRegion: UnsafeMutableRawBufferPointer? {
        guard memory.loadCounter(at: SharedMemoryLayout.consumedResponsesOffset) == responsesSent else { return nil }
        return memory.bytes(at: layout.toHostOffset, count: layout.regionSize)
    }

    /// Records a response of `length` bytes placed at the start of the region; returns where it is.
    mutating func placedResponse(length: Int) -> SharedMemoryLocation {
        responsesSent += 1
        return SharedMemoryLocation(offset: 0, length: UInt64(length))
    }
}
