import PluginKit
import TextTransformExtensionKit

/// Reverses the text; has nothing to offer for an empty one.
struct Reverse: TextTransformExtension {
    @AppExtensionPoint.Bind
    var extensionPoint: AppExtensionPoint {
        AppExtensionPoint.Identifier(host: "com.example.transformer", name: "text-transforms")
    }

    func transform(_ input: String) async -> String? {
        input.isEmpty ? nil : String(input.reversed())
    }
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Reverse.self) }
