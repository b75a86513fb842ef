/// The ask whose handler the current task runs, so that a request it sends to the same worker is
/// nested in the ask (run by the plugin thread that waits for the answer) instead of queued
/// behind it.
struct AskContext: Sendable {
    let channel: ObjectIdentifier
    let ask: UInt64

    @TaskLocal static var current: AskContext?
}
