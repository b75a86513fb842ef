package import PlugindTypes

/// A plugin of a foreign ABI (LADSPA, frei0r) that a worker drives through an adapter of its own
/// rather than through plugind's plugin ABI: the library is the unchanged file its package
/// installed. Part of a worker's `LoadConfiguration`.
package struct ForeignPluginAdapter: Equatable, Sendable {
    package typealias ABI = ForeignABI

    package var abi: ABI
    /// LADSPA: the label of the library's descriptor; frei0r: empty (a library is one plugin).
    /// Empty for a scanning worker, which only describes the library.
    package var plugin: String
    /// The bytes of the shared data area the adapter lays its ports or frames out in.
    package var dataBytes: UInt64

    package init(abi: ABI, plugin: String, dataBytes: UInt64) {
        self.abi = abi
        self.plugin = plugin
        self.dataBytes = dataBytes
    }

    /// The most a data area may hold: four frames of frei0r's largest size.
    package static let maximumDataBytes: UInt64 = 4 * 2048 * 2048 * 4

    /// The alignment of every buffer an adapter lays out in its data area: frei0r asks 16 bytes,
    /// a cache line keeps one port's samples off another's line.
    package static let bufferAlignment = 64

    /// `value` rounded up to `bufferAlignment`, or nil when that overflows.
    package static func aligned(_ value: UInt64) -> UInt64? {
        let alignment = UInt64(bufferAlignment)
        let (sum, overflow) = value.addingReportingOverflow(alignment - 1)
        return overflow ? nil : sum / alignment * alignment
    }
}

/// A request to an adapter, and its encoding: the first byte names it. The hot requests (`run`,
/// `update`) carry only a frame count or a time; samples and pixels stay in the data area.
package enum ForeignPluginRequest: Equatable, Sendable {
    /// Every plugin of the library, as `ForeignLibraryDescription`.
    case describe
    /// LADSPA: instantiate at `sampleRate` with room for `maximumFrames` per run and connect every
    /// port into the data area; answered with `ForeignPortLayout`.
    case instantiate(sampleRate: Double, maximumFrames: UInt32)
    /// LADSPA: activate if not active yet, then `run(frames)`.
    case run(frames: UInt32)
    /// LADSPA: deactivate and activate again (history cleared, connections kept).
    case reset
    /// LADSPA: place a `ForeignBlockDoorbell` in the data area and serve it on a thread of its
    /// own from now on; answered with its offset (`ForeignBlockDoorbell.encodedOffset`).
    case openDoorbell
    /// frei0r: construct at `width`×`height` with one frame per input and the output in the data
    /// area; answered with `ForeignPortLayout`.
    case construct(width: UInt32, height: UInt32)
    /// frei0r: a parameter's value.
    case setParameter(index: UInt32, value: Frei0rParameterValue)
    /// frei0r: a parameter's value now; answered with an encoded `Frei0rParameterValue`.
    case getParameter(index: UInt32)
    /// frei0r: one frame at `time` (seconds) from the inputs in the data area into its output.
    case update(time: Double)

    private enum Code: UInt8 {
        case describe = 1
        case instantiate = 0x10
        case run = 0x11
        case reset = 0x12
        case openDoorbell = 0x13
        case construct = 0x20
        case setParameter = 0x21
        case getParameter = 0x22
        case update = 0x23
    }

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: 16)
        switch self {
        case .describe: writer.write(Code.describe.rawValue)
        case .instantiate(let sampleRate, let maximumFrames):
            writer.write(Code.instantiate.rawValue)
            writer.write(sampleRate.bitPattern)
            writer.write(maximumFrames)
        case .run(let frames):
            writer.write(Code.run.rawValue)
            writer.write(frames)
        case .reset: writer.write(Code.reset.rawValue)
        case .openDoorbell: writer.write(Code.openDoorbell.rawValue)
        case .construct(let width, let height):
            writer.write(Code.construct.rawValue)
            writer.write(width)
            writer.write(height)
        case .setParameter(let index, let value):
            writer.write(Code.setParameter.rawValue)
            writer.write(index)
            value.write(to: &writer)
        case .getParameter(let index):
            writer.write(Code.getParameter.rawValue)
            writer.write(index)
        case .update(let time):
            writer.write(Code.update.rawValue)
            writer.write(time.bitPattern)
        }
        return writer.bytes
    }

    package init(_ bytes: [UInt8]) throws(WireError) {
        var reader = PayloadReader(bytes)
        guard let code = Code(rawValue: try reader.readUInt8()) else {
            throw .malformedPayload("unknown adapter request \(bytes.first ?? 0)")
        }
        switch code {
        case .describe: self = .describe
        case .instantiate:
            self = .instantiate(sampleRate: Double(bitPattern: try reader.readUInt64()), maximumFrames: try reader.readUInt32())
        case .run: self = .run(frames: try reader.readUInt32())
        case .reset: self = .reset
        case .openDoorbell: self = .openDoorbell
        case .construct: self = .construct(width: try reader.readUInt32(), height: try reader.readUInt32())
        case .setParameter: self = .setParameter(index: try reader.readUInt32(), value: try Frei0rParameterValue(from: &reader))
        case .getParameter: self = .getParameter(index: try reader.readUInt32())
        case .update: self = .update(time: Double(bitPattern: try reader.readUInt64()))
        }
        guard reader.remaining == 0 else { throw .malformedPayload("\(reader.remaining) bytes after an adapter request") }
    }
}

/// Where an instance's buffers lie in the data area, as byte offsets: LADSPA one per port in port
/// order (a control port's one value, an audio port's `maximumFrames` samples); frei0r the
/// inputs' frames and then the output's.
package struct ForeignPortLayout: Equatable, Sendable {
    package var offsets: [UInt64]

    package init(offsets: [UInt64]) { self.offsets = offsets }

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: 4 + 8 * offsets.count)
        writer.write(offsets) { $0.write($1) }
        return writer.bytes
    }

    package init(_ bytes: [UInt8]) throws(WireError) {
        var reader = PayloadReader(bytes)
        offsets = try reader.readArray { (reader) throws(WireError) in try reader.readUInt64() }
        guard reader.remaining == 0 else { throw .malformedPayload("\(reader.remaining) bytes after a port layout") }
    }
}

/// A frei0r parameter's value, by the parameter's type.
package enum Frei0rParameterValue: Equatable, Sendable {
    case bool(Bool)
    case double(Double)
    case color(red: Float, green: Float, blue: Float)
    case position(x: Double, y: Double)
    case string(String)

    /// frei0r's type numbers (`F0R_PARAM_*`).
    package var typeNumber: Int32 {
        switch self {
        case .bool: 0
        case .double: 1
        case .color: 2
        case .position: 3
        case .string: 4
        }
    }

    package func write(to writer: inout PayloadWriter) {
        writer.write(UInt8(typeNumber))
        switch self {
        case .bool(let value): writer.write(value)
        case .double(let value): writer.write(value.bitPattern)
        case .color(let red, let green, let blue):
            for component in [red, green, blue] { writer.write(component.bitPattern) }
        case .position(let x, let y):
            writer.write(x.bitPattern)
            writer.write(y.bitPattern)
        case .string(let value): writer.write(value)
        }
    }

    package init(from reader: inout PayloadReader) throws(WireError) {
        switch try reader.readUInt8() {
        case 0: self = .bool(try reader.readBool())
        case 1: self = .double(Double(bitPattern: try reader.readUInt64()))
        case 2:
            self = .color(
                red: Float(bitPattern: try reader.readUInt32()), green: Float(bitPattern: try reader.readUInt32()),
                blue: Float(bitPattern: try reader.readUInt32()))
        case 3: self = .position(x: Double(bitPattern: try reader.readUInt64()), y: Double(bitPattern: try reader.readUInt64()))
        case 4: self = .string(try reader.readString())
        case let other: throw .malformedPayload("unknown frei0r parameter type \(other)")
        }
    }

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: 32)
        write(to: &writer)
        return writer.bytes
    }

    package init(_ bytes: [UInt8]) throws(WireError) {
        var reader = PayloadReader(bytes)
        try self.init(from: &reader)
        guard reader.remaining == 0 else { throw .malformedPayload("\(reader.remaining) bytes after a parameter value") }
    }
}
