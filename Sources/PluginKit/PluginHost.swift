import Dispatch
import Glibc
internal import PlugindPluginABI
// The one log-level enum, shared with the host's side (`AppExtensionMessage.log`).
@_exported public import PlugindTypes
import Synchronization

/// What the worker offers a Swift plugin: logging and unprompted messages to the host. Valid for
/// the plugin's lifetime; safe to use from any thread.
public struct PluginHost: @unchecked Sendable {
    // @unchecked: the table is immutable and owned by the worker for the life of the process; the
    // callbacks it holds are documented as thread-safe in plugind_plugin.h.
    let table: UnsafePointer<plugind_host>

    /// Log severities: the same enum the host reads them as.
    public typealias LogLevel = PluginLogLevel

    /// Sends a log line to the host.
    public func log(_ message: String, level: LogLevel = .info) {
        table.pointee.log(table.pointee.context, plugind_plugin_log_level(rawValue: UInt32(level.rawValue)), message)
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

/// One request: its bytes and ways to cooperate with the host.
public struct PluginRequest {
    /// Unique among the worker's requests.
    public let identifier: UInt64
    /// The worker's memory (perhaps the region shared with the host), valid until `handle`
    /// returns: only lent out, through `withUnsafeBytes`.
    private let storage: UnsafeRawBufferPointer
    let host: PluginHost
    /// The connection the request came on, to ask the host on; nil for none.
    public let connection: PluginConnection?

    init(identifier: UInt64, bytes: UnsafeRawBufferPointer, host: PluginHost, connection: PluginConnection?) {
        self.identifier = identifier
        self.storage = bytes
        self.host = host
        self.connection = connection
    }

    /// The request bytes: a copy, the plugin's to keep.
    public var bytes: [UInt8] { Array(storage) }

    /// The request bytes where the worker holds them, without a copy, for the duration of
    /// `body` only: the buffer must not escape it.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(storage)
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

/// A connection a host opened to the plugin. Ask the host on it from any thread, also while
/// handling one of its requests.
public struct PluginConnection: Sendable {
    /// Unique among the worker's connections.
    public let identifier: UInt32
    /// The host application that opened it.
    public let hostIdentifier: String
    let host: PluginHost
    private let handler = RequestHandlerSlot()

    init(identifier: UInt32, hostIdentifier: String, host: PluginHost) {
        self.identifier = identifier
        self.hostIdentifier = hostIdentifier
        self.host = host
    }

    /// What answers the host's requests on this connection, for an `AppExtension`: set it when
    /// accepting the connection. It may ask the host (`ask`) while it runs; nil answers every
    /// request with an error saying so.
    public var requestHandler: (@Sendable ([UInt8]) async throws -> [UInt8])? {
        get { handler.value.withLock { $0 } }
        nonmutating set { handler.value.withLock { $0 = newValue } }
    }

    /// Why an ask got no answer.
    public enum AskError: Error, Equatable, CustomStringConvertible {
        /// The host gave this connection no request handler.
        case unsupported
        /// The host's handler failed with this code and message.
        case failed(code: Int32, message: String)
        /// No answer before the deadline.
        case timedOut
        /// The connection closed, or the host is going away.
        case closed
        /// Too many asks of this connection wait already.
        case tooManyAsks
        /// The ask is over the message limit.
        case tooLarge
        /// Another errno value.
        case system(Int32)

        public var description: String {
            switch self {
            case .unsupported: "the host has no request handler on this connection"
            case .failed(let code, let message): "the host's handler failed with code \(code): \(message)"
            case .timedOut: "the host did not answer in time"
            case .closed: "the connection is closed"
            case .tooManyAsks: "too many asks of this connection are waiting"
            case .tooLarge: "the ask is over the message limit"
            case .system(let errno): "ask failed with errno \(errno)"
            }
        }
    }

    /// Asks the host and waits for its answer; a request the host sends meanwhile on this worker
    /// runs on this thread before the answer comes (`handle` is re-entered). `timeout`: nil for
    /// the host's request timeout.
    public func ask(_ bytes: [UInt8], timeout: Duration? = nil) throws(AskError) -> [UInt8] {
        guard let ask = host.table.pointee.ask, let release = host.table.pointee.release_answer else { throw .unsupported }
        var milliseconds: UInt32 = 0
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            milliseconds = UInt32(clamping: max(seconds * 1000 + attoseconds / 1_000_000_000_000_000, 1))
        }
        var answer = plugind_plugin_answer(bytes: nil, length: 0, code: 0, message: nil)
        let status = bytes.withUnsafeBufferPointer { buffer in
            ask(host.table.pointee.context, identifier, buffer.baseAddress, buffer.count, milliseconds, &answer)
        }
        defer { release(host.table.pointee.context, &answer) }
        switch status {
        case 0:
            guard let start = answer.bytes else { return [] }
            return Array(UnsafeBufferPointer(start: start, count: answer.length))
        case ENOTSUP: throw .unsupported
        case EREMOTEIO: throw .failed(code: answer.code, message: answer.message.map { String(cString: $0) } ?? "")
        case ETIMEDOUT: throw .timedOut
        case ECONNRESET, EINVAL: throw .closed
        case EBUSY: throw .tooManyAsks
        case EMSGSIZE: throw .tooLarge
        default: throw .system(status)
        }
    }

    /// `ask` with UTF-8 text both ways.
    public func ask(_ text: String, timeout: Duration? = nil) throws(AskError) -> String {
        String(decoding: try ask(Array(text.utf8), timeout: timeout), as: UTF8.self)
    }

    /// `ask` for async code, such as an `AppExtension`'s request handler. The wait happens on a
    /// thread of its own, never on one of Swift's cooperative pool: a request the host nests in
    /// its answer runs on that pool, and would find no thread if asks held them all.
    public func ask(_ bytes: [UInt8], timeout: Duration? = nil) async throws(AskError) -> [UInt8] {
        let connection = self
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], AskError>, Never>) in
            let wait: @Sendable () -> Void = {
                do throws(AskError) {
                    let answer: [UInt8] = try connection.ask(bytes, timeout: timeout)
                    continuation.resume(returning: .success(answer))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            // A thread of its own, started now, with a small stack (a plugin's thread limit and
            // address space are small). Dispatch's threads come only when its pool sees the
            // others blocked, which under load can take seconds: they are only the fallback.
            if !DedicatedThread.start(wait) { DispatchQueue(label: "org.plugind.pluginkit.ask").async(execute: wait) }
        }
        return try result.get()
    }

    /// The async `ask` with UTF-8 text both ways.
    public func ask(_ text: String, timeout: Duration? = nil) async throws(AskError) -> String {
        String(decoding: try await ask(Array(text.utf8), timeout: timeout), as: UTF8.self)
    }
}

/// The request handler of one connection: shared by every copy of its `PluginConnection`.
private final class RequestHandlerSlot: Sendable {
    let value = Mutex<(@Sendable ([UInt8]) async throws -> [UInt8])?>(nil)
}

/// A detached thread running one closure: what the async `ask` waits on.
private enum DedicatedThread {
    private final class Work {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Enough for the ask and a nested request's hand-off to the pool.
    static let stackBytes = 512 << 10

    /// Starts `body` on a new detached thread; false when no thread could be made.
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        pthread_attr_init(attributes)
        defer {
            pthread_attr_destroy(attributes)
            attributes.deallocate()
        }
        pthread_attr_setstacksize(attributes, stackBytes)
        var thread: pthread_t = 0
        let status = pthread_create(
            &thread, attributes,
            { argument in
                guard let argument else { return nil }
                Unmanaged<Work>.fromOpaque(argument).takeRetainedValue().body()
                return nil
            }, work)
        guard status == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
