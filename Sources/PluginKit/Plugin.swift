/// A plugin written in Swift. Conform a type, then export it with one line:
///
///     @c(plugind_plugin_entry)
///     public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(MyPlugin.self) }
///
/// The worker creates one instance, calls `handle(_:)` for each request on one thread, one at a
/// time, and calls `shutdown()` when the host closes the connection in an orderly way.
public protocol Plugin: AnyObject {
    /// Shown by `plugind info`; defaults to the type's name.
    static var name: String { get }
    /// Defaults to "1.0.0".
    static var version: String { get }

    /// Called once before the first request. Throwing fails the load; the host receives the
    /// error's description (and code, for a `PluginError`).
    init(host: PluginHost) throws

    /// Answers one request. Return the response bytes, or throw `PluginError` (or any error,
    /// reported with code 1) to answer with a failure.
    func handle(_ request: PluginRequest) throws -> [UInt8]

    /// Called once when the host closes the connection in an orderly way. Not called when the
    /// worker is killed.
    func shutdown()
}

extension Plugin {
    public static var name: String { String(describing: Self.self) }
    public static var version: String { "1.0.0" }
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
