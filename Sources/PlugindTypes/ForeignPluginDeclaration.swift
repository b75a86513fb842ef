/// A plugin ABI other than plugind's own that the worker hosts through an adapter: the unchanged
/// library the distribution installed.
package enum ForeignABI: UInt8, Sendable, Hashable, CaseIterable, Codable {
    case ladspa = 1
    case frei0r = 2

    /// The manifest's and the command line's spelling.
    package var name: String {
        switch self {
        case .ladspa: "ladspa"
        case .frei0r: "frei0r"
        }
    }

    package init?(name: String) {
        guard let abi = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = abi
    }

    /// The most frames a LADSPA port holds: one `run` processes at most this many.
    package static let maximumBlockFrames: UInt64 = 8192
    /// frei0r's largest frame: 2048×2048 pixels of 4 bytes.
    package static let maximumFrameBytes: UInt64 = 2048 * 2048 * 4
    /// How `bufferLimit` relates to buffers: at most this many ports or frames are declared.
    package static let maximumBuffers: UInt64 = 4096

    /// The bytes of a LADSPA instance's doorbell (`ForeignBlockDoorbell`), after its ports.
    package static let doorbellBytes: UInt64 = 128

    /// The data area an instance with `buffers` ports (LADSPA) or frames (frei0r, inputs and
    /// output) may need at most: each buffer at its largest, cache-line aligned; for LADSPA, and
    /// the doorbell.
    package func dataBytes(buffers: UInt64) -> UInt64 {
        switch self {
        case .ladspa: min(buffers, Self.maximumBuffers) * Self.maximumBlockFrames * 4 + Self.doorbellBytes
        case .frei0r: min(buffers, 4) * Self.maximumFrameBytes
        }
    }
}

/// The manifest's `adapter`: which plugin of a foreign library the bundle is, and how many buffers
/// its instance lays out (ports for LADSPA, frames for frei0r), which sizes its shared data area.
package struct ForeignPluginDeclaration: Equatable, Sendable, Hashable {
    package var abi: ForeignABI
    /// LADSPA: the descriptor's label; frei0r: empty.
    package var plugin: String
    package var buffers: UInt64

    package init(abi: ForeignABI, plugin: String, buffers: UInt64) {
        self.abi = abi
        self.plugin = plugin
        self.buffers = buffers
    }
}
