public import CPlugindHostAPI
import ExtensionFoundation
import PlugindEngine
import PlugindSystem

/// A `plugind_process`: the process, the gate its interruption handler passes (closed when the
/// host releases it), and the connection typed calls use.
final class HostProcess: Sendable {
    let process: AppExtensionProcess
    let callbacks: CallbackGate
    private let callConnection = Locked<AppExtensionConnection?>(nil)
    /// The handles its calls returned, held for the C caller (CallAPI.swift).
    let handles = HeldHandles()

    init(process: AppExtensionProcess, callbacks: CallbackGate) {
        self.process = process
        self.callbacks = callbacks
    }

    /// The connection `plugind_process_call` uses, opened at the first call.
    func connectionForCalls() async throws -> AppExtensionConnection {
        if let open = callConnection.withLock({ $0 }) { return open }
        let opened = try await process.makeConnection()
        let kept = callConnection.withLock { current -> AppExtensionConnection in
            if let current { return current }
            current = opened
            return opened
        }
        if kept !== opened { opened.close() }
        return kept
    }
}

@_cdecl("plugind_process_create")
public func plugindProcessCreate(
    _ identity: OpaquePointer?, _ onInterruption: plugind_interruption_handler?, _ context: UnsafeMutableRawPointer?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let identity = HandleRegistry.shared.object(identity, as: HostIdentity.self) else {
        HostError.invalidArgument("not a plugind identity (NULL, or already released)").report(to: error)
        return nil
    }
    let callbacks = CallbackGate()
    let callback = CallbackContext(context: context)
    let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity.identity) {
        guard let onInterruption else { return }
        _ = callbacks.run { onInterruption(callback.context) }
    }
    switch BlockingCall.run({ try await AppExtensionProcess(configuration: configuration) }) {
    case .success(let process): return HandleRegistry.shared.insert(HostProcess(process: process, callbacks: callbacks))
    case .failure(let failure):
        HostError(failure).report(to: error)
        return nil
    }
}

@_cdecl("plugind_process_release")
public func plugindProcessRelease(_ process: OpaquePointer?) {
    guard let process = HandleRegistry.shared.remove(process, as: HostProcess.self) else { return }
    process.callbacks.close()
    process.callbacks.waitUntilIdle()
    process.process.invalidate()
    // A crash of this process is recorded in the background; a C host often exits right after
    // releasing the process, which would lose the record (and the step it counts toward a
    // quarantine): the sanitized test host found such a record still being written at its exit.
    CrashRecorder.waitForPendingRecords(timeout: .seconds(2))
}

@_cdecl("plugind_process_pid")
public func plugindProcessPID(_ process: OpaquePointer?) -> Int32 {
    HandleRegistry.shared.object(process, as: HostProcess.self)?.process.processIdentifier ?? -1
}
