// The worker's private filesystem view and the end of its privileges. A worker runs in its own
// user, mount, pid and IPC namespaces; it builds a root of its own on a fresh tmpfs that holds
// read-only bind mounts of exactly what the plugin needs, pivots into it and detaches the host's
// tree, then gives up every capability. Called by a single-threaded process (a spare or a worker
// forked by the launcher), never between fork and exec.
#include "plugind_confinement.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Mount-API numbers and constants newer than Debian 12's headers; the same on every
// architecture since system call 424.
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

struct mount_attributes {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

// The directories the view is built in, below the temporary root (a tmpfs of its own): the new
// root, and the host's old root, through which binds find their sources until the view is done.
#define NEW_ROOT "/newroot"
#define OLD_ROOT "/oldroot"

// Where the view's paths start: below the temporary root, or at the root once a spare has
// settled its view ahead (plugind_sandbox_settle_ahead). Then binds find their sources in
// `host_tree`, a detached copy of the host's tree, instead of the old root. The process is
// single-threaded while it builds its view.
static const char *view_root = NEW_ROOT;
static int host_tree = -1;

/// Joins `prefix` and `path` into `buffer`; ENAMETOOLONG when it does not fit.
static int join(char *buffer, size_t capacity, const char *prefix, const char *path) {
    int written = snprintf(buffer, capacity, "%s%s", prefix, path);
    return written < 0 || (size_t)written >= capacity ? ENAMETOOLONG : 0;
}

/// Creates every missing directory of `path` (absolute, in the current root) with mode 0755.
static int make_parents(const char *path) {
    char buffer[PATH_MAX];
    size_t length = strlen(path);
    if (length >= sizeof buffer) return ENAMETOOLONG;
    memcpy(buffer, path, length + 1);
    for (char *slash = strchr(buffer + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(buffer, 0755) != 0 && errno != EEXIST) return errno;
        *slash = '/';
    }
    return 0;
}

int plugind_sandbox_set_identity(uid_t uid, gid_t gid, int clear_groups) {
    // The parent-death signal is cleared by a change of ids; it is armed again afterwards. The
    // capabilities survive the change: plugind_sandbox_limit_capabilities set
    // SECBIT_NO_SETUID_FIXUP, and plugind_sandbox_clear_capabilities ends them explicitly.
    int death_signal = 0;
    if (prctl(PR_GET_PDEATHSIG, &death_signal, 0, 0, 0) != 0) return errno;
    if (clear_groups && setgroups(0, NULL) != 0) return errno;
    if (setresgid(gid, gid, gid) != 0) return errno;
    if (setresuid(uid, uid, uid) != 0) return errno;
    if (death_signal != 0 && prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0) return errno;
    return 0;
}

int plugind_sandbox_enter(void) {
    // Nothing mounted here may propagate back to the host; the host's later mounts may reach us.
    if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) != 0) return errno;
    // A temporary root over a directory every system has; it shadows that directory only in
    // this mount namespace.
    static const char *const bases[] = {"/tmp", "/run", "/mnt", "/var/tmp"};
    const char *base = NULL;
    for (size_t index = 0; index < sizeof bases / sizeof bases[0] && base == NULL; index++) {
        if (mount("tmpfs", bases[index], "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755") == 0) {
            base = bases[index];
        }
    }
    if (base == NULL) return errno;
    int error = 0;
    if (chdir(base) != 0 || mkdir("newroot", 0755) != 0 || mkdir("oldroot", 0755) != 0 || mkdir("proc", 0755) != 0) {
        error = errno;
    }
    // The view needs a /proc of its own. A container that masks parts of its /proc (Podman's
    // default) refuses to mount another: find out before the worker moves, so that a view that
    // cannot be built leaves it where it was (with its /proc), not in a root without one.
    if (error == 0 && mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid,hidepid=invisible") != 0) {
        error = errno;
    }
    if (error == 0) (void)umount2("proc", MNT_DETACH);
    // The new root is a tmpfs of its own, so that it can be made read-only once it is complete.
    if (error == 0 && mount("tmpfs", "newroot", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0) error = errno;
    if (error == 0 && syscall(SYS_pivot_root, ".", "oldroot") != 0) error = errno;
    if (error != 0) {
        // Nothing of the attempt stays: the temporary root goes, the worker keeps the host's tree.
        (void)chdir("/");
        (void)umount2(base, MNT_DETACH);
        return error;
    }
    return chdir("/") == 0 ? 0 : errno;
}

/// Opens `path` (absolute, as the host sees it) beneath the old root without following any
/// symlink: a component replaced by a symlink after the path was resolved is refused (ELOOP).
static int open_source(const char *path, int *fd) {
    if (path[0] != '/') return EINVAL;
    // The old root is opened for each source rather than kept: a spare's descriptors are
    // replaced when it takes up its work (the detached tree is moved with them).
    int old_root = host_tree >= 0 ? host_tree : open(OLD_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (old_root < 0) return errno;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const char *relative = path[1] == '\0' ? "." : path + 1;
    long result = syscall(SYS_openat2, old_root, relative, &how, sizeof how);
    int error = errno;
    if (old_root != host_tree) close(old_root);
    if (result < 0) return error;
    *fd = (int)result;
    return 0;
}

/// Binds the object open as `source` on `target` (absolute, inside the new root) with the
/// attributes of `flags`: the mount API, which makes every mount of a recursive bind read-only.
static int bind_descriptor(int source, const char *target, int flags) {
    uint64_t attributes = MOUNT_ATTR_NOSUID;
    if (!(flags & PLUGIND_SANDBOX_BIND_WRITABLE)) attributes |= MOUNT_ATTR_RDONLY;
    if (!(flags & PLUGIND_SANDBOX_BIND_DEVICE)) attributes |= MOUNT_ATTR_NODEV;
    long tree = syscall(SYS_open_tree, source, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0) return errno;
    struct mount_attributes attr;
    memset(&attr, 0, sizeof attr);
    attr.attr_set = attributes;
    int error = 0;
    if (syscall(SYS_mount_setattr, (int)tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0 ||
        syscall(SYS_move_mount, (int)tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
        error = errno;
    }
    close((int)tree);
    return error;
}

int plugind_sandbox_bind(const char *source, const char *target, int flags) {
    char destination[PATH_MAX];
    int error = join(destination, sizeof destination, view_root, target);
    if (error != 0) return error;
    int fd = -1;
    error = open_source(source, &fd);
    if (error != 0) return error;
    struct stat status;
    if (fstat(fd, &status) != 0) {
        error = errno;
        close(fd);
        return error;
    }
    error = make_parents(destination);
    if (error == 0) {
        // The mount point must be of the same kind as what is bound on it.
        if (S_ISDIR(status.st_mode)) {
            if (mkdir(destination, 0755) != 0 && errno != EEXIST) error = errno;
        } else {
            int point = open(destination, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
            if (point < 0) {
                error = errno;
            } else {
                close(point);
            }
        }
    }
    if (error == 0) error = bind_descriptor(fd, destination, flags);
    close(fd);
    return error;
}

int plugind_sandbox_mount_tmpfs(const char *target, uint64_t size_bytes, uint32_t uid, uint32_t gid) {
    char destination[PATH_MAX];
    int error = join(destination, sizeof destination, view_root, target);
    if (error == 0) error = make_parents(destination);
    if (error != 0) return error;
    if (mkdir(destination, 0755) != 0 && errno != EEXIST) return errno;
    // Owned by the ids the plugin will run as (a root host's worker builds its view as root of
    // its namespace, then takes its plugin's ids), usable by it alone.
    char options[96];
    snprintf(options, sizeof options, "size=%llu,mode=0700,uid=%u,gid=%u", (unsigned long long)size_bytes, uid, gid);
    return mount("tmpfs", destination, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) == 0 ? 0 : errno;
}

int plugind_sandbox_mount_proc(const char *target) {
    char destination[PATH_MAX];
    int error = join(destination, sizeof destination, view_root, target);
    if (error == 0) error = make_parents(destination);
    if (error != 0) return error;
    if (mkdir(destination, 0755) != 0 && errno != EEXIST) return errno;
    // Only the processes of the worker's own pid namespace, and none of the system-wide files
    // (/proc/sys, /proc/sysrq-trigger, /proc/kcore, …): subset=pid.
    return mount("proc", destination, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid,hidepid=invisible") == 0 ? 0
                                                                                                                   : errno;
}

int plugind_sandbox_symlink(const char *contents, const char *path) {
    char destination[PATH_MAX];
    int error = join(destination, sizeof destination, view_root, path);
    if (error != 0) return error;
    // Parents are made only when missing: a launch adds many entries to one directory.
    if (symlink(contents, destination) == 0) return 0;
    if (errno != ENOENT) return errno;
    error = make_parents(destination);
    if (error != 0) return error;
    return symlink(contents, destination) == 0 ? 0 : errno;
}

int plugind_sandbox_make_directory(const char *path) {
    char destination[PATH_MAX];
    int error = join(destination, sizeof destination, view_root, path);
    if (error != 0) return error;
    if (mkdir(destination, 0755) == 0 || errno == EEXIST) return 0;
    if (errno != ENOENT) return errno;
    error = make_parents(destination);
    if (error != 0) return error;
    return mkdir(destination, 0755) == 0 || errno == EEXIST ? 0 : errno;
}

/// Pivots into the new root and detaches the temporary root and the host's tree beneath it.
static int pivot_into_new_root(void) {
    // Detaching the old root must not send unmount events to the host's tree.
    if (mount(NULL, OLD_ROOT, NULL, MS_REC | MS_PRIVATE, NULL) != 0) return errno;
    // Pivot into the new root with the temporary root (and the old root mounted in it) stacked
    // beneath, then detach both at once, in one unmount.
    int temporary_root = open("/", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (temporary_root < 0) return errno;
    int error = 0;
    if (chdir(NEW_ROOT) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || fchdir(temporary_root) != 0 ||
        umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
        error = errno;
    }
    close(temporary_root);
    return error;
}

int plugind_sandbox_settle_ahead(void) {
    if (host_tree >= 0) return EALREADY;
    long tree = syscall(SYS_open_tree, AT_FDCWD, OLD_ROOT, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0) return errno;
    // Binding from a detached tree is recent (Linux 6.15?); where it is refused, the view keeps
    // the old root until its launch.
    long probe = syscall(SYS_open_tree, (int)tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (probe < 0) {
        int error = errno;
        close((int)tree);
        return error;
    }
    close((int)probe);
    int error = pivot_into_new_root();
    if (error != 0) {
        close((int)tree);
        return error;
    }
    view_root = "";
    host_tree = (int)tree;
    return 0;
}

int plugind_sandbox_host_tree(void) {
    return host_tree;
}

void plugind_sandbox_set_host_tree(int fd) {
    host_tree = fd;
}

int plugind_sandbox_complete(int keep_writable) {
    if (host_tree >= 0) {
        // Settled ahead: the root is the view already. The host's whole tree cannot be shown.
        if (keep_writable) return EINVAL;
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) return errno;
        // The last reference to the host's tree: nothing of it is left for plugin code.
        close(host_tree);
        host_tree = -1;
        return 0;
    }
    // The view's own directories and symlinks become read-only.
    if (!keep_writable && mount(NULL, NEW_ROOT, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) {
        return errno;
    }
    return pivot_into_new_root();
}

int plugind_sandbox_limit_capabilities(void) {
    // Locked while CAP_SETPCAP is held: no way back to capabilities through uid 0, setuid
    // fix-ups or ambient capabilities. Without setuid fix-ups, the change of ids that follows
    // keeps the capabilities the view still needs.
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                         SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return errno;
    for (int capability = 0; capability <= 63; capability++) {
        if (prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0) {
            if (errno == EINVAL) break;  // past the last capability this kernel knows
            return errno;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
    return 0;
}

int plugind_sandbox_clear_capabilities(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    return syscall(SYS_capset, &header, data) == 0 ? 0 : errno;
}

int plugind_sandbox_capabilities(uint64_t *effective, uint64_t *permitted) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &header, data) != 0) return errno;
    *effective = (uint64_t)data[1].effective << 32 | data[0].effective;
    *permitted = (uint64_t)data[1].permitted << 32 | data[0].permitted;
    return 0;
}

int plugind_sandbox_bounding_set(uint64_t *bounding) {
    uint64_t held = 0;
    for (int capability = 0; capability <= 63; capability++) {
        int result = prctl(PR_CAPBSET_READ, capability, 0, 0, 0);
        if (result < 0) break;
        if (result == 1) held |= (uint64_t)1 << capability;
    }
    *bounding = held;
    return 0;
}

int plugind_sandbox_join_new_session_keyring(void) {
    // KEYCTL_JOIN_SESSION_KEYRING (1) with no name: a new, empty, anonymous session keyring.
    return syscall(SYS_keyctl, 1, NULL) < 0 ? errno : 0;
}
