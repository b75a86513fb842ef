import PlugindSystem

/// Reaps a process whose pidfd became readable (it exited), then forgets it.
final class ReapOnExit: EventLoopHandler {
    let loop: WorkerEventLoop
    let processDescriptor: FileDescriptor

    init(loop: WorkerEventLoop, processDescriptor: FileDescriptor) {
        self.loop = loop
        self.processDescriptor = processDescriptor
    }

    func handleEvent(descriptor: Int32, events: UInt32) {
        loop.deregister(processDescriptor)
        _ = try? processDescriptor.waitForProcessExit(noHang: true)
        processDescriptor.close()
    }

    /// Without the loop, the process is killed and reaped here.
    func loopFailed(_ error: SystemError) {
        processDescriptor.killAndReap()
    }
}
