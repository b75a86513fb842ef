public import FoundationEssentials
import Glibc
import PlugindEngine
import PlugindSystem
// The public value types hosts use with connections; the module holds nothing else.
@_exported public import PlugindTypes
import PlugindWire

/// One logical connection to a running plugin (the Linux stand-in for an XPC connection):
/// requests to the plugin and, when the host gave a request handler, the plugin's asks to the
/// host, plus typed calls and the plugin's unprompted messages. The plugin accepted it and may
/// keep state for it. Many requests may be in flight at once; each gets its own answer. `close()`
/// (or releasing the connection) closes it and tells the plugin.
public final class AppExtensionConnection: Sendable {
    let process: AppExtensionProcess
    /// The connection's number on the worker's channel.
    let identifier: UInt32
    private let closed = Locked(false)

    private var channel: WorkerChannel { process.channel }
    private var pluginIdentifier: String { process.plan.pluginIdentifier }

    init(process: AppExtensionProcess, identifier: UInt32) {
        self.process = process
        self.identifier = identifier
    }

    deinit {
        close()
    }

    /// Closes the connection: requests waiting on it fail with `connectionClosed`, the plugin's
    /// asks on it fail, its request handler stops, and the plugin hears of it. Idempotent.
    public func close() {
        let first = closed.withLock { closed -> Bool in
            defer { closed = true }
            return !closed
        }
        if first {
            channel.closeConnection(identifier)
            process.forget(connection: identifier)
        }
    }

    /// Thrown by a request handler to answer the plugin's ask with an error code and message of
    /// its choosing (any other error reaches the plugin as code 1 with its description).
    public struct RequestFailure: Error, Sendable, CustomStringConvertible {
        public var code: Int32
        public var message: String

        public init(code: Int32 = 1, _ message: String) {
            self.code = code
            self.message = message
        }

        public var description: String { message }
    }

    /// Sends `request` to the plugin's handler and returns its response bytes.
    ///
    /// - Parameters:
    ///   - request: The bytes, passed to the plugin unchanged.
    ///   - timeout: The deadline; nil for the plugin's default (manifest, capped by the host).
    ///   The deadline counts from the call: time the request waits for one of the plugin's
    ///   threads (see the manifest's `concurrency`) is part of it.
    /// - Throws: `AppExtensionError`: `pluginError` with the plugin's code and message;
    ///   `timedOut`; `cancelled` when the task is cancelled; `connectionClosed`; `limitExceeded`;
    ///   `disabledByOwner` when the owner disables the plugin meanwhile; `workerCrashed`,
    ///   `workerExited` or `protocolViolation` when the worker dies meanwhile; `unsupported` for a
    ///   function-only plugin; `invalidated` after `invalidate()`.
    public func send(_ request: [UInt8], timeout: Duration? = nil) async throws -> [UInt8] {
        if let refusal = refusal(of: request) { throw refusal }
        return try await channel.request(request, connection: identifier, timeout: timeout ?? process.defaultRequestTimeout)
    }

    /// `send(_:timeout:)` for a caller outside Swift's concurrency that blocks its own thread
    /// until `completion` runs (libplugind's blocking send): the completion runs on the thread
    /// that read the reply, so it must only hand the result over. The request cannot be
    /// cancelled; its deadline still holds.
    package func send(
        _ request: [UInt8], timeout: Duration?, completion: @escaping @Sendable (Result<[UInt8], AppExtensionError>) -> Void
    ) {
        if let refusal = refusal(of: request) { return completion(.failure(refusal)) }
        channel.request(request, connection: identifier, timeout: timeout ?? process.defaultRequestTimeout, completion: completion)
    }

    /// Why `request` cannot be sent at all, checked before anything is.
    private func refusal(of request: [UInt8]) -> AppExtensionError? {
        guard process.acceptsRequests else {
            return AppExtensionError(.unsupported, plugin: pluginIdentifier, "is function-only; call its functions with call(_:arguments:)")
        }
        let limit = process.plan.load.limits.maxMessageBytes
        guard UInt64(request.count) <= limit else {
            return AppExtensionError(
                .limitExceeded,
                plugin: pluginIdentifier,
                "request of \(request.count) bytes exceeds the message limit",
                exceededLimit: .init(kind: .messageSize, value: limit)
            )
        }
        return nil
    }

    /// Sends `request` and returns the response, as `Data`.
    public func send(_ request: Data, timeout: Duration? = nil) async throws -> Data {
        Data(try await send([UInt8](request), timeout: timeout))
    }

    /// Encodes `request` as JSON, sends it, and decodes the response as `Response`.
    public func send<Request: Encodable, Response: Decodable>(
        _ request: Request,
        expecting responseType: Response.Type,
        timeout: Duration? = nil
    ) async throws -> Response {
        let bytes = try JSONEncoder().encode(request)
        let response = try await send([UInt8](bytes), timeout: timeout)
        return try JSONDecoder().decode(Response.self, from: Data(response))
    }

    /// Calls a function the plugin's manifest declares, with arguments of the declared types,
    /// and returns the function's value (`callWithOutputs` also returns its out values and errno).
    ///
    /// - Throws: `AppExtensionError`: `unknownFunction`; `invalidArguments` for a wrong count or
    ///   type (checked before anything is sent); `workerCrashed` when the function crashes; the
    ///   same errors as `callWithOutputs` and `send` otherwise.
    public func call(
        _ function: String, arguments: [FunctionValue] = [], callbacks: [String: FunctionCallbackHandler] = [:], timeout: Duration? = nil
    ) async throws -> FunctionValue {
        try await callWithOutputs(function, arguments: arguments, callbacks: callbacks, timeout: timeout).value
    }

    /// Calls a function the plugin's manifest declares and returns its value, the values its
    /// `out` and `inout` arguments were left with (by argument name), and `errno` where the
    /// declaration asks for it.
    ///
    /// `arguments` are the declaration's inputs in order (`FunctionSignature.inputs`): every
    /// argument but `NULL`, `out` pointers and `out` buffers, and the counts of `in` buffers
    /// (their lengths). An `inout` pointer takes the value it points to on entry; an `in` or
    /// `inout` buffer takes `.bytes`; a length argument (`"count": "*len"`) takes the capacity.
    ///
    /// Nothing the library returns is trusted: a length beyond the capacity given, or outputs
    /// that are not what the declaration says, fail the call with `protocolViolation`, naming the
    /// function and the argument, and stop the worker (its memory may be damaged); the host reads
    /// nothing past a capacity.
    ///
    /// A handle (`FunctionHandle`) the function returns or writes is this process's: pass it to
    /// later calls, release it with `release()` or by dropping it. Passing a handle of another
    /// kind, a NULL one or one released is refused before anything is sent; one the worker did
    /// not give out, or of another kind than its number names, is refused by the worker before
    /// the library is called. Calling a kind's release function consumes its handle.
    ///
    /// `callbacks` holds a handler for each callback argument the function declares, by name
    /// (`["compar": { arguments in … }]`): the library's calls of it run the handler while the
    /// call runs (see `FunctionCallbackHandler`).
    ///
    /// - Throws: `AppExtensionError`: `unknownFunction`; `invalidArguments` for a wrong count or
    ///   type, a buffer whose length does not fit its count, out buffers larger than the
    ///   message limit, or a callback without a handler (all checked before anything is sent);
    ///   `callbackFailed` when a handler throws or the library passes a callback what its
    ///   declaration rules out; `protocolViolation` as above; `workerCrashed` when the function
    ///   crashes; the same errors as `send` otherwise.
    public func callWithOutputs(
        _ function: String, arguments: [FunctionValue] = [], callbacks: [String: FunctionCallbackHandler] = [:],
        timeout: Duration? = nil
    ) async throws -> FunctionResult {
        guard let (index, signature) = process.function(named: function) else {
            let functions = process.functions
            let known = functions.isEmpty ? "it declares none" : "it declares " + functions.map(\.name).joined(separator: ", ")
            throw AppExtensionError(.unknownFunction, plugin: pluginIdentifier, "has no function '\(function)' in its manifest (\(known))")
        }
        let bound: FunctionArguments
        let callbackHandler: WorkerChannel.CallbackHandler?
        do {
            bound = try signature.bind(arguments)
            callbackHandler = try signature.callbackHandler(callbacks)
        } catch {
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, error.message)
        }
        let limit = process.plan.load.limits.maxMessageBytes
        guard UInt64(bound.outputCapacity) <= limit else {
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier,
                "the out buffers of \(signature.name) would hold \(bound.outputCapacity) bytes, more than the message limit of \(limit)")
        }
        for (position, value) in arguments.enumerated() {
            guard case .handle(let handle) = value, let worker = handle.worker, worker != process.handles.worker else { continue }
            throw AppExtensionError(
                .invalidArguments, plugin: pluginIdentifier,
                "argument \(position + 1) of \(signature) is handle \(handle), which another worker gave out")
        }
        let reply = try await channel.call(
            function: UInt32(index), arguments: arguments, timeout: timeout ?? process.defaultRequestTimeout, callbacks: callbackHandler)
        // The worker took the handle back whatever the function returned.
        signature.releasedHandle(in: arguments)?.markReleased()
        do {
            let result = try signature.result(value: reply.value, outputs: reply.outputs, errorNumber: reply.errorNumber, arguments: bound)
            return process.handles.adopt(result)
        } catch {
            // The library wrote what its declaration rules out: its worker is not to be trusted.
            let reason = "\(error.message); the worker was stopped"
            channel.stop(.protocolViolation(reason))
            throw AppExtensionError(.protocolViolation, plugin: pluginIdentifier, reason)
        }
    }

    /// Events, progress reports and log lines the plugin sends unprompted, from now until the
    /// process ends. Each call returns a new sequence, which sees the events and progress of the
    /// requests sent on this connection (never those of another connection, even of another
    /// `AppExtensionProcess` sharing the worker), the plugin's log lines, and what it posts
    /// outside any request or during a typed call; up to a bounded buffer for a reader that
    /// falls behind (see `AppExtensionMessages`). A message
    /// the plugin sent before a response is in the sequence before `send` returns, but a task
    /// reading it may not have reached it yet; to handle all of them, invalidate the process and
    /// read the sequence to its end.
    public func messages() -> AppExtensionMessages {
        channel.messages(connection: identifier)
    }
}

extension AppExtensionConnection.RequestFailure: AskHandlerFailure {}
