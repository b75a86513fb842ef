/// Failure codes the worker uses for its own refusals in `failure` messages. Plugins answer with
/// positive codes; these are negative so the two never collide.
package enum ReservedFailureCode {
    /// The plugin's response exceeded its message limit.
    package static let responseTooLarge: Int32 = -1
    /// A request reached a function-only plugin, which has no request handler.
    package static let noRequestHandler: Int32 = -2
    /// A request arrived for a connection that is closed (or was never accepted).
    package static let connectionClosed: Int32 = -3
}
