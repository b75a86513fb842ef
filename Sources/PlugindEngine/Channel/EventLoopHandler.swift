import PlugindSystem

/// Something that owns descriptors registered with the `WorkerEventLoop` and reacts to their
/// readiness. Called on the loop thread only.
protocol EventLoopHandler: AnyObject, Sendable {
    func handleEvent(descriptor: Int32, events: UInt32)

    /// The loop gave up (its wait failed again and again): nothing registered will be served any
    /// more. Called on the dying loop thread, once.
    func loopFailed(_ error: SystemError)
}
