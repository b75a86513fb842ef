import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindTypes
import PlugindWire

/// One plugin discovery found: what `plugind list` shows and the bundle it is listed through.
package struct ForeignPluginListing: Sendable, Hashable, Codable {
    package var identifier: String
    package var abi: String
    package var library: String
    /// LADSPA: the label; frei0r: empty.
    package var plugin: String
    package var name: String
    package var summary: String
}

/// The bundles discovery makes for foreign plugins, one per plugin, in a root of the state
/// directory (`<state>/foreign-plugins/<identity>.appex/manifest.json`): a manifest naming the
/// package's library, the plugin and its adapter. Through them the catalog lists, the owner
/// approves and the host launches a foreign plugin as any other; the approval pins the manifest
/// (so the plugin and its ports) and, as for a system library, who may change the library (root,
/// through the package manager), not its bytes: a package update keeps the plugin approved.
package enum ForeignPluginBundles {
    static let directoryName = "foreign-plugins"

    package static func root(stateDirectory: String) -> String { stateDirectory + "/" + directoryName }

    /// The manifests of the plugins `description` holds, by identity.
    static func manifests(
        for library: ForeignPluginLibrary, canonicalPath: String, description: ForeignLibraryDescription
    ) -> [(listing: ForeignPluginListing, manifest: [UInt8])] {
        switch description {
        case .ladspa(let plugins):
            return plugins.compactMap { plugin in
                guard !plugin.label.isEmpty else { return nil }
                let audioIn = plugin.ports.filter { $0.isAudio && $0.isInput }.count
                let audioOut = plugin.ports.filter { $0.isAudio && $0.isOutput }.count
                let controls = plugin.ports.filter { $0.isControl && $0.isInput }.map(controlText)
                var properties: [String] = []
                if plugin.properties & 0x1 != 0 { properties.append("real-time") }
                if plugin.properties & 0x2 != 0 { properties.append("in-place broken") }
                if plugin.properties & 0x4 != 0 { properties.append("hard real-time capable") }
                let summary =
                    "LADSPA plugin \(plugin.uniqueID) '\(plugin.label)' by \(plugin.maker.isEmpty ? "an unnamed maker" : plugin.maker)"
                    + (plugin.copyright.isEmpty ? "" : " (\(plugin.copyright))")
                    + "; \(audioIn) audio input\(audioIn == 1 ? "" : "s"), \(audioOut) audio output\(audioOut == 1 ? "" : "s")"
                    + (controls.isEmpty ? "" : "; controls: \(controls.joined(separator: ", "))")
                    + (properties.isEmpty ? "" : "; \(properties.joined(separator: ", "))")
                var capabilities = ["audio-inputs:\(audioIn)", "audio-outputs:\(audioOut)"]
                capabilities += properties.map { "ladspa:" + $0.replacing(" ", with: "-") }
                return entry(
                    library, canonicalPath: canonicalPath, label: plugin.label, name: plugin.name.isEmpty ? plugin.label : plugin.name,
                    version: "1", summary: summary, capabilities: capabilities, buffers: UInt64(plugin.ports.count))
            }
        case .frei0r(let plugin):
            guard let inputs = plugin.inputCount else { return [] }
            let kind = ["filter", "source", "mixer2", "mixer3"][Int(plugin.pluginType)]
            let model =
                ["bgra8888", "rgba8888", "packed32"].indices.contains(Int(plugin.colorModel))
                ? ["bgra8888", "rgba8888", "packed32"][Int(plugin.colorModel)] : "color-model-\(plugin.colorModel)"
            let parameters = plugin.parameters.map(parameterText)
            let summary =
                "frei0r \(kind) by \(plugin.author.isEmpty ? "an unnamed author" : plugin.author), \(model)"
                + (plugin.explanation.isEmpty ? "" : ": \(plugin.explanation)")
                + (parameters.isEmpty ? "" : "; parameters: \(parameters.joined(separator: ", "))")
            return [
                entry(
                    library, canonicalPath: canonicalPath, label: nil, name: plugin.name.isEmpty ? library.stem : plugin.name,
                    version: "\(plugin.majorVersion).\(plugin.minorVersion)", summary: summary,
                    capabilities: ["frei0r:" + kind, "color-model:" + model], buffers: UInt64(inputs + 1))
            ]
        }
    }

    /// "Delay (0…5, default 1)", "Cutoff (0…0.5 × the sample rate, default 440 at 48 kHz, logarithmic)".
    static func controlText(_ port: LADSPAPortDescription) -> String {
        let scaled = port.hints & LADSPAPortDescription.sampleRateScaled != 0
        let (lower, upper) = port.bounds(sampleRate: 1)
        var parts: [String] = []
        if lower != nil || upper != nil {
            parts.append("\(lower.map(number) ?? "")…\(upper.map(number) ?? "")" + (scaled ? " × the sample rate" : ""))
        }
        parts.append("default \(number(port.defaultValue(sampleRate: 48_000)))" + (scaled ? " at 48 kHz" : ""))
        if port.hints & LADSPAPortDescription.toggled != 0 { parts.append("on or off") }
        if port.hints & LADSPAPortDescription.integer != 0 { parts.append("whole numbers") }
        if port.hints & LADSPAPortDescription.logarithmic != 0 { parts.append("logarithmic") }
        return "\(port.name) (\(parts.joined(separator: ", ")))"
    }

    /// "Amount (double, initially 0.5: how much)".
    static func parameterText(_ parameter: Frei0rParameterDescription) -> String {
        let types = ["bool", "double", "color", "position", "string"]
        let type = types.indices.contains(Int(parameter.type)) ? types[Int(parameter.type)] : "type \(parameter.type)"
        let initial: String? =
            switch parameter.initialValue {
            case .bool(let flag)?: flag ? "on" : "off"
            case .double(let value)?: number(Float(value))
            case .color(let red, let green, let blue)?: "\(number(red)),\(number(green)),\(number(blue))"
            case .position(let x, let y)?: "\(number(Float(x))),\(number(Float(y)))"
            case .string(let text)?: "'\(text.prefix(64))'"
            case nil: nil
            }
        return "\(parameter.name) (\(type)" + (initial.map { ", initially \($0)" } ?? "")
            + (parameter.explanation.isEmpty ? "" : ": \(parameter.explanation)") + ")"
    }

    /// A float as people write it: 1, 0.5, 440, 1e+06.
    private static func number(_ value: Float) -> String {
        value.isFinite && value == value.rounded() && abs(value) < 1e9 ? String(Int(value)) : "\(value)"
    }

    private struct ManifestFile: Encodable {
        struct Adapter: Encodable {
            var abi: String
            var plugin: String?
            var buffers: UInt64
        }
        var manifestVersion = 1
        var identifier: String
        var name: String
        var version: String
        var extensionPoint: String
        var library: String
        var description: String
        var capabilities: [String]
        var adapter: Adapter
    }

    private static func entry(
        _ library: ForeignPluginLibrary, canonicalPath: String, label: String?, name: String, version: String, summary: String,
        capabilities: [String], buffers: UInt64
    ) -> (listing: ForeignPluginListing, manifest: [UInt8]) {
        let identifier = ForeignPluginIdentity.of(library, label: label)
        let file = ManifestFile(
            identifier: identifier, name: bounded(name), version: version,
            extensionPoint: ForeignPluginIdentity.extensionPoint(library.abi),
            library: canonicalPath, description: bounded(summary), capabilities: capabilities,
            adapter: .init(abi: library.abi.name, plugin: label, buffers: buffers))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let bytes = (try? encoder.encode(file)).map { [UInt8]($0) } ?? []
        let listing = ForeignPluginListing(
            identifier: identifier, abi: library.abi.name, library: canonicalPath, plugin: label ?? "", name: file.name,
            summary: file.description)
        return (listing, bytes)
    }

    /// Text a library gave, cut to what a manifest string may hold, whitespace runs folded, and
    /// never empty.
    private static func bounded(_ text: String) -> String {
        var folded = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        while folded.utf8.count > 4000 { folded.removeLast() }
        return folded.isEmpty ? "-" : folded
    }

    /// Makes the root hold exactly `manifests` (by identity), writing only what changed, so that
    /// an unchanged plugin keeps its bundle's identity and digest (and its approval).
    static func write(_ manifests: [String: [UInt8]], root: String) throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        for (identifier, bytes) in manifests {
            let bundle = root + "/" + identifier + ".appex"
            let path = bundle + "/manifest.json"
            if let existing = FileManager.default.contents(atPath: path), [UInt8](existing) == bytes { continue }
            try FileManager.default.createDirectory(
                atPath: bundle, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            try AtomicFile.replace(path, with: bytes, mode: 0o644)
        }
        let present = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for name in present where name.hasSuffix(".appex") && manifests[String(name.dropLast(6))] == nil {
            try? FileManager.default.removeItem(atPath: root + "/" + name)
        }
    }
}
