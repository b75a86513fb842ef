public import CPlugindHostAPI
import ExtensionFoundation
import Observation
import PlugindEngine
import PlugindSystem

/// A `plugind_monitor`: an `AppExtensionPoint.Monitor`, the state the host last took
/// (`plugind_monitor_update`), and an eventfd that says a newer one waits.
final class HostMonitor: Sendable {
    let monitor: AppExtensionPoint.Monitor
    let notifier: EventNotifier
    private struct States {
        var taken: AppExtensionPoint.Monitor.State
        var latest: AppExtensionPoint.Monitor.State
    }
    private let states: Locked<States>
    private let watcher = Locked<Task<Void, Never>?>(nil)

    init(monitor: AppExtensionPoint.Monitor, notifier: EventNotifier) {
        self.monitor = monitor
        self.notifier = notifier
        let state = monitor.state
        states = Locked(States(taken: state, latest: state))
    }

    /// Follows the monitor's state; each change that differs from what the host took makes the
    /// descriptor readable. The task is the only writer of the descriptor and closes it when it
    /// ends, so no signal can land on a number the process has reused for another file.
    func startWatching() {
        let task = Task { [monitor, notifier, states] in
            for await state in Observations({ monitor.state }) {
                let changed = states.withLock { states -> Bool in
                    states.latest = state
                    return state != states.taken
                }
                if changed { notifier.signal() }
            }
            notifier.descriptor.close()
        }
        watcher.withLock { $0 = task }
    }

    func update() -> Bool {
        notifier.drain()
        return states.withLock { states in
            guard states.latest != states.taken else { return false }
            states.taken = states.latest
            return true
        }
    }

    var taken: AppExtensionPoint.Monitor.State { states.withLock { $0.taken } }

    /// Ends the watching task, which closes the descriptor.
    func stop() {
        watcher.withLock { $0?.cancel() }
    }
}

@_cdecl("plugind_monitor_create")
public func plugindMonitorCreate(
    _ point: UnsafePointer<CChar>?, _ scope: plugind_scope, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let identifier = text(point) else {
        HostError.invalidArgument("the extension point's identifier is NULL or not UTF-8").report(to: error)
        return nil
    }
    let restriction: AppExtensionPoint.Scope.Restriction
    switch scope {
    case PLUGIND_SCOPE_APPLICATION: restriction = .application
    case PLUGIND_SCOPE_NONE: restriction = .none
    default:
        HostError.invalidArgument("scope \(scope.rawValue) is neither PLUGIND_SCOPE_APPLICATION nor PLUGIND_SCOPE_NONE").report(to: error)
        return nil
    }
    let created = BlockingCall.run { () async throws -> HostMonitor in
        let point: AppExtensionPoint
        do {
            point = try AppExtensionPoint(identifier: identifier, scope: restriction)
        } catch {
            throw HostError(code: PLUGIND_ERROR_CONFIGURATION_ERROR, message: "'\(InertText.escape(identifier))' is \(error)")
        }
        let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: point)
        return HostMonitor(monitor: monitor, notifier: try EventNotifier())
    }
    switch created {
    case .success(let monitor):
        monitor.startWatching()
        return HandleRegistry.shared.insert(monitor)
    case .failure(let failure):
        (failure as? HostError ?? HostError(failure)).report(to: error)
        return nil
    }
}

@_cdecl("plugind_monitor_release")
public func plugindMonitorRelease(_ monitor: OpaquePointer?) {
    HandleRegistry.shared.remove(monitor, as: HostMonitor.self)?.stop()
}

@_cdecl("plugind_monitor_fd")
public func plugindMonitorFD(_ monitor: OpaquePointer?) -> CInt {
    HandleRegistry.shared.object(monitor, as: HostMonitor.self)?.notifier.descriptor.rawValue ?? -1
}

@_cdecl("plugind_monitor_update")
public func plugindMonitorUpdate(_ monitor: OpaquePointer?) -> CInt {
    guard let monitor = HandleRegistry.shared.object(monitor, as: HostMonitor.self) else { return -1 }
    return monitor.update() ? 1 : 0
}

@_cdecl("plugind_monitor_count")
public func plugindMonitorCount(_ monitor: OpaquePointer?) -> Int64 {
    HandleRegistry.shared.object(monitor, as: HostMonitor.self).map { Int64($0.taken.identities.count) } ?? -1
}

@_cdecl("plugind_monitor_disabled_count")
public func plugindMonitorDisabledCount(_ monitor: OpaquePointer?) -> Int64 {
    HandleRegistry.shared.object(monitor, as: HostMonitor.self).map { Int64($0.taken.disabledCount) } ?? -1
}

@_cdecl("plugind_monitor_unapproved_count")
public func plugindMonitorUnapprovedCount(_ monitor: OpaquePointer?) -> Int64 {
    HandleRegistry.shared.object(monitor, as: HostMonitor.self).map { Int64($0.taken.unapprovedCount) } ?? -1
}

@_cdecl("plugind_monitor_identity_at")
public func plugindMonitorIdentityAt(_ monitor: OpaquePointer?, _ index: Int64, _ error: UnsafeMutablePointer<OpaquePointer?>?)
    -> OpaquePointer?
{
    guard let monitor = HandleRegistry.shared.object(monitor, as: HostMonitor.self) else {
        HostError.invalidArgument("not a plugind monitor (NULL, or already released)").report(to: error)
        return nil
    }
    let identities = monitor.taken.identities
    guard index >= 0, index < identities.count else {
        HostError.invalidArgument("index \(index) is out of range: the monitor holds \(identities.count) plugin(s)").report(to: error)
        return nil
    }
    return HandleRegistry.shared.insert(HostIdentity(identities[Int(index)]))
}
