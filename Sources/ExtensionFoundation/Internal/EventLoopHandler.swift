/// Something that owns descriptors registered with the `WorkerEventLoop` and reacts to their
/// readiness. Called on the loop thread only.
protocol EventLoopHandler: AnyObject, Sendable {
    func handleEvent(descriptor: Int32, events: UInt32)
}
