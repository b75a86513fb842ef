import PlugindEngine
import PlugindSystem
import PlugindTypes
import PlugindWire

/// A frei0r filter, source or mixer, unchanged from its package, running in its own confined
/// worker (Linux addition). Its input and output frames live in memory shared with the worker
/// (16-byte aligned, top line first, 4 bytes a pixel in the plugin's colour model): write the
/// inputs, `update(time:)`, read the output. The call carries only the time. One instance per
/// process, single-threaded as frei0r requires.
public final class VideoFilter: Sendable {
    public enum Kind: Sendable, Hashable {
        case filter, source, mixer2, mixer3
    }

    public enum ColorModel: Sendable, Hashable {
        case bgra8888, rgba8888, packed32
        case unknown(Int32)
    }

    /// A parameter's value, by its type. frei0r's doubles, and a colour's components, lie in 0…1.
    public enum Value: Sendable, Hashable {
        case bool(Bool)
        case double(Double)
        case color(red: Float, green: Float, blue: Float)
        case position(x: Double, y: Double)
        case string(String)
    }

    public struct Parameter: Sendable, Hashable {
        public enum ParameterType: Sendable, Hashable {
            case bool, double, color, position, string
            case unknown(Int32)
        }

        public let index: Int
        public let name: String
        public let explanation: String
        public let type: ParameterType
        /// The value right after the instance was made: frei0r's defaults.
        public let initialValue: Value?
    }

    public let process: AppExtensionProcess
    public let name: String
    public let author: String
    public let explanation: String
    public let kind: Kind
    public let colorModel: ColorModel
    public let parameters: [Parameter]
    public let width: Int
    public let height: Int
    /// The inputs an update reads: none for a source, one for a filter, two or three for mixers.
    public let inputCount: Int

    private let connection: AppExtensionConnection
    private let data: SharedDataArea
    /// The inputs' frames, then the output's.
    private let offsets: [Int]
    private let parameterTypes: [Int32]

    /// Describes the plugin and makes an instance for frames of `width`×`height`.
    ///
    /// - Throws: `AppExtensionError`: `unsupported` when the process is not a frei0r plugin's;
    ///   `invalidArguments` for a size that is not a multiple of 8 from 8 to 2048; what the
    ///   worker reports (`pluginError` when `f0r_construct` fails).
    public init(process: AppExtensionProcess, width: Int, height: Int) async throws {
        let plugin = process.plan.pluginIdentifier
        guard process.plan.load.adapter?.abi == .frei0r, let data = process.sharedData else {
            throw AppExtensionError(.unsupported, plugin: plugin, "is not a frei0r plugin")
        }
        for (what, size) in [("width", width), ("height", height)] where !(8...2048).contains(size) || size % 8 != 0 {
            throw AppExtensionError(.invalidArguments, plugin: plugin, "\(what) \(size): frei0r sizes are multiples of 8 from 8 to 2048")
        }
        let connection = try await process.makeConnection()
        let description: Frei0rPluginDescription
        let layout: ForeignPortLayout
        do {
            guard
                case .frei0r(let described) = try ForeignLibraryDescription(
                    try await connection.send(ForeignPluginRequest.describe.encoded))
            else {
                throw AppExtensionError(.protocolViolation, plugin: plugin, "described itself as something other than a frei0r plugin")
            }
            description = described
            layout = try ForeignPortLayout(
                try await connection.send(ForeignPluginRequest.construct(width: UInt32(width), height: UInt32(height)).encoded))
        } catch let error as WireError {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "sent an answer that does not decode: \(error)")
        }
        guard let inputs = description.inputCount, layout.offsets.count == inputs + 1 else {
            throw AppExtensionError(.protocolViolation, plugin: plugin, "laid out \(layout.offsets.count) frames for its plugin type")
        }
        let frameBytes = UInt64(width * height * 4)
        var offsets: [Int] = []
        for offset in layout.offsets {
            guard offset % 16 == 0, offset <= UInt64(data.count), frameBytes <= UInt64(data.count) - offset else {
                throw AppExtensionError(.protocolViolation, plugin: plugin, "laid a frame out beyond the shared data area")
            }
            offsets.append(Int(offset))
        }
        self.process = process
        self.connection = connection
        self.data = data
        self.offsets = offsets
        self.width = width
        self.height = height
        self.inputCount = inputs
        self.name = description.name
        self.author = description.author
        self.explanation = description.explanation
        self.kind = [.filter, .source, .mixer2, .mixer3][Int(description.pluginType)]
        self.colorModel =
            switch description.colorModel {
            case 0: .bgra8888
            case 1: .rgba8888
            case 2: .packed32
            default: .unknown(description.colorModel)
            }
        self.parameters = description.parameters.enumerated().map {
            Parameter(
                index: $0.offset, name: $0.element.name, explanation: $0.element.explanation,
                type: Parameter.ParameterType($0.element.type),
                initialValue: $0.element.initialValue.map(Value.init))
        }
        self.parameterTypes = description.parameters.map(\.type)
    }

    private var pluginIdentifier: String { process.plan.pluginIdentifier }

    private func frame(_ slot: Int) -> UnsafeMutableRawBufferPointer {
        // Checked against the area when the layout arrived.
        data.memory.bytes(at: data.offset + offsets[slot], count: width * height * 4)!
    }

    /// Input `index`'s frame (`width`×`height`×4 bytes), which the next update reads.
    public func withInput<Result>(_ index: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Result) throws -> Result {
        guard (0..<inputCount).contains(index) else {
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "input \(index): the plugin takes \(inputCount)")
        }
        return try body(frame(index))
    }

    /// The output frame as the last update left it. The plugin may write it only during `update`.
    public func withOutput<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(frame(inputCount)))
    }

    /// A frame as a pointer that stays valid while this filter lives, for the C API: input
    /// `slot` (0 ..< inputCount), or the output at `inputCount`; nil beyond.
    package func framePointer(_ slot: Int) -> UnsafeMutablePointer<UInt8>? {
        guard (0...inputCount).contains(slot) else { return nil }
        return frame(slot).baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    /// Sets parameter `index`, refusing a value of another type or out of range (naming it).
    public func setParameter(_ index: Int, to value: Value) async throws {
        guard parameters.indices.contains(index) else {
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier, "no parameter \(index): the plugin has \(parameters.count)")
        }
        let wire = value.wire
        guard wire.typeNumber == parameterTypes[index] else {
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier,
                "parameter \(index) (\(parameters[index].name)) is of frei0r type \(parameterTypes[index]); the value is \(value)")
        }
        let inRange: Bool =
            switch value {
            case .double(let number): (0...1).contains(number)
            case .color(let red, let green, let blue): [red, green, blue].allSatisfy { (0...1).contains($0) }
            case .position(let x, let y): x.isFinite && y.isFinite
            case .bool, .string: true
            }
        guard inRange else {
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier, "parameter \(index) (\(parameters[index].name)) takes 0…1; \(value) is outside"
            )
        }
        _ = try await connection.send(ForeignPluginRequest.setParameter(index: UInt32(index), value: wire).encoded)
    }

    /// Parameter `index`'s value now, as the plugin reports it.
    public func parameter(_ index: Int) async throws -> Value {
        guard parameters.indices.contains(index) else {
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier, "no parameter \(index): the plugin has \(parameters.count)")
        }
        do {
            return Value(
                try Frei0rParameterValue(try await connection.send(ForeignPluginRequest.getParameter(index: UInt32(index)).encoded)))
        } catch let error as WireError {
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, "sent a parameter value that does not decode: \(error)")
        }
    }

    /// What the plugin reports while it runs: its log lines and what the sandbox refused it.
    public func messages() -> AppExtensionMessages {
        connection.messages()
    }

    /// Renders one frame at `time` (seconds) from the inputs into the output, within `timeout`
    /// (nil: the plugin's request timeout).
    public func update(time: Double, timeout: Duration? = nil) async throws {
        guard time.isFinite else { throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "update at time \(time)") }
        _ = try await connection.send(ForeignPluginRequest.update(time: time).encoded, timeout: timeout)
    }
}

extension VideoFilter.Parameter.ParameterType {
    init(_ number: Int32) {
        switch number {
        case 0: self = .bool
        case 1: self = .double
        case 2: self = .color
        case 3: self = .position
        case 4: self = .string
        default: self = .unknown(number)
        }
    }
}

extension VideoFilter.Value {
    init(_ value: Frei0rParameterValue) {
        switch value {
        case .bool(let flag): self = .bool(flag)
        case .double(let number): self = .double(number)
        case .color(let red, let green, let blue): self = .color(red: red, green: green, blue: blue)
        case .position(let x, let y): self = .position(x: x, y: y)
        case .string(let text): self = .string(text)
        }
    }

    var wire: Frei0rParameterValue {
        switch self {
        case .bool(let flag): .bool(flag)
        case .double(let number): .double(number)
        case .color(let red, let green, let blue): .color(red: red, green: green, blue: blue)
        case .position(let x, let y): .position(x: x, y: y)
        case .string(let text): .string(text)
        }
    }
}
