/// An extension written as on Apple platforms: a type with an initializer and a configuration
/// that accepts the host's connections. Export it with one line (a shared library has no
/// `@main`):
///
///     struct Uppercase: AppExtension {
///         @AppExtensionPoint.Bind
///         var extensionPoint: AppExtensionPoint {
///             AppExtensionPoint.Identifier(host: "com.example.editor", name: "text-filters")
///         }
///
///         var configuration: some AppExtensionConfiguration {
///             ConnectionHandler { connection in
///                 connection.requestHandler = { request in request.map { $0 & 0xDF } }
///                 return true
///             }
///         }
///     }
///
///     @c(plugind_plugin_entry)
///     public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Uppercase.self) }
///
/// The worker creates one instance when it loads the plugin; every connection a host opens
/// goes to `configuration.accept(connection:)`.
public protocol AppExtension {
    associatedtype Configuration: AppExtensionConfiguration

    init()

    /// How connections from the host are accepted and served.
    var configuration: Configuration { get }

    /// The extension point this extension serves, as its manifest's `extensionPoint` states it.
    var extensionPoint: AppExtensionPoint { get }
}

extension AppExtension {
    /// Apple's 26.2 shorthands, so that `@Bind var extensionPoint { Identifier(host:name:) }`
    /// reads as it does there.
    public typealias Identifier = AppExtensionPoint.Identifier
    public typealias Bind = AppExtensionPoint.Bind
    public typealias Implementing = AppExtensionPoint.Capabilities
    /// Linux addition, beside Apple's three: `Supports("text/markdown")` in `Implementing { … }`.
    public typealias Supports = AppExtensionPoint.Supports

    /// No binding stated in code: the manifest's `extensionPoint` alone decides.
    public var extensionPoint: AppExtensionPoint { AppExtensionPoint(identifier: "") }
}

/// Accepts (or refuses) the connections a host opens to the extension. Set the connection's
/// `requestHandler` to serve its requests; ask the host on it with `ask(_:)`.
public protocol AppExtensionConfiguration: Sendable {
    /// Returns whether to accept `connection`. A refused connection makes the host's
    /// `makeConnection` fail with `connectionRefused`.
    func accept(connection: PluginConnection) -> Bool
}

/// A configuration made of one closure, as Apple's `ConnectionHandler(onConnection:)`.
public struct ConnectionHandler: AppExtensionConfiguration {
    let onConnection: @Sendable (PluginConnection) -> Bool

    public init(onConnection: @escaping @Sendable (PluginConnection) -> Bool) {
        self.onConnection = onConnection
    }

    public func accept(connection: PluginConnection) -> Bool {
        onConnection(connection)
    }
}
