/// Severity of a plugin log line.
public enum PluginLogLevel: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case debug = 0
    case info = 1
    case warning = 2
    case error = 3

    public var description: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
}
