/// A plugin written in Swift. Conform a type, then export it with one line:
///
///     @c(plugind_plugin_entry)
///     public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(MyPlugin.self) }
///
/// The worker creates one instance and calls `handle(_:)` for each request: one at a time, or up
/// to `concurrency` at once on as many threads (then the type must be safe to use from all of
/// them). Hosts open connections, which the plugin may refuse in `accept(_:)`; a request's
/// `connection` asks the host questions. `shutdown()` comes when the host ends the process in an
/// orderly way.
public protocol Plugin: AnyObject {
    /// Shown by `plugind info`; defaults to the type's name.
    static var name: String { get }
    /// Defaults to "1.0.0".
    static var version: String { get }
    /// How many requests `handle` may run at once; the manifest's `concurrency` may lower it.
    /// Defaults to 1.
    static var concurrency: Int { get }

    /// Called once before the first request. Throwing fails the load; the host receives the
    /// error's description (and code, for a `PluginError`).
    init(host: PluginHost) throws

    /// Answers one request. Return the response bytes, or throw `PluginError` (or any error,
    /// reported with code 1) to answer with a failure.
    func handle(_ request: PluginRequest) throws -> [UInt8]

    /// A host opened `connection`. Throw to refuse it: the host's `makeConnection` fails with
    /// `connectionRefused` and your error's description. Accepts every connection by default.
    func accept(_ connection: PluginConnection) throws

    /// `connection` closed; no request of it runs any more.
    func close(_ connection: PluginConnection)

    /// Called once when the host ends the process in an orderly way. Not called when the worker
    /// is killed.
    func shutdown()
}

extension Plugin {
    public static var name: String { String(describing: Self.self) }
    public static var version: String { "1.0.0" }
    public static var concurrency: Int { 1 }
    public func accept(_ connection: PluginConnection) throws {}
    public func close(_ connection: PluginConnection) {}
    public func shutdown() {}
}

/// A failure a plugin answers with: a positive code of its choosing and a message for people.
public struct PluginError: Error, CustomStringConvertible {
    public var code: Int32
    public var message: String

    public init(code: Int32 = 1, _ message: String) {
        self.code = max(code, 1)
        self.message = message
    }

    public var description: String { message }
}
