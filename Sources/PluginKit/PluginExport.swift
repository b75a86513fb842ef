internal import PlugindPluginABI
import Synchronization

/// Builds the C descriptor that makes a `Plugin` type loadable by plugind.
public enum PluginExport {
    /// Returns the descriptor for `type`; call it from the one function the plugin exports:
    ///
    ///     @c(plugind_plugin_entry)
    ///     public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(MyPlugin.self) }
    ///
    /// The descriptor is created once and lives as long as the library.
    public static func entry<P: Plugin>(_ type: P.Type) -> UnsafeRawPointer {
        registration.withLock { registration in
            if let existing = registration {
                return UnsafeRawPointer(existing.descriptor)
            }
            let created = Registration(type: type)
            registration = created
            return UnsafeRawPointer(created.descriptor)
        }
    }

    private static let registration = Mutex<Registration?>(nil)

    static var registeredType: (any Plugin.Type)? {
        registration.withLock { $0?.type }
    }
}

/// The registered plugin type and its C descriptor.
private struct Registration: @unchecked Sendable {
    // @unchecked: `descriptor` is written once here and only read afterwards (by the worker).
    let type: any Plugin.Type
    let descriptor: UnsafeMutablePointer<plugind_plugin>

    init(type: any Plugin.Type) {
        self.type = type
        descriptor = .allocate(capacity: 1)
        descriptor.initialize(
            to: plugind_plugin(
                abi_version: UInt32(PLUGIND_PLUGIN_ABI_VERSION),
                size: UInt32(MemoryLayout<plugind_plugin>.size),
                name: UnsafePointer(strdupOrNil(type.name)),
                version: UnsafePointer(strdupOrNil(type.version)),
                init: { host, state, errorResponse in
                    PluginBridge.initialize(host: host, state: state, errorResponse: errorResponse)
                },
                handle: { state, request, response in PluginBridge.handle(state: state, request: request, response: response) },
                deinit: { state in PluginBridge.shutdown(state: state) },
                concurrency: UInt32(clamping: max(type.concurrency, 1)),
                reserved: 0,
                accept: { state, connection, connectionState, refusal in
                    PluginBridge.accept(state: state, connection: connection, connectionState: connectionState, refusal: refusal)
                },
                close: { state, connection, connectionState in
                    PluginBridge.close(state: state, connection: connection, connectionState: connectionState)
                }
            )
        )
    }
}

private func strdupOrNil(_ text: String) -> UnsafeMutablePointer<CChar>? {
    let bytes = Array(text.utf8CString)
    let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
    copy.initialize(from: bytes, count: bytes.count)
    return copy
}

/// The instance the worker's `state` pointer refers to.
private final class PluginInstance {
    let plugin: any Plugin
    let host: PluginHost

    init(plugin: any Plugin, host: PluginHost) {
        self.plugin = plugin
        self.host = host
    }
}

/// What the worker keeps for an accepted connection (its `connection_state`).
private final class ConnectionState {
    let connection: PluginConnection
    init(_ connection: PluginConnection) { self.connection = connection }
}

/// The C entry points of the descriptor, translating between the ABI and the `Plugin` protocol.
private enum PluginBridge {
    static func initialize(
        host: UnsafePointer<plugind_host>,
        state: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
        errorResponse: OpaquePointer
    ) -> Int32 {
        let pluginHost = PluginHost(table: host)
        guard let type = PluginExport.registeredType else {
            host.pointee.set_error(errorResponse, "PluginKit: no plugin type registered")
            return 1
        }
        do {
            let instance = PluginInstance(plugin: try type.init(host: pluginHost), host: pluginHost)
            state.pointee = Unmanaged.passRetained(instance).toOpaque()
            return PLUGIND_PLUGIN_OK
        } catch {
            return report(error, on: error as? PluginError, table: host, response: errorResponse)
        }
    }

    static func handle(
        state: UnsafeMutableRawPointer?,
        request: UnsafePointer<plugind_plugin_request>,
        response: OpaquePointer
    ) -> Int32 {
        guard let state else { return 1 }
        let instance = Unmanaged<PluginInstance>.fromOpaque(state).takeUnretainedValue()
        let table = instance.host.table
        let connection = request.pointee.connection_state.map { state in
            Unmanaged<ConnectionState>.fromOpaque(state).takeUnretainedValue().connection
        }
        let pluginRequest = PluginRequest(
            identifier: request.pointee.identifier,
            bytes: UnsafeRawBufferPointer(start: request.pointee.bytes, count: request.pointee.length),
            host: instance.host,
            connection: connection
        )
        do {
            let output = try instance.plugin.handle(pluginRequest)
            let result = output.withUnsafeBufferPointer { buffer in
                table.pointee.append(response, buffer.baseAddress, buffer.count)
            }
            if result != 0 {
                table.pointee.set_error(response, "response of \(output.count) bytes was refused (error \(result))")
                return 1
            }
            return PLUGIND_PLUGIN_OK
        } catch {
            return report(error, on: error as? PluginError, table: table, response: response)
        }
    }

    static func accept(
        state: UnsafeMutableRawPointer?,
        connection: UnsafePointer<plugind_plugin_connection>,
        connectionState: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
        refusal: OpaquePointer
    ) -> Int32 {
        guard let state else { return 1 }
        let instance = Unmanaged<PluginInstance>.fromOpaque(state).takeUnretainedValue()
        let accepted = PluginConnection(
            identifier: connection.pointee.identifier, hostIdentifier: String(cString: connection.pointee.host_identifier),
            host: instance.host)
        do {
            try instance.plugin.accept(accepted)
        } catch {
            return report(error, on: error as? PluginError, table: instance.host.table, response: refusal)
        }
        connectionState.pointee = Unmanaged.passRetained(ConnectionState(accepted)).toOpaque()
        return PLUGIND_PLUGIN_OK
    }

    static func close(
        state: UnsafeMutableRawPointer?,
        connection: UnsafePointer<plugind_plugin_connection>,
        connectionState: UnsafeMutableRawPointer?
    ) {
        guard let state, let connectionState else { return }
        let instance = Unmanaged<PluginInstance>.fromOpaque(state).takeUnretainedValue()
        let closed = Unmanaged<ConnectionState>.fromOpaque(connectionState).takeRetainedValue()
        instance.plugin.close(closed.connection)
    }

    static func shutdown(state: UnsafeMutableRawPointer?) {
        guard let state else { return }
        let instance = Unmanaged<PluginInstance>.fromOpaque(state).takeRetainedValue()
        instance.plugin.shutdown()
    }

    private static func report(
        _ error: any Error,
        on pluginError: PluginError?,
        table: UnsafePointer<plugind_host>,
        response: OpaquePointer
    ) -> Int32 {
        table.pointee.set_error(response, pluginError?.message ?? String(describing: error))
        return pluginError?.code ?? 1
    }
}
