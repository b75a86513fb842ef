package import PlugindSystem

/// The data area of a foreign plugin's buffers (`ForeignPluginAdapter`) in the memory shared with
/// its worker, which the plugin reads and writes: hostile to every reader.
package struct SharedDataArea: Sendable {
    package let memory: SharedMemory
    package let offset: Int
    package let count: Int
}
