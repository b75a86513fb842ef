public import CPlugindHostAPI
import ExtensionFoundation
import Glibc
import PlugindEngine
import PlugindSystem

/// A `plugind_function_session`: an `AppExtensionFunctionSession` and the handles its calls
/// returned, by numbers of the session's own. A worker's numbers start at 1 again in the next
/// worker, so C cannot tell a stale handle from a current one by the worker's number; the
/// session's numbers are never reused, and a number whose worker ended stays known as such, so
/// passing it is refused naming the function and the argument.
final class HostFunctionSession: Sendable {
    let session: AppExtensionFunctionSession

    private enum Entry {
        case live(FunctionHandle)
        /// Its worker ended (a crash, a recycle): only the kind is kept.
        case earlier(kind: String)
        /// A call of its release function, or plugind_function_session_handle_release, took it.
        case released(kind: String)
    }

    private struct Table {
        var entries: [UInt64: Entry] = [:]
        /// The session's number of each live handle object.
        var numbers: [ObjectIdentifier: UInt64] = [:]
        var kinds: [String: OwnedCString] = [:]
        var next: UInt64 = 1
    }

    private let table = Locked(Table())
    /// Only for converting values that are not handles (TypedValue's conversions take one).
    private let noHandles = HeldHandles()
    /// The gate the C handlers of the session's calls pass, closed by its release.
    let callbacks = CallbackGate()
    /// How many of the session's C handlers each thread is inside now (nested calls count each).
    private let handlingThreads = Locked<[UInt: Int]>([:])

    init(session: AppExtensionFunctionSession) {
        self.session = session
    }

    /// The value C holds for `value`: a handle by the session's number, its kind owned here.
    func encode(_ value: FunctionValue) -> plugind_value {
        guard case .handle(let handle) = value else { return TypedValue.encode(value, handles: noHandles) }
        var result = plugind_value()
        result.type = PLUGIND_TYPE_HANDLE
        table.withLock { table in
            let kind = table.kinds[handle.kind] ?? OwnedCString(handle.kind)
            table.kinds[handle.kind] = kind
            result.payload.handle.kind = kind.constPointer
            guard !handle.isNull else { return }
            if let number = table.numbers[ObjectIdentifier(handle)] {
                result.payload.handle.id = number
                return
            }
            let number = table.next
            table.next += 1
            table.entries[number] = .live(handle)
            table.numbers[ObjectIdentifier(handle)] = number
            result.payload.handle.id = number
        }
        return result
    }

    func encode(_ result: FunctionResult) -> plugind_call_result {
        var encoded = plugind_call_result()
        encoded.value = encode(result.value)
        if !result.outputs.isEmpty,
            let outputs = calloc(result.outputs.count, MemoryLayout<plugind_output>.stride)?.assumingMemoryBound(to: plugind_output.self)
        {
            for (index, output) in result.outputs.enumerated() {
                outputs[index].name = UnsafePointer(strdup(output.name))
                outputs[index].value = encode(output.value)
            }
            encoded.outputs = outputs
            encoded.output_count = result.outputs.count
        }
        encoded.has_errno = result.errorNumber == nil ? 0 : 1
        encoded.error_number = result.errorNumber ?? 0
        return encoded
    }

    /// The handle C passed as argument `index` of `function`, or why it names none.
    func handle(kind: String?, id: UInt64, index: Int, function: String) -> Result<FunctionHandle, HostError> {
        guard id != 0 else { return .success(.null(kind: kind ?? "")) }
        return table.withLock { table -> Result<FunctionHandle, HostError> in
            let refusal = { (whose: String, kind: String) in
                Result<FunctionHandle, HostError>.failure(
                    HostError(
                        code: PLUGIND_ERROR_INVALID_ARGUMENTS,
                        message: "argument \(index + 1) of \(function) is handle \(kind)#\(id), which \(whose)"))
            }
            switch table.entries[id] {
            case .live(let handle): return .success(handle)
            case .earlier(let kind):
                return refusal(
                    "an earlier worker of this session gave out (read the set-up results again for the current worker's)", kind)
            case .released(let kind): return refusal("was released", kind)
            case nil: return refusal("this session never gave out", kind ?? "")
            }
        }
    }

    /// Forgets the objects of handles whose worker ended or that were released, keeping their
    /// numbers known: a stale number is refused as such, and nothing of an ended worker stays
    /// alive here.
    func settle() {
        let current = session.currentHandleOwner
        table.withLock { table in
            for (number, entry) in table.entries {
                guard case .live(let handle) = entry else { continue }
                if handle.isReleased {
                    table.entries[number] = .released(kind: handle.kind)
                } else if handle.worker != current {
                    table.entries[number] = .earlier(kind: handle.kind)
                } else {
                    continue
                }
                table.numbers[ObjectIdentifier(handle)] = nil
            }
        }
    }

    /// Stops holding handle `id`: its object, when it is live.
    func take(_ id: UInt64) -> Result<FunctionHandle?, HostError> {
        table.withLock { table in
            switch table.entries[id] {
            case .live(let handle):
                table.entries[id] = .released(kind: handle.kind)
                table.numbers[ObjectIdentifier(handle)] = nil
                return .success(handle)
            case .earlier, .released: return .success(nil)
            case nil: return .failure(.invalidArgument("handle #\(id) was never given out by this session"))
            }
        }
    }

    /// The C arguments of `function` as the values its declaration takes.
    func values(
        _ function: String, _ arguments: UnsafePointer<plugind_value>?, _ count: Int
    ) -> Result<[FunctionValue], HostError> {
        guard count >= 0 else { return .failure(.invalidArgument("the argument count \(count) is negative")) }
        guard count == 0 || arguments != nil else {
            return .failure(.invalidArgument("arguments is NULL with a count of \(count)"))
        }
        var given: [TypedValue.Given] = []
        for index in 0..<count {
            guard let arguments else { break }
            switch TypedValue.given(arguments[index], index: index) {
            case .success(let value): given.append(value)
            case .failure(let failure): return .failure(failure)
            }
        }
        // An unknown function or a wrong count is left to the session, whose errors name them.
        let declared = session.functions.first { $0.name == function }
        let inputs = declared.map(\.inputs).flatMap { $0.count == given.count ? $0 : nil }
        var values: [FunctionValue] = []
        for (index, value) in given.enumerated() {
            if case .handle(let kind, let id) = value {
                switch handle(kind: kind ?? inputs?[index].kind, id: id, index: index, function: function) {
                case .success(let handle): values.append(.handle(handle))
                case .failure(let failure): return .failure(failure)
                }
                continue
            }
            guard let inputs else {
                switch value {
                case .bool(let flag): values.append(.bool(flag))
                case .integer(let number): values.append(.int64(number))
                case .unsigned(let number): values.append(.uint64(number))
                case .real(let number): values.append(.double(number))
                case .text(let string): values.append(.string(string))
                case .bytes(let bytes): values.append(.bytes(bytes))
                case .handle: break
                }
                continue
            }
            switch TypedValue.convert(value, to: inputs[index].type, kind: inputs[index].kind, index: index, handles: noHandles) {
            case .success(let converted): values.append(converted)
            case .failure(let failure): return .failure(failure)
            }
        }
        return .success(values)
    }

    /// Why `what` may not be done now: the calling thread runs a handler of one of the session's
    /// calls, which holds the session's turn until the handler returned, so anything that waits
    /// for the turn would wait for itself. As `AppExtensionFunctionSession.callWithOutputs`
    /// refuses a call from its own handler; here also when the handler is an outer one (a
    /// handler of this session that called another process, whose handler calls back).
    func refusedInsideHandler(_ what: String) -> HostError? {
        let thread = UInt(pthread_self())
        guard handlingThreads.withLock({ $0[thread] != nil }) else { return nil }
        return HostError(
            code: PLUGIND_ERROR_INVALID_ARGUMENTS,
            message: "\(what) was called from a callback handler of the same function session, "
                + "whose calls run one at a time: it would wait for itself")
    }

    /// Runs `work` with `arguments` converted to the declared types, which the session knows
    /// once a worker ran, and a Swift handler for each of `callbacks`: blocking, first until the
    /// session's worker is ready (launched and set up), then until `work` returns, running the
    /// C handlers on the calling thread meanwhile (`CallerWait`). Its error as C reports it.
    func run<Value: Sendable>(
        _ function: String, _ arguments: UnsafePointer<plugind_value>?, _ count: Int, callbacks: [HostCallback] = [],
        _ work: @escaping @Sendable (AppExtensionFunctionSession, [FunctionValue], CallbackHandlers) async throws -> Value
    ) -> Result<Value, HostError> {
        if let refusal = refusedInsideHandler(function) { return .failure(refusal) }
        let session = session
        let started = CallerWait.run { _ in try await session.start() }
        // A worker that ended or was recycled just now takes its handles' numbers with it.
        settle()
        if case .failure(let failure) = started { return .failure(HostError(failure)) }
        // Converted on the caller's thread, while its values are valid.
        let converted: [FunctionValue]
        switch values(function, arguments, count) {
        case .success(let values): converted = values
        case .failure(let failure): return .failure(failure)
        }
        let declared = session.functions.first { $0.name == function }
        let outcome = CallerWait.run { wait in
            let handlers = HostCallback.handlers(callbacks, function: function, declared: declared, owner: self, wait: wait)
            return try await work(session, converted, handlers)
        }
        settle()
        return outcome.mapError { HostError($0) }
    }
}

extension HostFunctionSession: CallbackOwner {
    var kind: String { "session" }

    func callbackArgument(_ value: FunctionValue) -> plugind_value {
        encode(value)
    }

    func runHandler(_ handler: () -> Void) -> Bool {
        let thread = UInt(pthread_self())
        return callbacks.run {
            handlingThreads.withLock { $0[thread, default: 0] += 1 }
            defer {
                handlingThreads.withLock { threads in
                    if let depth = threads[thread], depth > 1 {
                        threads[thread] = depth - 1
                    } else {
                        threads[thread] = nil
                    }
                }
            }
            handler()
        }
    }
}

@_cdecl("plugind_function_session_create")
public func plugindFunctionSessionCreate(
    _ identity: OpaquePointer?, _ freshWorkerEvery: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let identity = HandleRegistry.shared.object(identity, as: HostIdentity.self) else {
        HostError.invalidArgument("not a plugind identity (NULL, or already released)").report(to: error)
        return nil
    }
    let options = AppExtensionFunctionSession.Options(freshWorkerEvery: freshWorkerEvery == 0 ? nil : Int(freshWorkerEvery))
    let session = AppExtensionFunctionSession(identity: identity.identity, options: options)
    return HandleRegistry.shared.insert(HostFunctionSession(session: session))
}

@_cdecl("plugind_function_session_add_set_up")
public func plugindFunctionSessionAddSetUp(
    _ session: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self) else {
        HostError.invalidArgument("not a plugind function session (NULL, or already released)").report(to: error)
        return -1
    }
    guard let function = text(name) else {
        HostError.invalidArgument("the function's name must not be NULL").report(to: error)
        return -1
    }
    let added = session.run(function, arguments, count) { session, values, _ in
        session.addSetUpCall(.init(function, arguments: values))
    }
    switch added {
    case .success: return 0
    case .failure(let failure):
        failure.report(to: error)
        return -1
    }
}

@_cdecl("plugind_function_session_call")
public func plugindFunctionSessionCall(
    _ session: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, _ result: UnsafeMutablePointer<plugind_value>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    sessionCall(session, name, arguments, count, timeout, hasResult: result != nil, error) { session, value in
        result?.pointee = session.encode(value.value)
    }
}

@_cdecl("plugind_function_session_call_outputs")
public func plugindFunctionSessionCallOutputs(
    _ session: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, _ result: UnsafeMutablePointer<plugind_call_result>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    sessionCall(session, name, arguments, count, timeout, hasResult: result != nil, error) { session, value in
        result?.pointee = session.encode(value)
    }
}

@_cdecl("plugind_function_session_call_callbacks")
public func plugindFunctionSessionCallCallbacks(
    _ session: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ callbacks: UnsafePointer<plugind_callback>?, _ callbackCount: Int, _ timeout: UInt32,
    _ result: UnsafeMutablePointer<plugind_call_result>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let taken = HostCallback.taken(callbacks, callbackCount, reportingTo: error) else { return -1 }
    return sessionCall(session, name, arguments, count, timeout, hasResult: result != nil, error, callbacks: taken) { session, value in
        result?.pointee = session.encode(value)
    }
}

/// A call of the session's worker from C, with a handler for each of `callbacks`; 0, or -1 with
/// `error` set.
private func sessionCall(
    _ session: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ arguments: UnsafePointer<plugind_value>?, _ count: Int,
    _ timeout: UInt32, hasResult: Bool, _ error: UnsafeMutablePointer<OpaquePointer?>?, callbacks: [HostCallback] = [],
    store: (HostFunctionSession, FunctionResult) -> Void
) -> CInt {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self) else {
        HostError.invalidArgument("not a plugind function session (NULL, or already released)").report(to: error)
        return -1
    }
    guard let function = text(name), hasResult else {
        HostError.invalidArgument("the function's name and the result must not be NULL").report(to: error)
        return -1
    }
    let called = session.run(function, arguments, count, callbacks: callbacks) { session, values, handlers in
        try await session.callWithOutputs(function, arguments: values, callbacks: handlers, timeout: requestTimeout(timeout))
    }
    switch called {
    case .success(let value):
        store(session, value)
        return 0
    case .failure(let failure):
        failure.report(to: error)
        return -1
    }
}

@_cdecl("plugind_function_session_set_up_count")
public func plugindFunctionSessionSetUpCount(_ session: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(session, as: HostFunctionSession.self)?.session.options.setUp.count ?? 0
}

@_cdecl("plugind_function_session_set_up_result")
public func plugindFunctionSessionSetUpResult(
    _ session: OpaquePointer?, _ index: Int, _ result: UnsafeMutablePointer<plugind_call_result>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self), let result else {
        HostError.invalidArgument("not a plugind function session (NULL, or already released), or a NULL result").report(to: error)
        return -1
    }
    if let refusal = session.refusedInsideHandler("plugind_function_session_set_up_result") {
        refusal.report(to: error)
        return -1
    }
    let results = CallerWait.run { _ in try await session.session.setUpResults }
    session.settle()
    switch results {
    case .success(let results):
        guard results.indices.contains(index) else {
            HostError.invalidArgument("set-up result \(index) is out of range: the session has \(results.count) set-up calls")
                .report(to: error)
            return -1
        }
        result.pointee = session.encode(results[index])
        return 0
    case .failure(let failure):
        HostError(failure).report(to: error)
        return -1
    }
}

@_cdecl("plugind_function_session_pid")
public func plugindFunctionSessionPID(_ session: OpaquePointer?) -> Int32 {
    HandleRegistry.shared.object(session, as: HostFunctionSession.self)?.session.processIdentifier ?? -1
}

@_cdecl("plugind_function_session_workers_started")
public func plugindFunctionSessionWorkersStarted(_ session: OpaquePointer?) -> Int64 {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self) else { return -1 }
    return Int64(session.session.workersStarted)
}

@_cdecl("plugind_function_session_handle_release")
public func plugindFunctionSessionHandleRelease(
    _ session: OpaquePointer?, _ handle: UnsafePointer<plugind_value>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self) else {
        HostError.invalidArgument("not a plugind function session (NULL, or already released)").report(to: error)
        return -1
    }
    guard let value = handle?.pointee, value.type == PLUGIND_TYPE_HANDLE else {
        HostError.invalidArgument("not a handle (NULL, or a value of another type)").report(to: error)
        return -1
    }
    guard value.payload.handle.id != 0 else { return 0 }
    switch session.take(value.payload.handle.id) {
    case .failure(let failure):
        failure.report(to: error)
        return -1
    case .success(nil):
        // Released already, or its worker ended, which took every object it gave out.
        return 0
    case .success(let held?):
        // As a call: nested in a callback when a handler releases a handle.
        switch CallerWait.run({ _ in try await held.release() }) {
        case .success: return 0
        case .failure(let failure):
            HostError(failure).report(to: error)
            return -1
        }
    }
}

@_cdecl("plugind_function_session_handle_drop")
public func plugindFunctionSessionHandleDrop(_ session: OpaquePointer?, _ handle: UnsafePointer<plugind_value>?) {
    guard let session = HandleRegistry.shared.object(session, as: HostFunctionSession.self), let value = handle?.pointee,
        value.type == PLUGIND_TYPE_HANDLE
    else { return }
    // The last reference goes here: the handle's release starts in the background.
    _ = session.take(value.payload.handle.id)
}

@_cdecl("plugind_function_session_release")
public func plugindFunctionSessionRelease(_ session: OpaquePointer?) {
    guard let session = HandleRegistry.shared.remove(session, as: HostFunctionSession.self) else { return }
    // As plugind_process_release: no handler of the session's calls starts after this returns.
    session.callbacks.close()
    session.callbacks.waitUntilIdle()
    _ = BlockingCall.run { await session.session.invalidateAndWait() }
    // As plugind_process_release: a crash is recorded in the background, and a C host often
    // exits right after.
    CrashRecorder.waitForPendingRecords(timeout: .seconds(2))
}
