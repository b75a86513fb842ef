import PlugindSystem
package import PlugindWire

extension AppExtensionMessage {
    /// A call of the plugin's that a confinement layer refused: the plugin got its errno, and the
    /// host hears which layer said no and to what. Reported for the plugin library's own calls of
    /// socket, connect, bind, ptrace and the open family, at most 8 a second (`droppedBefore`
    /// counts the rest). Linux addition.
    public struct SandboxRefusal: Sendable, Hashable, CustomStringConvertible {
        public enum Layer: String, Sendable, Hashable {
            /// The system-call filter.
            case seccomp
            /// The file-system rules.
            case landlock
            /// The worker's own view of the file system: the path is not in it (or missing).
            case view
        }

        /// The call, e.g. "socket", "connect", "open".
        public var call: String
        /// What it named: an address family ("AF_INET"), a path, "@name" for an abstract socket.
        public var detail: String
        public var layer: Layer
        /// The errno the plugin got.
        public var errorNumber: Int32
        /// Reports dropped by the rate limit since the previous one.
        public var droppedBefore: Int

        package init(_ refusal: PlugindWire.SandboxRefusal) {
            call = refusal.call
            detail = refusal.detail
            switch refusal.layer {
            case .seccomp: layer = .seccomp
            case .landlock: layer = .landlock
            case .view: layer = .view
            }
            errorNumber = refusal.errorNumber
            droppedBefore = Int(refusal.dropped)
        }

        /// "the sandbox refused socket(AF_INET): the plugin has no network permission (seccomp)";
        /// the plugin's strings inert.
        public var description: String {
            let named = "\(InertText.escape(call))(\(InertText.escape(detail)))"
            let why: String
            switch (layer, call) {
            case (.seccomp, "socket"): why = "the plugin has no network permission"
            case (.seccomp, "ptrace"): why = "no plugin may trace a process"
            case (.seccomp, _): why = "the system-call filter forbids it"
            case (.landlock, _): why = "the plugin has no permission for that path"
            case (.view, _): why = "the path is not in the plugin's view of the file system"
            }
            let dropped = droppedBefore > 0 ? "; \(droppedBefore) more refusals were not reported" : ""
            return "the sandbox refused \(named): \(why) (\(layer.rawValue), \(Errno(rawValue: errorNumber)))\(dropped)"
        }
    }
}
