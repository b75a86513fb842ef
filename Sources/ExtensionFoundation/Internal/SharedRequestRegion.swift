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

    /// Copies `bytes` into the region for request `id`; nil when there is no room right now
    /// (the request then takes the pipe).
    package mutating func place(_ bytes: UnsafeRawBufferPointer, for id: UInt64) -> SharedMemoryLocation? {
        let aligned = (bytes.count + 63) & ~63
        guard aligned <= layout.regionSize - top, memory.copy(bytes, to: layout.toWorkerOffset + top) else { return nil }
        defer {
            top += aligned
            outstanding.insert(id)
            placedCount += 1
        }
        return SharedMemoryLocation(offset: UInt64(top), length: UInt64(bytes.count))
    }

    /// The worker answered request `id`: it no longer reads its payload.
    package mutating func release(_ id: UInt64) {
        guard outstanding.remove(id) != nil, outstanding.isEmpty else { return }
        top = 0
    }
}
