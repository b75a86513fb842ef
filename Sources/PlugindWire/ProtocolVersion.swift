/// Versions and features of the conversation between host and worker.
///
/// The host offers a range of protocol versions in `Hello`; the worker answers with the highest
/// version both speak, or refuses with `LoadFailure.Kind.incompatibleProtocol`. Features are
/// named capabilities either side may lack; a side uses one only when both list it.
package enum ProtocolVersion {
    /// The versions this build speaks.
    /// 3: connections, plugin asks, nested requests (frame format 2).
    package static let minimum: UInt16 = 3
    package static let current: UInt16 = 3

    /// The highest version in both ranges, if any.
    package static func negotiate(
        offeredMinimum: UInt16,
        offeredMaximum: UInt16,
        supportedMinimum: UInt16 = minimum,
        supportedMaximum: UInt16 = current
    ) -> UInt16? {
        let highest = min(offeredMaximum, supportedMaximum)
        return highest >= max(offeredMinimum, supportedMinimum) ? highest : nil
    }
}

/// Named capabilities exchanged in the handshake.
package enum ProtocolFeature {
    /// The worker honours `cancel` and answers `cancelled`.
    package static let cancellation = "cancel"
    /// The worker forwards plugin progress reports.
    package static let progress = "progress"
    /// Typed calls of manifest-declared functions.
    package static let functionCalls = "function-calls"
    /// Large payloads may travel in shared memory.
    package static let sharedMemory = "shared-memory"

    /// Connections the plugin accepts or refuses, and asks from the plugin to the host.
    package static let connections = "connections"

    /// The worker reports the stack of a crashed thread, and answers the stack signal.
    package static let stacks = "stacks"

    /// The host may mark requests `FrameFlags.pollForNext`.
    package static let busyPolling = "busy-polling"

    /// Every frame travels through the rings in the shared memory (`SharedRing`); the pipes carry
    /// wake-ups. Only with `sharedMemory`.
    package static let ring = "ring"

    /// Made at each use, read twice in a worker's life: a lazily made global is a page of `.bss`
    /// written in every worker (Documentation/Performance.md, the worker's memory).
    package static var all: [String] { [cancellation, progress, functionCalls, sharedMemory, connections, stacks, busyPolling, ring] }
}
