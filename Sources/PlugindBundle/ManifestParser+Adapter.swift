import PlugindSystem
import PlugindTypes

extension ObjectReader {
    static let adapterKeys: Set<String> = ["abi", "plugin", "buffers"]

    /// `{"abi": "ladspa", "plugin": "amp_mono", "buffers": 3}`: the bundle is a plugin of a
    /// foreign library, whose absolute path is `library`.
    mutating func readAdapter(library: String) throws(ManifestError) -> ForeignPluginDeclaration? {
        guard let value = members["adapter"] else {
            guard !library.hasPrefix("/") else {
                throw error("library", "must be relative to the bundle (or a bare soname), found '\(library)'")
            }
            return nil
        }
        var adapter = ObjectReader(file: file, path: keyPath("adapter"), value: value)
        try adapter.requireObject()
        adapter.warnUnknownKeys(Self.adapterKeys)
        warnings += adapter.warnings
        let name = try adapter.requiredString("abi")
        guard let abi = ForeignABI(name: name) else {
            let known = ForeignABI.allCases.map(\.name).joined(separator: ", ")
            throw adapter.error("abi", "is '\(InertText.escape(name))'; plugind hosts \(known)")
        }
        let plugin = try adapter.optionalString("plugin") ?? ""
        switch abi {
        case .ladspa where plugin.isEmpty: throw adapter.error("plugin", "is missing: a LADSPA plugin is named by its label")
        case .frei0r where !plugin.isEmpty: throw adapter.error("plugin", "must be absent: a frei0r library is one plugin")
        default: break
        }
        guard let buffers = try adapter.positiveInteger("buffers") else {
            throw adapter.error("buffers", "is missing (the ports of a LADSPA plugin, the frames of a frei0r one)")
        }
        guard buffers <= ForeignABI.maximumBuffers else {
            throw adapter.error("buffers", "is \(buffers); at most \(ForeignABI.maximumBuffers)")
        }
        guard library.hasPrefix("/") else {
            throw error("library", "must be the absolute path of the \(abi.name) library, found '\(library)'")
        }
        return ForeignPluginDeclaration(abi: abi, plugin: plugin, buffers: buffers)
    }
}
