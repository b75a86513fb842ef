extension PluginExport {
    /// Returns the descriptor for an `AppExtension`; call it from the one function the plugin
    /// exports:
    ///
    ///     @c(plugind_plugin_entry)
    ///     public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Uppercase.self) }
    public static func entry<Extension: AppExtension>(_ type: Extension.Type) -> UnsafeRawPointer {
        entry(AppExtensionPlugin<Extension>.self)
    }
}

/// Runs an `AppExtension` as a `Plugin`: one instance, its configuration deciding on every
/// connection, each request answered by its connection's `requestHandler`.
final class AppExtensionPlugin<Extension: AppExtension>: Plugin {
    static var name: String { String(describing: Extension.self) }
    /// Requests run on the worker threads that handle them (`CallingThreadExecutor`): more than
    /// one at once, so that a host request nested in an ask (the host's handler sending to the
    /// plugin) finds a thread. The manifest's `concurrency` may lower it.
    static var concurrency: Int { 8 }

    private let configuration: Extension.Configuration

    init(host: PluginHost) {
        configuration = Extension().configuration
    }

    func accept(_ connection: PluginConnection) throws {
        guard configuration.accept(connection: connection) else {
            throw PluginError("\(Self.name) did not accept the connection")
        }
    }

    func close(_ connection: PluginConnection) {
        connection.requestHandler = nil
    }

    func handle(_ request: PluginRequest) throws -> [UInt8] {
        guard let connection = request.connection, let handler = connection.requestHandler else {
            throw PluginError("\(Self.name) has no request handler on this connection")
        }
        let bytes = request.bytes
        return try CallingThreadExecutor.run { try await handler(bytes) }
    }
}
