import Glibc

/// What a scanning worker read from a foreign plugin library: every plugin it holds, as the
/// library's own descriptors say. Written by the worker, so hostile to the host: every string and
/// count is bounded by the frame it came in, and the host checks the rest before use.
package enum ForeignLibraryDescription: Equatable, Sendable {
    case ladspa([LADSPAPluginDescription])
    case frei0r(Frei0rPluginDescription)

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: 1024)
        switch self {
        case .ladspa(let plugins):
            writer.write(ForeignPluginAdapter.ABI.ladspa.rawValue)
            writer.write(plugins) { $1.write(to: &$0) }
        case .frei0r(let plugin):
            writer.write(ForeignPluginAdapter.ABI.frei0r.rawValue)
            plugin.write(to: &writer)
        }
        return writer.bytes
    }

    package init(_ bytes: [UInt8]) throws(WireError) {
        var reader = PayloadReader(bytes)
        switch try reader.readUInt8() {
        case ForeignPluginAdapter.ABI.ladspa.rawValue:
            self = .ladspa(try reader.readArray { (reader) throws(WireError) in try LADSPAPluginDescription(from: &reader) })
        case ForeignPluginAdapter.ABI.frei0r.rawValue:
            self = .frei0r(try Frei0rPluginDescription(from: &reader))
        case let other: throw .malformedPayload("unknown foreign ABI \(other)")
        }
        guard reader.remaining == 0 else { throw .malformedPayload("\(reader.remaining) bytes after a library description") }
    }
}

/// One LADSPA descriptor of a library.
package struct LADSPAPluginDescription: Equatable, Sendable {
    /// Its index in `ladspa_descriptor(index)`.
    package var index: UInt32
    package var uniqueID: UInt64
    package var label: String
    package var name: String
    package var maker: String
    package var copyright: String
    /// `LADSPA_PROPERTY_*`: real-time 0x1, in-place broken 0x2, hard real-time capable 0x4.
    package var properties: UInt32
    package var ports: [LADSPAPortDescription]

    package init(
        index: UInt32, uniqueID: UInt64, label: String, name: String, maker: String, copyright: String, properties: UInt32,
        ports: [LADSPAPortDescription]
    ) {
        self.index = index
        self.uniqueID = uniqueID
        self.label = label
        self.name = name
        self.maker = maker
        self.copyright = copyright
        self.properties = properties
        self.ports = ports
    }

    func write(to writer: inout PayloadWriter) {
        writer.write(index)
        writer.write(uniqueID)
        for text in [label, name, maker, copyright] { writer.write(text) }
        writer.write(properties)
        writer.write(ports) { $1.write(to: &$0) }
    }

    init(from reader: inout PayloadReader) throws(WireError) {
        index = try reader.readUInt32()
        uniqueID = try reader.readUInt64()
        label = try reader.readString()
        name = try reader.readString()
        maker = try reader.readString()
        copyright = try reader.readString()
        properties = try reader.readUInt32()
        ports = try reader.readArray { (reader) throws(WireError) in try LADSPAPortDescription(from: &reader) }
    }
}

/// One port of a LADSPA plugin: its descriptor bits and range hint as the library gives them.
package struct LADSPAPortDescription: Equatable, Sendable {
    package var name: String
    /// `LADSPA_PORT_*`: input 0x1, output 0x2, control 0x4, audio 0x8.
    package var flags: UInt32
    /// `LADSPA_HINT_*`.
    package var hints: UInt32
    package var lowerBound: Float
    package var upperBound: Float

    package init(name: String, flags: UInt32, hints: UInt32, lowerBound: Float, upperBound: Float) {
        self.name = name
        self.flags = flags
        self.hints = hints
        self.lowerBound = lowerBound
        self.upperBound = upperBound
    }

    /// `LADSPA_HINT_*` bits.
    package static let boundedBelow: UInt32 = 0x1
    package static let boundedAbove: UInt32 = 0x2
    package static let toggled: UInt32 = 0x4
    package static let sampleRateScaled: UInt32 = 0x8
    package static let logarithmic: UInt32 = 0x10
    package static let integer: UInt32 = 0x20

    package var isInput: Bool { flags & 0x1 != 0 }
    package var isOutput: Bool { flags & 0x2 != 0 }
    package var isControl: Bool { flags & 0x4 != 0 }
    package var isAudio: Bool { flags & 0x8 != 0 }

    func write(to writer: inout PayloadWriter) {
        writer.write(name)
        writer.write(flags)
        writer.write(hints)
        writer.write(lowerBound.bitPattern)
        writer.write(upperBound.bitPattern)
    }

    init(from reader: inout PayloadReader) throws(WireError) {
        name = try reader.readString()
        flags = try reader.readUInt32()
        hints = try reader.readUInt32()
        lowerBound = Float(bitPattern: try reader.readUInt32())
        upperBound = Float(bitPattern: try reader.readUInt32())
    }
}

extension LADSPAPortDescription {
    /// The bounds the plugin declares, scaled by `sampleRate` where its hint says so.
    package func bounds(sampleRate: Float) -> (lower: Float?, upper: Float?) {
        let scale: Float = hints & Self.sampleRateScaled != 0 ? sampleRate : 1
        return (hints & Self.boundedBelow != 0 ? lowerBound * scale : nil, hints & Self.boundedAbove != 0 ? upperBound * scale : nil)
    }

    /// A control's default from its hint (`LADSPA_HINT_DEFAULT_*`, ladspa.h), as ladspa-sdk's
    /// `analyseplugin` computes it: minimum, maximum, low, middle and high read the bound fields
    /// whether or not the port is bounded on that side (plugins declare "0 to …, default 0.1"
    /// that way); low, middle and high weigh them 75/25, 50/50 and 25/75, geometrically for a
    /// logarithmic port (a bound of 0 then gives 0); without a default hint, the lower bound,
    /// else the upper, else 0; an integer port rounds it to the nearest, ties to even. A default
    /// outside the declared bounds (some plugins declare one) is brought inside them.
    package func defaultValue(sampleRate: Float) -> Float {
        let scale: Double = hints & Self.sampleRateScaled != 0 ? Double(sampleRate) : 1
        let (low, high) = (Double(lowerBound) * scale, Double(upperBound) * scale)
        func between(_ lowerWeight: Double) -> Double {
            if hints & Self.logarithmic != 0 {
                let geometric = exp(log(low) * lowerWeight + log(high) * (1 - lowerWeight))
                if !geometric.isNaN { return geometric }
            }
            return low * lowerWeight + high * (1 - lowerWeight)
        }
        let (lower, upper) = bounds(sampleRate: sampleRate)
        var value: Double
        switch hints & 0x3C0 {
        case 0x40: value = low
        case 0x80: value = between(0.75)
        case 0xC0: value = between(0.5)
        case 0x100: value = between(0.25)
        case 0x140: value = high
        case 0x200: value = 0
        case 0x240: value = 1
        case 0x280: value = 100
        case 0x2C0: value = 440
        default: value = lower.map(Double.init) ?? upper.map(Double.init) ?? 0
        }
        if hints & Self.integer != 0 { value = value.rounded(.toNearestOrEven) }
        var result = Float(value)
        if let lower, result < lower { result = lower }
        if let upper, result > upper { result = upper }
        return result
    }
}

/// A frei0r library's plugin, with its parameters and the value each has after `construct`
/// (frei0r declares no defaults: those values are them).
package struct Frei0rPluginDescription: Equatable, Sendable {
    package var name: String
    package var author: String
    package var explanation: String
    /// filter 0, source 1, mixer of two inputs 2, of three 3.
    package var pluginType: Int32
    /// BGRA8888 0, RGBA8888 1, packed 32-bit 2.
    package var colorModel: Int32
    package var frei0rVersion: Int32
    package var majorVersion: Int32
    package var minorVersion: Int32
    package var parameters: [Frei0rParameterDescription]

    package init(
        name: String, author: String, explanation: String, pluginType: Int32, colorModel: Int32, frei0rVersion: Int32,
        majorVersion: Int32, minorVersion: Int32, parameters: [Frei0rParameterDescription]
    ) {
        self.name = name
        self.author = author
        self.explanation = explanation
        self.pluginType = pluginType
        self.colorModel = colorModel
        self.frei0rVersion = frei0rVersion
        self.majorVersion = majorVersion
        self.minorVersion = minorVersion
        self.parameters = parameters
    }

    /// How many input frames an update takes: a source none, a filter one, mixers two or three.
    package var inputCount: Int? {
        switch pluginType {
        case 0: 1
        case 1: 0
        case 2: 2
        case 3: 3
        default: nil
        }
    }

    func write(to writer: inout PayloadWriter) {
        for text in [name, author, explanation] { writer.write(text) }
        for number in [pluginType, colorModel, frei0rVersion, majorVersion, minorVersion] { writer.write(number) }
        writer.write(parameters) { $1.write(to: &$0) }
    }

    init(from reader: inout PayloadReader) throws(WireError) {
        name = try reader.readString()
        author = try reader.readString()
        explanation = try reader.readString()
        pluginType = try reader.readInt32()
        colorModel = try reader.readInt32()
        frei0rVersion = try reader.readInt32()
        majorVersion = try reader.readInt32()
        minorVersion = try reader.readInt32()
        parameters = try reader.readArray { (reader) throws(WireError) in try Frei0rParameterDescription(from: &reader) }
    }
}

package struct Frei0rParameterDescription: Equatable, Sendable {
    package var name: String
    package var explanation: String
    /// bool 0, double 1, color 2, position 3, string 4.
    package var type: Int32
    /// The value after `construct`; nil when the scan could not construct an instance.
    package var initialValue: Frei0rParameterValue?

    package init(name: String, explanation: String, type: Int32, initialValue: Frei0rParameterValue?) {
        self.name = name
        self.explanation = explanation
        self.type = type
        self.initialValue = initialValue
    }

    func write(to writer: inout PayloadWriter) {
        writer.write(name)
        writer.write(explanation)
        writer.write(type)
        writer.write(initialValue != nil)
        initialValue?.write(to: &writer)
    }

    init(from reader: inout PayloadReader) throws(WireError) {
        name = try reader.readString()
        explanation = try reader.readString()
        type = try reader.readInt32()
        initialValue = try reader.readBool() ? try Frei0rParameterValue(from: &reader) : nil
    }
}
