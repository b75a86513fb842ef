public import CPlugindHostAPI
import ExtensionFoundation
import Glibc
import PlugindEngine
import PlugindSystem

/// What a typed call with callbacks is made on (a `plugind_process`, a
/// `plugind_function_session`): how its handlers' arguments are encoded and how they are run.
protocol CallbackOwner: Sendable {
    /// "process" or "session", for messages.
    var kind: String { get }
    /// `value` as a C handler's argument; a handle by the owner's number for it.
    func callbackArgument(_ value: FunctionValue) -> plugind_value
    /// Runs `handler` (on the caller's thread) through the owner's gate: false, without running
    /// it, once the owner's release began.
    func runHandler(_ handler: () -> Void) -> Bool
}

extension HostProcess: CallbackOwner {
    var kind: String { "process" }

    func callbackArgument(_ value: FunctionValue) -> plugind_value {
        TypedValue.encode(value, handles: handles)
    }

    func runHandler(_ handler: () -> Void) -> Bool {
        callbacks.run(handler)
    }
}

/// One `plugind_callback` a C caller gave: its name, its handler and the handler's context. The
/// header makes the host responsible for what the handler touches; it runs on the caller's
/// thread only, while the call waits.
struct HostCallback: @unchecked Sendable {
    let name: String
    let handler: plugind_callback_handler
    let context: UnsafeMutableRawPointer?

    /// The callbacks of a call, checked: every name UTF-8 and given once, every handler set.
    static func taken(_ callbacks: UnsafePointer<plugind_callback>?, _ count: Int) -> Result<[HostCallback], HostError> {
        guard count >= 0 else { return .failure(.invalidArgument("the callback count \(count) is negative")) }
        guard count == 0 || callbacks != nil else {
            return .failure(.invalidArgument("callbacks is NULL with a count of \(count)"))
        }
        var taken: [HostCallback] = []
        for index in 0..<count {
            guard let callbacks else { break }
            let callback = callbacks[index]
            guard let name = text(callback.name) else {
                return .failure(.invalidArgument("callback \(index): the name is NULL or not UTF-8"))
            }
            guard let handler = callback.handler else {
                return .failure(.invalidArgument("callback \(index) ('\(name)'): the handler is NULL"))
            }
            guard !taken.contains(where: { $0.name == name }) else {
                return .failure(.invalidArgument("callback \(index): '\(name)' is given twice"))
            }
            taken.append(HostCallback(name: name, handler: handler, context: callback.context))
        }
        return .success(taken)
    }

    /// `taken(_:_:)` for a C function: nil once the refusal is reported to `error`.
    static func taken(
        _ callbacks: UnsafePointer<plugind_callback>?, _ count: Int, reportingTo error: UnsafeMutablePointer<OpaquePointer?>?
    ) -> [HostCallback]? {
        switch taken(callbacks, count) {
        case .success(let taken): return taken
        case .failure(let failure):
            failure.report(to: error)
            return nil
        }
    }

    /// The Swift handlers of `callbacks` for a call of `function` (`declared`: its declaration,
    /// nil when unknown), each run by its C handler on the caller's thread (`wait`), through
    /// `owner`.
    static func handlers(
        _ callbacks: [HostCallback], function: String, declared: FunctionSignature?, owner: any CallbackOwner, wait: CallerWait
    ) -> CallbackHandlers {
        var handlers: CallbackHandlers = [:]
        for callback in callbacks {
            let returns = declared?.callbacks.first { $0.name == callback.name }?.signature.returns
            handlers[callback.name] = callback.answering(function: function, returns: returns, owner: owner, wait: wait)
        }
        return handlers
    }

    /// The Swift handler that answers this callback of `function`, whose declared return type
    /// is `returns` (nil for a name the function does not declare, which the call refuses before
    /// anything runs): each call of it is run by the C handler on the caller's thread (`wait`).
    private func answering(function: String, returns: FunctionValueType?, owner: any CallbackOwner, wait: CallerWait)
        -> FunctionCallbackHandler
    {
        let callback = self
        return { arguments in
            let frame = CallbackFrame()
            let answer = Locked<Result<FunctionValue, any Error>?>(nil)
            wait.post(
                CallerWait.Job(
                    run: {
                        let result = frame.enter { callback.invoke(arguments, function: function, returns: returns, owner: owner) }
                        answer.withLock { $0 = result }
                        frame.finish()
                    },
                    refuse: {
                        answer.withLock { $0 = .failure(CallbackHandlerFailure(message: "the call ended before its handler ran")) }
                        frame.finish()
                    }))
            // Until the handler returned: the calls it makes start here.
            await frame.serve()
            guard let result = answer.withLock({ $0 }) else {
                throw CallbackHandlerFailure(message: "the handler ended without an answer")
            }
            return try result.get()
        }
    }

    /// Calls the C handler with `arguments` (valid during the call) and returns its answer as
    /// a value of the declared type, or why there is none. On the caller's thread.
    private func invoke(
        _ arguments: [FunctionValue], function: String, returns: FunctionValueType?, owner: any CallbackOwner
    ) -> Result<FunctionValue, any Error> {
        let values = arguments.map(owner.callbackArgument)
        defer {
            for value in values where value.type == PLUGIND_TYPE_STRING || value.type == PLUGIND_TYPE_BYTES {
                free(UnsafeMutableRawPointer(mutating: value.payload.data.bytes))
            }
        }
        var result = plugind_value()
        result.type = PLUGIND_TYPE_VOID
        var message: UnsafeMutablePointer<CChar>?
        var status: CInt = 0
        // Through the owner's gate: a handler never starts once the release of its process or
        // session began, and the release waits for one that runs.
        let admitted = owner.runHandler {
            status = values.withUnsafeBufferPointer { buffer in handler(context, buffer.baseAddress, buffer.count, &result, &message) }
        }
        let said = message.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: strlen($0)), as: UTF8.self) }
        free(message)
        guard admitted else {
            return .failure(CallbackHandlerFailure(message: "the \(owner.kind) was released while the call ran"))
        }
        guard status == 0 else {
            return .failure(CallbackHandlerFailure(message: said ?? "the handler returned \(status)"))
        }
        return answer(result, function: function, returns: returns)
    }

    /// What the handler left in `result`, as the declared return type.
    private func answer(_ result: plugind_value, function: String, returns: FunctionValueType?) -> Result<FunctionValue, any Error> {
        guard let returns else {
            return .failure(CallbackHandlerFailure(message: "\(function) declares no callback '\(name)'"))
        }
        let wrong = CallbackHandlerFailure(
            message: "the handler of callback '\(name)' of \(function) returned \(Self.described(result)), "
                + "not a value of the declared \(returns)")
        if returns == .void { return result.type == PLUGIND_TYPE_VOID ? .success(.void) : .failure(wrong) }
        // A scalar: taken as the kind of value it is and converted, range-checked, as an argument is.
        guard result.type != PLUGIND_TYPE_STRING, result.type != PLUGIND_TYPE_BYTES, result.type != PLUGIND_TYPE_HANDLE,
            case .success(let given) = TypedValue.given(result, index: 0),
            case .success(let converted) = TypedValue.convert(given, to: returns, kind: nil, index: 0, handles: HeldHandles())
        else { return .failure(wrong) }
        return .success(converted)
    }

    /// A handler's result for a message: its type and, for a number, the number.
    private static func described(_ value: plugind_value) -> String {
        switch value.type {
        case PLUGIND_TYPE_VOID: "nothing (PLUGIND_TYPE_VOID)"
        case PLUGIND_TYPE_BOOL: "bool \(value.payload.integer != 0)"
        case PLUGIND_TYPE_INT8, PLUGIND_TYPE_INT16, PLUGIND_TYPE_INT32, PLUGIND_TYPE_INT64: "the integer \(value.payload.integer)"
        case PLUGIND_TYPE_UINT8, PLUGIND_TYPE_UINT16, PLUGIND_TYPE_UINT32, PLUGIND_TYPE_UINT64:
            "the integer \(value.payload.unsigned_integer)"
        case PLUGIND_TYPE_FLOAT, PLUGIND_TYPE_DOUBLE: "the real \(value.payload.real)"
        case PLUGIND_TYPE_STRING: "a string"
        case PLUGIND_TYPE_BYTES: "bytes"
        case PLUGIND_TYPE_HANDLE: "a handle"
        default: "type \(value.type.rawValue)"
        }
    }
}

/// Why a C handler's answer is not the callback's: its own message, or what plugind found
/// wrong with its result. Fails the call with `callbackFailed`, the message in the error.
struct CallbackHandlerFailure: AskHandlerFailure, CustomStringConvertible {
    let message: String
    var code: Int32 { 1 }
    var description: String { message }
}

@_cdecl("plugind_process_call_callbacks")
public func plugindProcessCallCallbacks(
    _ process: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ callbacks: UnsafePointer<plugind_callback>?, _ callbackCount: Int, _ timeout: UInt32,
    _ result: UnsafeMutablePointer<plugind_call_result>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let taken = HostCallback.taken(callbacks, callbackCount, reportingTo: error) else { return -1 }
    return typedCall(
        process, name, arguments, count, timeout, hasResult: result != nil, error, callbacks: taken,
        call: { connection, function, values, handlers, timeout in
            try await connection.callWithOutputs(function, arguments: values, callbacks: handlers, timeout: timeout)
        },
        store: { value, handles in result?.pointee = CallResultStorage.encode(value, handles: handles) })
}
