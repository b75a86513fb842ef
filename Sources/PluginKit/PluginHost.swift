internal import PlugindPluginABI

/// What the worker offers a Swift plugin: logging and unprompted messages to the host. Valid for
/// the plugin's lifetime; safe to use from any thread.
public struct PluginHost: @unchecked Sendable {
    // @unchecked: the table is immutable and owned by the worker for the life of the process; the
    // callbacks it holds are documented as thread-safe in plugind_plugin.h.
    let table: UnsafePointer<plugind_host>

    /// Log severities, as in `plugind_plugin_log_level`.
    public enum LogLevel: Sendable {
        case debug, info, warning, error

        var cValue: plugind_plugin_log_level {
            switch self {
            case .debug: PLUGIND_PLUGIN_LOG_DEBUG
            case .info: PLUGIND_PLUGIN_LOG_INFO
            case .warning: PLUGIND_PLUGIN_LOG_WARNING
            case .error: PLUGIND_PLUGIN_LOG_ERROR
            }
        }
    }

    /// Sends a log line to the host.
    public func log(_ message: String, level: LogLevel = .info) {
        table.pointee.log(table.pointee.context, level.cValue, message)
    }

    /// Sends bytes to the host unprompted, tied to a request in progress or to none (0).
    /// Returns false when the host is gone or the message is over the limit.
    @discardableResult
    public func post(_ bytes: [UInt8], requestIdentifier: UInt64 = 0) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            table.pointee.post_message(table.pointee.context, requestIdentifier, buffer.baseAddress, buffer.count) == 0
        }
    }

    /// Reports progress of a request: `completed` of `total` units (0 = unknown total).
    @discardableResult
    public func reportProgress(requestIdentifier: UInt64, completed: UInt64, total: UInt64) -> Bool {
        table.pointee.report_progress(table.pointee.context, requestIdentifier, completed, total) == 0
    }
}

/// One request: its bytes and ways to cooperate with the host. Do not keep it, or its `bytes`,
/// beyond `handle`: the memory belongs to the worker.
public struct PluginRequest {
    /// Unique among the worker's requests.
    public let identifier: UInt64
    /// The request bytes; valid until `handle` returns.
    public let bytes: UnsafeRawBufferPointer
    let host: PluginHost

    init(identifier: UInt64, bytes: UnsafeRawBufferPointer, host: PluginHost) {
        self.identifier = identifier
        self.bytes = bytes
        self.host = host
    }

    /// True once the host cancelled the request or stopped waiting; stop early when it is.
    public var isCancelled: Bool {
        host.table.pointee.is_cancelled(host.table.pointee.context, identifier)
    }

    /// Reports progress of this request.
    @discardableResult
    public func reportProgress(completed: UInt64, total: UInt64) -> Bool {
        host.reportProgress(requestIdentifier: identifier, completed: completed, total: total)
    }

    /// Sends an event tied to this request.
    @discardableResult
    public func post(_ bytes: [UInt8]) -> Bool {
        host.post(bytes, requestIdentifier: identifier)
    }
}
