package import PlugindSystem
package import PlugindWire

/// The host's region of the shared memory (see `SharedMemoryLayout`): where large request
/// payloads are placed. Space is taken from the front and given back all at once when every
/// request placed there has been answered — the worker reads a request in place until it
/// answers it. With one request at a time, each payload goes to offset 0, so only as many pages
/// as the largest message are ever touched.
package struct SharedRequestRegion {
    let memory: SharedMemory
    let layout: SharedMemoryLayout
    private var top = 0
    private var outstanding: Set<UInt64> = []
    /// Requests that travelled through the region, for tests and statistics.
    package private(set) var placedCount = 0

    package init(memory: SharedMemory, layout: SharedMemoryLayout) {
        self.memory = memory
        self.layout = layout
    }

    /// Where the payload of request `id` goes: space for `count` bytes, taken now, to be filled
    /// by the caller (with no lock held: the copy can be large). The memory stays mapped while the
    /// caller holds it. Nil when there is no room right now (the request then takes the pipe).
    package mutating func reserve(_ count: Int, for id: UInt64) -> (memory: SharedMemory, offset: Int, location: SharedMemoryLocation)? {
        let aligned = (count + 63) & ~63
        guard aligned <= layout.regionSize - top else { return nil }
        defer {
            top += aligned
            outstanding.insert(id)
            placedCount += 1
        }
        return (memory, layout.toWorkerOffset + top, SharedMemoryLocation(offset: UInt64(top), length: UInt64(count)))
    }

    /// Copies `bytes` into the region for request `id`; nil when there is no room right now.
    package mutating func place(_ bytes: UnsafeRawBufferPointer, for id: UInt64) -> SharedMemoryLocation? {
        guard let reserved = reserve(bytes.count, for: id) else { return nil }
        guard reserved.memory.copy(bytes, to: reserved.offset) else {
            release(id)
            return nil
        }
        return reserved.location
    }

    /// The worker answered request `id`: it no longer reads its payload.
    package mutating func release(_ id: UInt64) {
        guard outstanding.remove(id) != nil, outstanding.isEmpty else { return }
        top = 0
    }
}
