import CPlugindShims
import PlugindSystem
import PlugindWire
import Synchronization

/// Sends the host what the sandbox refused the plugin (`refusal_reports.c` sees the calls): one
/// `sandboxRefusal` frame per report, from the plugin's thread that made the call.
enum RefusalReports {
    private static let transport = Mutex<PipeTransport?>(nil)

    /// Routes the plugin library's calls through the reporting wrappers; reports go out on
    /// `transport`. Before the plugin's init, so that its refusals are reported too.
    static func install(library: UnsafeMutableRawPointer, transport: PipeTransport) {
        self.transport.withLock { $0 = transport }
        let result = plugind_shim_refusals_install(
            library,
            { call, detail, layer, error, dropped in
                RefusalReports.send(
                    call: String(cString: call), detail: String(cString: detail), layer: layer, error: error, dropped: dropped)
            })
        if result != 0 { WorkerMain.report("reports of what the sandbox refuses are unavailable: \(Errno(rawValue: result))") }
    }

    private static func send(call: String, detail: String, layer: Int32, error: Int32, dropped: UInt32) {
        let known: SandboxRefusal.Layer
        switch layer {
        case PLUGIND_SHIM_LAYER_LANDLOCK: known = .landlock
        case PLUGIND_SHIM_LAYER_VIEW: known = .view
        default: known = .seccomp
        }
        let refusal = SandboxRefusal(call: call, detail: String(detail.prefix(512)), layer: known, errorNumber: error, dropped: dropped)
        // A host that is gone learns nothing more; the plugin's call has its errno either way.
        try? transport.withLock { $0 }?.send(.sandboxRefusal(refusal))
    }
}
