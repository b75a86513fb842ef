public import PlugindTypes

/// Something a plugin sent without being asked: an event, progress of a request, or a log line.
public enum AppExtensionMessage: Sendable, Hashable {
    /// Bytes the plugin posted. `requestIdentifier` names the request it concerns, if any.
    case event(requestIdentifier: UInt64?, bytes: [UInt8])
    /// Progress of a request: `completed` out of `total` units (`total` 0 when unknown).
    case progress(requestIdentifier: UInt64?, completed: UInt64, total: UInt64)
    /// A line from the plugin's log callback.
    case log(level: PluginLogLevel, message: String)
    /// The reader fell behind: this many messages were dropped (the oldest first) so that the
    /// host holds no more than `AppExtensionMessages.bufferedBytes` for it.
    case dropped(count: Int)
    /// A call the sandbox refused the plugin (Linux addition).
    case sandboxRefusal(SandboxRefusal)
}
