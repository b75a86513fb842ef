import PluginKit

/// The Swift twin of the C text filter: upper-cases ASCII letters, leaves every other byte alone.
final class UppercaseTextFilter: Plugin {
    static let name = "Upper-case text filter (Swift)"

    init(host: PluginHost) {}

    func handle(_ request: PluginRequest) throws -> [UInt8] {
        request.bytes.map { byte in (0x61...0x7A).contains(byte) ? byte - 0x20 : byte }
    }
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(UppercaseTextFilter.self) }
