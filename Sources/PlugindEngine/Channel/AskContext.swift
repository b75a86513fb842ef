/// The ask whose handler the current task runs, so that a request it sends to the same worker is
/// nested in the ask (run by the plugin thread that waits for the answer) instead of queued
/// behind it.
struct AskContext: Sendable {
    let channel: ObjectIdentifier
    let ask: UInt64

    @TaskLocal static var current: AskContext?
}

/// A failure a host's request handler throws to answer an ask with its own code and message
/// (the public API's `AppExtensionConnection.RequestFailure`); any other error answers with code 1.
package protocol AskHandlerFailure: Error {
    var code: Int32 { get }
    var message: String { get }
}

/// A callback of a typed call whose caller gave no handler for it (the worker's declaration and
/// the host's disagree, or the call was made without handlers).
struct CallbackWithoutHandler: AskHandlerFailure, CustomStringConvertible {
    let parameter: UInt32
    var code: Int32 { 1 }
    var message: String { "the caller of the typed call gave no handler for the callback at argument \(parameter + 1)" }
    var description: String { message }
}
