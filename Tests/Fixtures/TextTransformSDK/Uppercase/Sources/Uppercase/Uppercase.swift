import PluginKit
import TextTransformExtensionKit

/// Everything an extension author writes: the binding and the method.
struct Uppercase: TextTransformExtension {
    @AppExtensionPoint.Bind
    var extensionPoint: AppExtensionPoint {
        AppExtensionPoint.Identifier(host: "com.example.transformer", name: "text-transforms")
    }

    func transform(_ input: String) async -> String? {
        input.uppercased()
    }
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Uppercase.self) }
