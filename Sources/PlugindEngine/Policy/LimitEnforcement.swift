import FoundationEssentials
import Glibc
package import PlugindBundle
import PlugindSystem

/// How each of a plugin's limits is enforced on this machine, in words: for `plugind info`,
/// the approval review and the browser. A plugin without the `processes` permission can hold
/// nothing outside its one process, so per-process limits cover it; one with it needs a control
/// group to be covered as a whole.
package struct LimitEnforcement: Sendable, Hashable, Encodable {
    package var memory: String
    package var cpu: String
    package var threads: String
    package var openFiles: String
    /// Set when the plugin's children escape the limits on this machine: what the owner should
    /// know before approving.
    package var warning: String?

    package init(permissions: Manifest.Permissions, host: AppExtensionHost) {
        openFiles = "per process (RLIMIT_NOFILE)"
        guard permissions.processes else {
            memory = "address space of its one process (RLIMIT_AS), plus its scratch space; it may not start processes or create memfds"
            cpu = "CPU time of its one process, every thread included (RLIMIT_CPU)"
            threads = "tasks of its user namespace (RLIMIT_NPROC)"
            warning = nil
            return
        }
        if let cgroups = WorkerCgroups.available(delegated: host.workerCgroupDirectory?.path) {
            memory = "\(cgroups.description): its children, memfds and shared memory included"
            cpu = "CPU time of its control group, children included, checked by the host"
            threads = "pids limit of its control group: every process and thread"
            warning = nil
        } else {
            memory = "per process only (RLIMIT_AS): each child it starts gets the same limit again"
            cpu = "per process only (RLIMIT_CPU): each child it starts gets the same limit again"
            threads = "tasks of its user namespace (RLIMIT_NPROC), processes included"
            warning =
                "it may start processes, and no control group is usable on this machine: its children, and memory in memfds, are not bounded as a whole"
        }
    }
}
