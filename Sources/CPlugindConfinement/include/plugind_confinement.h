/*
 * plugind_confinement.h — the layers a worker applies to itself before it loads plugin code:
 * a private filesystem view in its own namespaces (sandbox.c), no capabilities, process
 * attributes (prctl), resource limits, a seccomp filter, and a Landlock ruleset as a second
 * layer for the filesystem, signals and abstract unix sockets. Each function does one step; the
 * worker verifies each layer after applying it.
 *
 * Convention: functions return 0 or an errno value; results go out through out-parameters.
 */
#ifndef PLUGIND_CONFINEMENT_H
#define PLUGIND_CONFINEMENT_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Wraps prctl(PR_SET_NO_NEW_PRIVS, 1).
int plugind_confinement_set_no_new_privileges(void);
/// Wraps prctl(PR_GET_NO_NEW_PRIVS).
int plugind_confinement_get_no_new_privileges(int *_Nonnull enabled);

/// Wraps prctl(PR_SET_DUMPABLE, 0).
int plugind_confinement_set_not_dumpable(void);

/// Raises the calling process's OOM score adjustment (/proc/self/oom_score_adj) to `adjustment`
/// when it is lower, so that under memory pressure the kernel's OOM killer takes this process
/// before its host. Raising needs no privilege; call it while the process is still dumpable (a
/// process that is not has its /proc files owned by root). 0, or the errno.
int plugind_confinement_raise_oom_score(int adjustment);

/// Makes the calling process dumpable again (a worker whose host turned confinement off, so that
/// a debugger can attach). Returns 0 or an errno.
int plugind_confinement_set_dumpable(void);
/// Wraps prctl(PR_GET_DUMPABLE).
int plugind_confinement_get_dumpable(int *_Nonnull dumpable);

/// Resource limits a worker sets on itself.
typedef enum plugind_confinement_limit {
    PLUGIND_CONFINEMENT_LIMIT_CORE_FILE_SIZE = 0,
    PLUGIND_CONFINEMENT_LIMIT_ADDRESS_SPACE = 1,
    PLUGIND_CONFINEMENT_LIMIT_CPU_SECONDS = 2,
    PLUGIND_CONFINEMENT_LIMIT_OPEN_FILES = 3,
    /// RLIMIT_NPROC, which counts the tasks of the worker's user in its own user namespace: a
    /// cap on the plugin's threads (and processes).
    PLUGIND_CONFINEMENT_LIMIT_TASKS = 4,
    /// RLIMIT_FSIZE: the largest file the process may write (SIGXFSZ ignored: EFBIG instead).
    PLUGIND_CONFINEMENT_LIMIT_FILE_SIZE = 5,
} plugind_confinement_limit;

/// Wraps setrlimit(2) for `limit`.
int plugind_confinement_set_limit(plugind_confinement_limit limit, uint64_t soft, uint64_t hard);
/// Wraps getrlimit(2) for `limit`.
int plugind_confinement_get_limit(plugind_confinement_limit limit, uint64_t *_Nonnull soft,
                                  uint64_t *_Nonnull hard);

/// What the worker's seccomp filter lets through beyond the defaults.
#define PLUGIND_CONFINEMENT_ALLOW_NETWORK (1 << 0)
#define PLUGIND_CONFINEMENT_ALLOW_PROCESSES (1 << 1)

/// Installs the first stage of the worker's seccomp filter (built with libseccomp), which building
/// the view does not need: io_uring and clone3 fail with ENOSYS (glibc then falls back to clone,
/// whose flags the filter can see); bpf, perf events, userfaultfd, setting clocks, the kernel log,
/// the new mount API's fsopen family, setns and unshare, namespace flags on clone, ptrace and
/// cross-process memory access, fanotify and inotify, chroot, and setuid or setgid mode bits fail
/// with EPERM. Requires no-new-privileges or CAP_SYS_ADMIN in the user namespace.
int plugind_confinement_install_base_filter(void);

/// Installs the second stage, after the view: keyrings, mount, umount, pivot_root and the mount
/// API fail with EPERM, openat2 with ENOSYS. Without PLUGIND_CONFINEMENT_ALLOW_NETWORK, sockets
/// other than AF_UNIX fail with EACCES. Without PLUGIND_CONFINEMENT_ALLOW_PROCESSES, fork, vfork,
/// clone without CLONE_THREAD, memfd_create, System V shared memory and message queues, and POSIX
/// message queues fail with EPERM, so that per-process limits bound everything the plugin can
/// hold. Requires no-new-privileges.
int plugind_confinement_install_filter(int options);
/// Compiles the filters of both stages once and keeps them, so that processes forked afterwards
/// (by the pre-forked launcher) install them without compiling, then unloads libseccomp, which
/// they need not map.
int plugind_confinement_prepare_filters(void);
/// Loads libseccomp, which compiles the filters, ahead of the hello in a worker started without
/// a launcher (before its limits and identity change): 0, or ELIBACC when it cannot be loaded.
int plugind_confinement_load_filter_compiler(void);
/// Why libseccomp could not be loaded, in the dynamic loader's words ("" if it was).
const char *_Nonnull plugind_confinement_filter_compiler_failure(void);
/// What `plugind_confinement_probe_filter` found refused.
#define PLUGIND_CONFINEMENT_PROBE_KEYRING (1 << 0)
#define PLUGIND_CONFINEMENT_PROBE_NAMESPACE (1 << 1)
#define PLUGIND_CONFINEMENT_PROBE_FORK (1 << 2)

/// Tries a keyring call, a new user namespace and a fork (a child that exits at once) and
/// reports in `refused` which the installed filter refused with EPERM.
int plugind_confinement_probe_filter(int *_Nonnull refused);

/// The symbolizer's filter (`plugind-worker --symbolize`), with no-new-privileges: reading the
/// descriptors already open, mapping (never executable), writing its answer and exiting; every
/// other system call fails with EPERM. 0 or an errno.
int plugind_confinement_install_symbolizer_filter(void);

/// Wraps prctl(PR_GET_SECCOMP): 0 none, 1 strict, 2 filter.
int plugind_confinement_get_seccomp_mode(int *_Nonnull mode);

/// The Landlock ABI version the kernel offers: 0, or the errno of landlock_create_ruleset's
/// version query with `abi` 0 (ENOSYS: a kernel without Landlock; EOPNOTSUPP: built in, not
/// enabled at boot; EPERM, which the kernel never answers there: a seccomp filter around the
/// process refuses the call).
int plugind_confinement_landlock_abi(int *_Nonnull abi);

/// Creates a Landlock ruleset that handles every filesystem right of `abi`; with `deny_network`
/// also TCP bind and connect (ABI 4+); always signals to processes and connections to abstract
/// unix sockets outside the domain (ABI 6+).
int plugind_confinement_landlock_create(int abi, int deny_network, int *_Nonnull ruleset);

/// `writable` of plugind_confinement_landlock_allow: creating symlinks too.
#define PLUGIND_CONFINEMENT_WRITABLE_WITH_SYMLINKS 2

/// Allows read (and execute) access beneath `path`, or, with `writable` (1), also creating
/// (symlinks only with PLUGIND_CONFINEMENT_WRITABLE_WITH_SYMLINKS), writing, truncating and
/// removing. A path that names a file gets the file rights only.
int plugind_confinement_landlock_allow(int ruleset, int abi, const char *_Nonnull path,
                                       int writable);

/// Enforces `ruleset` on the calling thread (which must be the only one) and closes it.
int plugind_confinement_landlock_enforce(int ruleset);

// MARK: The private filesystem view (sandbox.c)

/// Bind mount options.
#define PLUGIND_SANDBOX_BIND_WRITABLE (1 << 0)
/// Keeps device nodes usable (no MOUNT_ATTR_NODEV): for /dev/null and friends.
#define PLUGIND_SANDBOX_BIND_DEVICE (1 << 1)

/// Sets the process's uid and gid (all three of each) inside its user namespace; with
/// `clear_groups`, drops every supplementary group first. Capabilities are kept only after
/// `plugind_sandbox_limit_capabilities`.
int plugind_sandbox_set_identity(uid_t uid, gid_t gid, int clear_groups);

/// Starts the view, in a process that owns its mount namespace: stops mount propagation to the
/// host, mounts a temporary root (tmpfs), pivots into it with the host's tree beneath, and
/// creates the empty new root. Paths given to the functions below that take a target are
/// absolute paths in the new root.
int plugind_sandbox_enter(void);

/// Binds `source` (an absolute path as the host sees it, containing no symlink: a component
/// that is one fails with ELOOP) on `target`, read-only unless PLUGIND_SANDBOX_BIND_WRITABLE,
/// never setuid, without devices unless PLUGIND_SANDBOX_BIND_DEVICE; submounts included and made
/// read-only too. Creates the mount point and its parents.
int plugind_sandbox_bind(const char *_Nonnull source, const char *_Nonnull target, int flags);

/// Mounts a private tmpfs of at most `size_bytes` on `target` (nosuid, nodev, noexec, mode 0700).
int plugind_sandbox_mount_tmpfs(const char *_Nonnull target, uint64_t size_bytes, uint32_t uid, uint32_t gid);

/// Mounts the worker's own /proc on `target`: its pid namespace only, and no system-wide files.
int plugind_sandbox_mount_proc(const char *_Nonnull target);

/// Creates the symlink `path` with `contents`, and its parent directories.
int plugind_sandbox_symlink(const char *_Nonnull contents, const char *_Nonnull path);

/// Creates the directory `path` and its parents.
int plugind_sandbox_make_directory(const char *_Nonnull path);

/// Settles the view ahead, in a spare that will never show the host's whole tree: keeps a
/// detached copy of the host's tree (closed on close-on-exec and by plugind_sandbox_complete),
/// pivots into the new root and detaches the old one, so that a launch neither pivots nor
/// unmounts. From then on targets are absolute paths in the root and sources are found in the
/// copy. Fails, changing nothing, where the kernel cannot bind from a detached tree.
int plugind_sandbox_settle_ahead(void);

/// The descriptor of the detached copy of the host's tree, or -1 when the view was not settled
/// ahead (or is complete).
int plugind_sandbox_host_tree(void);

/// Tells the view that the copy of the host's tree now has descriptor `fd` (after a spare moved
/// its descriptors).
void plugind_sandbox_set_host_tree(int fd);

/// Ends the view: makes the new root read-only (unless `keep_writable`: a view that binds the
/// host's whole tree for a host that turned confinement off), detaches the host's tree and pivots
/// into the new root. Afterwards nothing but the view exists for the process.
int plugind_sandbox_complete(int keep_writable);

/// The first half of giving up every capability, done before the worker knows its plugin (it
/// still needs CAP_SYS_ADMIN for its view): securebits locked (no root or setuid fix-ups, no
/// ambient raise), the bounding set and the ambient set emptied.
int plugind_sandbox_limit_capabilities(void);

/// The second half: clears the effective, permitted and inheritable sets.
int plugind_sandbox_clear_capabilities(void);

/// The effective and permitted capability sets of the calling thread.
int plugind_sandbox_capabilities(uint64_t *_Nonnull effective, uint64_t *_Nonnull permitted);

/// The bounding set of the calling thread.
int plugind_sandbox_bounding_set(uint64_t *_Nonnull bounding);

/// Joins a new, empty, anonymous session keyring.
int plugind_sandbox_join_new_session_keyring(void);

#ifdef __cplusplus
}
#endif

#endif /* PLUGIND_CONFINEMENT_H */
