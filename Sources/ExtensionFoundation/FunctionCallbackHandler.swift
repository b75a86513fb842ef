/// Answers the library's calls of a callback during a typed call (`qsort`'s comparator): the
/// callback's arguments as its declaration gives them (scalars; `.string` for a string; `.bytes`
/// for a buffer, copied), and the value to return to the library, of the declared return type
/// (`.void` for none). A handler may call functions of the same process: those calls run while
/// the library waits. A handler that throws fails the typed call with `callbackFailed`; the
/// library gets zero from the callback from then on. While the call's caller waits for it alone,
/// the handler starts on the caller's thread, as the library's caller runs a callback in
/// process, and runs there until it first suspends: what it does before then delays nothing but
/// the call. A handler that calls the same process awaits the call; blocking its thread until
/// the call ends would hold the thread that reads the answer.
public typealias FunctionCallbackHandler = @Sendable (_ arguments: [FunctionValue]) async throws -> FunctionValue

/// Why a callback's handler was not run or its answer not used: the worker forwarded arguments
/// its declaration rules out, or the handler answered another type.
struct CallbackMismatch: AskHandlerFailure, CustomStringConvertible {
    let message: String
    var code: Int32 { 1 }
    var description: String { message }
}

extension FunctionSignature {
    /// The channel's handler for this function's callbacks: `handlers` by callback name, each
    /// checked against its declaration both ways. Nil for a function without callbacks.
    ///
    /// - Throws: `FunctionCallError` when a callback has no handler or a handler names none.
    func callbackHandler(_ handlers: [String: FunctionCallbackHandler]) throws(FunctionCallError) -> WorkerChannel.CallbackHandler? {
        let callbacks = self.callbacks
        for name in handlers.keys.sorted() where !callbacks.contains(where: { $0.name == name }) {
            let declared = callbacks.isEmpty ? "it takes none" : "it takes " + callbacks.map { "'\($0.name)'" }.joined(separator: ", ")
            throw FunctionCallError("\(self.name) has no callback '\(name)' to handle (\(declared))")
        }
        guard !callbacks.isEmpty else { return nil }
        var byParameter: [UInt32: (name: String, signature: FunctionCallbackSignature, handler: FunctionCallbackHandler)] = [:]
        for callback in callbacks {
            guard let handler = handlers[callback.name] else {
                throw FunctionCallError(
                    "\(self.name) needs a handler for its callback '\(callback.name)': \(callback.signature.described(outer: parameters))")
            }
            byParameter[UInt32(callback.parameter)] = (callback.name, callback.signature, handler)
        }
        let function = name
        let declared = byParameter
        return { parameter, arguments in
            guard let callback = declared[parameter] else {
                throw CallbackMismatch(message: "\(function) has no callback at argument \(parameter + 1)")
            }
            guard callback.signature.matches(arguments) else {
                let types = arguments.map(\.type)
                throw CallbackMismatch(
                    message:
                        "the worker passed callback '\(callback.name)' of \(function) (\(types.map(\.rawValue).joined(separator: ", "))), not what it declares: \(callback.signature)"
                )
            }
            let answer = try await callback.handler(arguments)
            guard answer.type == callback.signature.returns else {
                throw CallbackMismatch(
                    message:
                        "the handler of callback '\(callback.name)' of \(function) returned \(answer.type), not the declared \(callback.signature.returns)"
                )
            }
            return answer
        }
    }
}
