import Glibc
import PlugindSystem
import PlugindWire

/// The worker's view of the shared memory the host passed as descriptor 5 (see
/// `SharedMemoryLayout`): requests are read in place, responses written in place. The response
/// region holds one response at a time: a request thread claims it for its response when the
/// host has read the previous one, and the others answer through the pipe meanwhile.
final class WorkerSharedMemory: Sendable {
    static let descriptor = FileDescriptor(rawValue: 5)

    let memory: SharedMemory
    let layout: SharedMemoryLayout

    private struct ResponseRegion {
        /// Responses placed in the region so far; the host's counter catches up as it reads them.
        var sent: UInt64 = 0
        var claimed = false
    }

    private let responses = Locked(ResponseRegion())

    private init(memory: SharedMemory, layout: SharedMemoryLayout) {
        self.memory = memory
        self.layout = layout
    }

    /// Maps descriptor 5 and closes it, so that the plugin never holds it. Nil when the host
    /// passed none or it is not a usable region; requests and responses then take the pipe.
    static func take() -> WorkerSharedMemory? {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { return nil }
        defer { descriptor.close() }
        guard let memory = try? SharedMemory.map(descriptor), memory.size > SharedMemoryLayout.dataSizeOffset + 8,
            let layout = SharedMemoryLayout(totalSize: memory.size, dataSize: memory.loadCounter(at: SharedMemoryLayout.dataSizeOffset))
        else {
            return nil
        }
        return WorkerSharedMemory(memory: memory, layout: layout)
    }

    /// The data area of a foreign plugin's buffers, or nil when the layout has none.
    var dataArea: UnsafeMutableRawBufferPointer? {
        layout.dataSize > 0 ? memory.bytes(at: layout.dataOffset, count: layout.dataSize) : nil
    }

    /// The bytes of a request at `location` in the host's region, or nil when it lies outside.
    func request(at location: SharedMemoryLocation) -> UnsafeRawBufferPointer? {
        guard let range = location.range(inRegionOf: layout.regionSize) else { return nil }
        return memory.bytes(at: layout.toWorkerOffset + range.lowerBound, count: range.count).map(UnsafeRawBufferPointer.init)
    }

    /// The worker's region for one response, when no other thread has it and the host has read
    /// every response placed there before. Give it back with `placedResponse` or `release`.
    func claimResponseRegion() -> UnsafeMutableRawBufferPointer? {
        let free = responses.withLock { region -> Bool in
            guard !region.claimed, memory.loadCounter(at: SharedMemoryLayout.consumedResponsesOffset) == region.sent else {
                return false
            }
            region.claimed = true
            return true
        }
        return free ? memory.bytes(at: layout.toHostOffset, count: layout.regionSize) : nil
    }

    /// Records a response of `length` bytes placed at the start of the claimed region; returns
    /// where it is.
    func placedResponse(length: Int) -> SharedMemoryLocation {
        responses.withLock { region in
            region.sent += 1
            region.claimed = false
        }
        return SharedMemoryLocation(offset: 0, length: UInt64(length))
    }

    /// Gives the claimed region back unused.
    func release() {
        responses.withLock { $0.claimed = false }
    }
}
