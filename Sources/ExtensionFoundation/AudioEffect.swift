import Glibc
import PlugindEngine
import PlugindSystem
import PlugindTypes
import PlugindWire

/// A LADSPA effect, unchanged from its package, running in its own confined worker (Linux
/// addition). Its ports live in memory shared with the worker, at the addresses the plugin was
/// connected to: write input samples and controls, `run(frames:)`, read the outputs. The call
/// carries only the frame count. One instance per process, single-threaded as LADSPA requires:
/// a chain is one `AudioEffect` per plugin, each in its own process.
///
/// Two ways to run a block: `run(frames:timeout:)` from a task, as a request; and
/// `render(frames:timeout:)` from a real-time audio thread, which it blocks until the block is
/// done: it rings the worker through a word in the shared memory, with no task, event loop or
/// request frame between the two (`Documentation/Performance.md`, "A chain of LADSPA effects").
public final class AudioEffect: Sendable {
    public struct Port: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case audioInput, audioOutput, controlInput, controlOutput
        }

        public let index: Int
        public let name: String
        public let kind: Kind
        /// The bounds the plugin declares, scaled by the sample rate where it says so.
        public let lowerBound: Float?
        public let upperBound: Float?
        /// A control input's default by LADSPA's hint rules, within the bounds.
        public let defaultValue: Float?
        public let isToggle: Bool
        public let isInteger: Bool
        public let isLogarithmic: Bool
    }

    public let process: AppExtensionProcess
    public let name: String
    public let label: String
    public let maker: String
    public let copyright: String
    public let uniqueID: UInt64
    /// `LADSPA_PROPERTY_*`: real-time 0x1, in-place broken 0x2, hard real-time capable 0x4.
    public let properties: UInt32
    public let ports: [Port]
    public let sampleRate: Int
    /// The most frames one `run(frames:)` takes.
    public let maximumFrames: Int

    /// How the runs went against their blocks' real-time period (frames / sample rate): a run
    /// that took longer than its block lasts missed it. A real-time host reads these rather than
    /// waiting longer; `run(frames:timeout:)` bounds how long it can wait at all.
    public struct Timing: Sendable, Hashable {
        public var blocks = 0
        public var missedBlocks = 0
        /// The longest run, from the request to its answer.
        public var longestRun: Duration = .zero

        /// Counts a completed run of `frames` that took `took`, against the block's period at
        /// `sampleRate`.
        mutating func record(_ took: Duration, frames: Int, sampleRate: Int) {
            let period = Duration.nanoseconds(Int64(frames) * 1_000_000_000 / Int64(sampleRate))
            blocks += 1
            if took > period { missedBlocks += 1 }
            longestRun = max(longestRun, took)
        }
    }

    public var timing: Timing { timingState.withLock { $0 } }

    private let connection: AppExtensionConnection
    private let doorbell: BlockDoorbell
    private let data: SharedDataArea
    private let offsets: [Int]
    private let timingState = Locked(Timing())

    /// Describes the plugin, instantiates it at `sampleRate` with ports of `maximumFrames`
    /// samples, and sets every control input to its default.
    ///
    /// - Throws: `AppExtensionError`: `unsupported` when the process is not a LADSPA plugin's;
    ///   `invalidArguments` for a rate or block size out of range; what the worker reports
    ///   (`pluginError` naming the plugin when `instantiate` fails).
    public init(process: AppExtensionProcess, sampleRate: Int, maximumFrames: Int = 1024) async throws {
        let plugin = process.plan.pluginIdentifier
        guard process.plan.load.adapter?.abi == .ladspa, let data = process.sharedData else {
            throw AppExtensionError(.unsupported, plugin: plugin, "is not a LADSPA plugin")
        }
        guard (1...1_536_000).contains(sampleRate) else {
            throw AppExtensionError(.invalidArguments, plugin: plugin, "sample rate \(sampleRate) Hz is outside 1…1536000")
        }
        guard (1...Int(ForeignABI.maximumBlockFrames)).contains(maximumFrames) else {
            throw AppExtensionError(
                .invalidArguments, plugin: plugin, "a block of \(maximumFrames) frames is outside 1…\(ForeignABI.maximumBlockFrames)")
        }
        let connection = try await process.makeConnection()
        let description: LADSPAPluginDescription
        do {
            guard
                case .ladspa(let plugins) = try ForeignLibraryDescription(try await connection.send(ForeignPluginRequest.describe.encoded)),
                plugins.count == 1, let only = plugins.first
            else {
                throw AppExtensionError(.protocolViolation, plugin: plugin, "described itself as something other than one LADSPA plugin")
            }
            description = only
        } catch let error as WireError {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "sent a description that does not decode: \(error)")
        }
        let layout: ForeignPortLayout
        do {
            layout = try ForeignPortLayout(
                try await connection.send(
                    ForeignPluginRequest.instantiate(sampleRate: Double(sampleRate), maximumFrames: UInt32(maximumFrames)).encoded))
        } catch let error as WireError {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "sent a port layout that does not decode: \(error)")
        }
        let ports = description.ports.enumerated().map { Port(index: $0.offset, $0.element, sampleRate: Float(sampleRate)) }
        // The layout came from the worker: every port must lie inside the data area.
        guard layout.offsets.count == ports.count else {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "laid out \(layout.offsets.count) ports for \(ports.count)")
        }
        var offsets: [Int] = []
        for (port, offset) in zip(ports, layout.offsets) {
            let bytes = UInt64(port.kind == .audioInput || port.kind == .audioOutput ? maximumFrames * 4 : 4)
            guard offset % 4 == 0, offset <= UInt64(data.count), bytes <= UInt64(data.count) - offset else {
                throw AppExtensionError(.protocolViolation, plugin: plugin, "laid port \(port.index) out beyond the shared data area")
            }
            offsets.append(Int(offset))
        }
        let doorbell: BlockDoorbell
        do {
            let offset = try ForeignBlockDoorbell.offset(try await connection.send(ForeignPluginRequest.openDoorbell.encoded))
            guard let placed = BlockDoorbell(channel: process.channel, offset: offset) else {
                throw AppExtensionError(
                    .protocolViolation, plugin: plugin, "placed its doorbell at \(offset), outside the shared data area")
            }
            doorbell = placed
        } catch let error as WireError {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "sent a doorbell's place that does not decode: \(error)")
        }
        self.process = process
        self.doorbell = doorbell
        self.connection = connection
        self.data = data
        self.offsets = offsets
        self.ports = ports
        self.name = description.name
        self.label = description.label
        self.maker = description.maker
        self.copyright = description.copyright
        self.uniqueID = description.uniqueID
        self.properties = description.properties
        self.sampleRate = sampleRate
        self.maximumFrames = maximumFrames
        for port in ports where port.kind == .controlInput { storeControl(port.index, port.defaultValue ?? 0) }
    }

    private var pluginIdentifier: String { process.plan.pluginIdentifier }

    private func port(_ index: Int, _ kinds: Set<Port.Kind>, _ use: String) throws(AppExtensionError) -> Port {
        guard ports.indices.contains(index), kinds.contains(ports[index].kind) else {
            let candidates = ports.filter { kinds.contains($0.kind) }.map { "\($0.index) \($0.name)" }.joined(separator: ", ")
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "port \(index) is not \(use) (those are: \(candidates))")
        }
        return ports[index]
    }

    /// Sets a control input, refusing a value outside the port's bounds (naming them).
    public func setControl(_ index: Int, to value: Float) throws(AppExtensionError) {
        let port = try port(index, [.controlInput], "a control input")
        guard value.isFinite, value >= (port.lowerBound ?? -.infinity), value <= (port.upperBound ?? .infinity) else {
            let range = "\(port.lowerBound.map { "\($0)" } ?? "-∞") … \(port.upperBound.map { "\($0)" } ?? "∞")"
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier, "control \(index) (\(port.name)) takes \(range); \(value) is outside")
        }
        storeControl(index, value)
    }

    /// A control port's value now (an output's as the last run left it).
    public func control(_ index: Int) throws(AppExtensionError) -> Float {
        _ = try port(index, [.controlInput, .controlOutput], "a control port")
        return buffer(index, count: 1).withMemoryRebound(to: Float.self) { $0[0] }
    }

    private func storeControl(_ index: Int, _ value: Float) {
        buffer(index, count: 1).withMemoryRebound(to: Float.self) { $0[0] = value }
    }

    private func buffer(_ index: Int, count: Int) -> UnsafeMutableRawBufferPointer {
        // Checked against the area when the layout arrived.
        data.memory.bytes(at: data.offset + offsets[index], count: count * 4)!
    }

    /// The samples of an audio port (`maximumFrames` of them), in the memory the plugin reads
    /// (inputs) and writes (outputs). Valid only inside `body`; do not touch it during `run`.
    public func withSamples<Result>(
        port index: Int, _ body: (UnsafeMutableBufferPointer<Float>) throws -> Result
    ) throws -> Result {
        _ = try port(index, [.audioInput, .audioOutput], "an audio port")
        return try buffer(index, count: maximumFrames).withMemoryRebound(to: Float.self) { try body($0) }
    }

    /// An audio port's samples as a pointer that stays valid while this effect lives, for the C
    /// API (whose caller keeps it); nil for a port that is not an audio port.
    package func samplesPointer(port index: Int) -> UnsafeMutablePointer<Float>? {
        guard ports.indices.contains(index), ports[index].kind == .audioInput || ports[index].kind == .audioOutput else { return nil }
        return buffer(index, count: maximumFrames).baseAddress?.assumingMemoryBound(to: Float.self)
    }

    /// Runs the plugin over the first `frames` samples of its ports (activating it first when
    /// it is not active), within `timeout` (nil: the plugin's request timeout). A plugin that
    /// crashes or misses the deadline ends its worker: `workerCrashed` or `timedOut`.
    public func run(frames: Int, timeout: Duration? = nil) async throws {
        guard (0...maximumFrames).contains(frames) else {
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "run of \(frames) frames; the ports hold \(maximumFrames)")
        }
        let started = ContinuousClock.now
        _ = try await connection.send(ForeignPluginRequest.run(frames: UInt32(frames)).encoded, timeout: timeout)
        let took = ContinuousClock.now - started
        timingState.withLock { $0.record(took, frames: frames, sampleRate: sampleRate) }
    }

    /// Runs the plugin over the first `frames` samples of its ports on the calling thread, which
    /// it blocks until the worker has run them or `timeout` (nil: the plugin's request timeout)
    /// has passed — for a real-time audio thread, not a task. The same block as `run(frames:)`,
    /// without the request path. One thread at a time: a second is refused while a block runs.
    ///
    /// - Throws: `AppExtensionError`: `invalidArguments` for more frames than the ports hold or a
    ///   block already running on another thread; `timedOut` when the deadline passed (the worker
    ///   is stopped: a LADSPA run cannot be cancelled); the worker's end (`workerCrashed`, …).
    public func render(frames: Int, timeout: Duration? = nil) throws(AppExtensionError) {
        guard (0...maximumFrames).contains(frames) else {
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "run of \(frames) frames; the ports hold \(maximumFrames)")
        }
        let started = ContinuousClock.now
        try doorbell.run(frames: UInt32(frames), timeout: timeout ?? process.defaultRequestTimeout)
        let took = ContinuousClock.now - started
        timingState.withLock { $0.record(took, frames: frames, sampleRate: sampleRate) }
    }

    /// What the plugin reports while it runs: its log lines and what the sandbox refused it (a
    /// file, a socket), one `sandboxRefusal` each — how a plugin that needs more says so.
    public func messages() -> AppExtensionMessages {
        connection.messages()
    }

    /// Deactivates the plugin: the next run activates it again, its history cleared.
    public func reset() async throws {
        _ = try await connection.send(ForeignPluginRequest.reset.encoded)
    }
}

extension AudioEffect.Port {
    init(index: Int, _ port: LADSPAPortDescription, sampleRate: Float) {
        self.index = index
        name = port.name
        kind =
            port.isAudio
            ? (port.isInput ? .audioInput : .audioOutput) : (port.isInput ? .controlInput : .controlOutput)
        let bounds = port.bounds(sampleRate: sampleRate)
        lowerBound = bounds.lower
        upperBound = bounds.upper
        isToggle = port.hints & LADSPAPortDescription.toggled != 0
        isLogarithmic = port.hints & LADSPAPortDescription.logarithmic != 0
        isInteger = port.hints & LADSPAPortDescription.integer != 0
        defaultValue = kind == .controlInput ? port.defaultValue(sampleRate: sampleRate) : nil
    }
}
