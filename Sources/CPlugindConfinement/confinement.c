#include "plugind_confinement.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

// Landlock ABI constants newer than the kernel headers of Debian 12 (6.1), from the kernel's
// include/uapi/linux/landlock.h.
#define ACCESS_FS_EXECUTE (1ULL << 0)
#define ACCESS_FS_WRITE_FILE (1ULL << 1)
#define ACCESS_FS_READ_FILE (1ULL << 2)
#define ACCESS_FS_READ_DIR (1ULL << 3)
#define ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define ACCESS_FS_MAKE_DIR (1ULL << 7)
#define ACCESS_FS_MAKE_REG (1ULL << 8)
#define ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define ACCESS_FS_MAKE_SYM (1ULL << 12)
#define ACCESS_FS_REFER (1ULL << 13)
#define ACCESS_FS_TRUNCATE (1ULL << 14)
#define ACCESS_FS_IOCTL_DEV (1ULL << 15)
#define ACCESS_NET_BIND_TCP (1ULL << 0)
#define ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)
#define CREATE_RULESET_VERSION (1U << 0)
#define RULE_PATH_BENEATH 1

struct ruleset_attributes {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath_attributes {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static const uint64_t file_rights =
    ACCESS_FS_EXECUTE | ACCESS_FS_WRITE_FILE | ACCESS_FS_READ_FILE | ACCESS_FS_TRUNCATE |
    ACCESS_FS_IOCTL_DEV;

static uint64_t filesystem_rights(int abi) {
    uint64_t rights = (ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0 through 12
    if (abi >= 2) rights |= ACCESS_FS_REFER;
    if (abi >= 3) rights |= ACCESS_FS_TRUNCATE;
    if (abi >= 5) rights |= ACCESS_FS_IOCTL_DEV;
    return rights;
}

int plugind_confinement_set_no_new_privileges(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : errno;
}

int plugind_confinement_get_no_new_privileges(int *enabled) {
    int result = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    if (result < 0) return errno;
    *enabled = result;
    return 0;
}

int plugind_confinement_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : errno;
}

int plugind_confinement_raise_oom_score(int adjustment) {
    int descriptor = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    if (descriptor < 0) return errno;
    char text[16] = {0};
    ssize_t length = read(descriptor, text, sizeof text - 1);
    int result = 0;
    if (length <= 0) {
        result = length < 0 ? errno : EIO;
    } else if (atoi(text) < adjustment) {
        int written = snprintf(text, sizeof text, "%d", adjustment);
        if (pwrite(descriptor, text, (size_t)written, 0) != written) result = errno;
    }
    close(descriptor);
    return result;
}

int plugind_confinement_set_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 ? 0 : errno;
}

int plugind_confinement_get_dumpable(int *dumpable) {
    int result = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (result < 0) return errno;
    *dumpable = result;
    return 0;
}

static int resource_for(plugind_confinement_limit limit) {
    switch (limit) {
    case PLUGIND_CONFINEMENT_LIMIT_CORE_FILE_SIZE: return RLIMIT_CORE;
    case PLUGIND_CONFINEMENT_LIMIT_ADDRESS_SPACE: return RLIMIT_AS;
    case PLUGIND_CONFINEMENT_LIMIT_CPU_SECONDS: return RLIMIT_CPU;
    case PLUGIND_CONFINEMENT_LIMIT_OPEN_FILES: return RLIMIT_NOFILE;
    case PLUGIND_CONFINEMENT_LIMIT_TASKS: return RLIMIT_NPROC;
    case PLUGIND_CONFINEMENT_LIMIT_FILE_SIZE: return RLIMIT_FSIZE;
    }
    return -1;
}

int plugind_confinement_set_limit(plugind_confinement_limit limit, uint64_t soft, uint64_t hard) {
    int resource = resource_for(limit);
    if (resource < 0) return EINVAL;
    // A write past the file-size limit fails with EFBIG rather than killing the plugin.
    if (resource == RLIMIT_FSIZE && signal(SIGXFSZ, SIG_IGN) == SIG_ERR) return errno;
    struct rlimit values = {.rlim_cur = (rlim_t)soft, .rlim_max = (rlim_t)hard};
    return setrlimit(resource, &values) == 0 ? 0 : errno;
}

int plugind_confinement_get_limit(plugind_confinement_limit limit, uint64_t *soft, uint64_t *hard) {
    int resource = resource_for(limit);
    if (resource < 0) return EINVAL;
    struct rlimit values;
    if (getrlimit(resource, &values) != 0) return errno;
    *soft = (uint64_t)values.rlim_cur;
    *hard = (uint64_t)values.rlim_max;
    return 0;
}

// System calls newer than libseccomp 2.5 knows by name; numbered alike on every architecture
// since 424.
enum {
    syscall_open_tree = 428,
    syscall_move_mount = 429,
    syscall_fsopen = 430,
    syscall_fsconfig = 431,
    syscall_fsmount = 432,
    syscall_fspick = 433,
    syscall_clone3 = 435,
    syscall_openat2 = 437,
    syscall_pidfd_getfd = 438,
    syscall_mount_setattr = 442,
    syscall_memfd_secret = 447,
    syscall_fchmodat2 = 452,
    syscall_open_tree_attr = 467,
};

// The filters come in two stages, so that the expensive part of installing one (the kernel
// checks a new filter against every system call of every architecture, in time that grows with
// its length) is paid by a spare before its launch: the base filter holds every refusal the view
// does not need, the final one the mount API, keyrings, openat2 and the plugin's options. The
// kernel runs both on every system call.
#define FINAL_VARIANTS 4
#define BASE_FILTER FINAL_VARIANTS

// The compiled filters, one per combination of options and the base, kept by
// plugind_confinement_prepare_filters so that workers forked afterwards install them without
// compiling them again. Written once, before any fork.
static struct sock_filter *prepared_filters[FINAL_VARIANTS + 1];
static unsigned short prepared_lengths[FINAL_VARIANTS + 1];

/// The number libseccomp uses for `name` on this architecture, or `fallback` when this
/// libseccomp does not know it.
static int syscall_number(const char *name, int fallback) {
    int number = seccomp_syscall_resolve_name(name);
    return number == __NR_SCMP_ERROR ? fallback : number;
}

static int deny(scmp_filter_ctx filter, int error, int number) {
    return seccomp_rule_add(filter, SCMP_ACT_ERRNO(error), number, 0);
}

static int deny_all(scmp_filter_ctx filter, int error, const int *numbers, size_t count) {
    int result = 0;
    for (size_t index = 0; result == 0 && index < count; index++) result = deny(filter, error, numbers[index]);
    return result;
}

/// Denies `number` when argument `argument` has any bit of `mask` set; one rule per bit, since
/// a masked comparison can only test for equality.
static int deny_bits(scmp_filter_ctx filter, int number, unsigned argument, uint64_t mask) {
    for (int bit = 0; bit < 64; bit++) {
        uint64_t flag = (uint64_t)1 << bit;
        if (!(mask & flag)) continue;
        struct scmp_arg_cmp comparison = {.arg = argument, .op = SCMP_CMP_MASKED_EQ, .datum_a = flag, .datum_b = flag};
        int result = seccomp_rule_add_array(filter, SCMP_ACT_ERRNO(EPERM), number, 1, &comparison);
        if (result != 0) return result;
    }
    return 0;
}

static scmp_filter_ctx new_filter(void) {
    scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
    // A binary tree of system call numbers: shorter paths for the kernel's check at install time
    // and for every call afterwards. Older libseccomp keeps the linear list.
    if (filter != NULL) (void)seccomp_attr_set(filter, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    return filter;
}

static scmp_filter_ctx finished(scmp_filter_ctx filter, int result) {
    if (result == 0) return filter;
    seccomp_release(filter);
    return NULL;
}

/// Every refusal that does not depend on the plugin and that building the view does not need.
static scmp_filter_ctx base_filter(void) {
    scmp_filter_ctx filter = new_filter();
    if (filter == NULL) return NULL;
    // ENOSYS: io_uring would bypass every check below; without clone3, glibc uses clone.
    const int unsupported[] = {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register),
                               syscall_number("clone3", syscall_clone3), syscall_number("fchmodat2", syscall_fchmodat2)};
    int result = deny_all(filter, ENOSYS, unsupported, sizeof unsupported / sizeof unsupported[0]);
    const int refused[] = {
        SCMP_SYS(bpf), SCMP_SYS(perf_event_open), SCMP_SYS(userfaultfd), SCMP_SYS(clock_settime),
        SCMP_SYS(clock_adjtime), SCMP_SYS(adjtimex), SCMP_SYS(settimeofday), SCMP_SYS(syslog),
        syscall_number("fsopen", syscall_fsopen), syscall_number("fsconfig", syscall_fsconfig),
        syscall_number("fsmount", syscall_fsmount), syscall_number("fspick", syscall_fspick), SCMP_SYS(setns),
        SCMP_SYS(unshare), SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
        syscall_number("pidfd_getfd", syscall_pidfd_getfd), SCMP_SYS(kcmp), SCMP_SYS(fanotify_init),
        SCMP_SYS(inotify_init), SCMP_SYS(inotify_init1), SCMP_SYS(inotify_add_watch),
        syscall_number("memfd_secret", syscall_memfd_secret), SCMP_SYS(acct), SCMP_SYS(chroot),
    };
    if (result == 0) result = deny_all(filter, EPERM, refused, sizeof refused / sizeof refused[0]);
    // No new namespaces, whatever else the plugin may do.
    const uint64_t namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                                CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */;
    if (result == 0) result = deny_bits(filter, SCMP_SYS(clone), 0, namespaces);
    // No setuid or setgid files: chmod and creation modes.
    const uint64_t set_id = S_ISUID | S_ISGID;
    if (result == 0) result = deny_bits(filter, SCMP_SYS(chmod), 1, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(fchmod), 1, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(fchmodat), 2, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(creat), 1, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(open), 2, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(openat), 3, set_id);
    // mknod makes regular files too (S_IFREG), with whatever mode it is given; mkdir's set-gid
    // bit is ignored by the kernel, refused all the same so that no mode asks for it.
    if (result == 0) result = deny_bits(filter, SCMP_SYS(mknod), 1, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(mknodat), 2, set_id);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(mkdir), 1, S_ISGID);
    if (result == 0) result = deny_bits(filter, SCMP_SYS(mkdirat), 2, S_ISGID);
    return finished(filter, result);
}

/// What the view needed (the mount API, the session keyring, openat2) and what depends on the
/// plugin's options.
static scmp_filter_ctx final_filter(int options) {
    scmp_filter_ctx filter = new_filter();
    if (filter == NULL) return NULL;
    int result = 0;
    if (!(options & PLUGIND_CONFINEMENT_ALLOW_NETWORK)) {
        const int socket_calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
        for (size_t index = 0; result == 0 && index < 2; index++) {
            result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EACCES), socket_calls[index], 1,
                                      SCMP_A0_32(SCMP_CMP_NE, AF_UNIX));
        }
        // Its unix sockets keep the default buffers: what they hold in the kernel, which no
        // memory limit counts without a control group, stays near 2 × 208 KiB a socket (times
        // the open-files limit) instead of up to 8 MiB each.
        const int buffer_options[] = {SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE};
        for (size_t index = 0; result == 0 && index < 4; index++) {
            result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setsockopt), 2, SCMP_A1_32(SCMP_CMP_EQ, SOL_SOCKET),
                                      SCMP_A2_32(SCMP_CMP_EQ, (uint32_t)buffer_options[index]));
        }
    } else {
        // A plugin granted the network shares the host's network namespace, where abstract unix
        // names are the machine's: no unix socket of its own making (a socketpair stays, for
        // wake-ups), and bind only with the address sizes of IPv4, IPv6, netlink and packet
        // sockets, so that a socketpair's socket cannot take most abstract names either.
        if (result == 0) {
            result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
        }
        // One rule a size (libseccomp compares an argument once a rule): every length a unix
        // address can have, autobind's included; longer ones are no unix address.
        for (socklen_t size = 0; result == 0 && size <= sizeof(struct sockaddr_un); size++) {
            if (size == sizeof(struct sockaddr_in) || size == sizeof(struct sockaddr_in6) ||
                size == sizeof(struct sockaddr_nl) || size == sizeof(struct sockaddr_ll)) {
                continue;
            }
            result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(bind), 1, SCMP_A2_32(SCMP_CMP_EQ, size));
        }
    }
    // ENOSYS: openat2 passes its mode in a structure the filter cannot read (a setuid file could
    // be created with it); the view needed it, the plugin's libc falls back to openat.
    if (result == 0) result = deny(filter, ENOSYS, syscall_number("openat2", syscall_openat2));
    const int refused[] = {
        SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(mount), SCMP_SYS(umount2),
        SCMP_SYS(pivot_root), syscall_number("open_tree", syscall_open_tree),
        syscall_number("move_mount", syscall_move_mount), syscall_number("mount_setattr", syscall_mount_setattr),
        syscall_number("open_tree_attr", syscall_open_tree_attr),
    };
    if (result == 0) result = deny_all(filter, EPERM, refused, sizeof refused / sizeof refused[0]);
    if (!(options & PLUGIND_CONFINEMENT_ALLOW_PROCESSES)) {
        // Threads only: clone must carry CLONE_THREAD.
        if (result == 0) {
            result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        }
        const int spawning[] = {SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(memfd_create), SCMP_SYS(shmget),
                                SCMP_SYS(msgget), SCMP_SYS(mq_open)};
        if (result == 0) result = deny_all(filter, EPERM, spawning, sizeof spawning / sizeof spawning[0]);
    }
    return finished(filter, result);
}

static scmp_filter_ctx filter_for(int variant) {
    return variant == BASE_FILTER ? base_filter() : final_filter(variant);
}

/// Compiles the filter `variant` into BPF kept in `prepared_filters`.
static int prepare_filter(int variant) {
    if (prepared_filters[variant] != NULL) return 0;
    scmp_filter_ctx filter = filter_for(variant);
    if (filter == NULL) return ENOMEM;
    // libseccomp 2.5 exports BPF to a descriptor only.
    int fd = memfd_create("plugind-seccomp", MFD_CLOEXEC);
    int result = fd < 0 ? errno : -seccomp_export_bpf(filter, fd);
    seccomp_release(filter);
    if (result == 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 || size / (off_t)sizeof(struct sock_filter) > 0xFFFF) {
            result = EINVAL;
        } else {
            struct sock_filter *program = malloc((size_t)size);
            if (program == NULL || pread(fd, program, (size_t)size, 0) != size) {
                free(program);
                result = EIO;
            } else {
                prepared_filters[variant] = program;
                prepared_lengths[variant] = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
            }
        }
    }
    if (fd >= 0) close(fd);
    return result;
}

int plugind_confinement_prepare_filters(void) {
    for (int variant = 0; variant <= BASE_FILTER; variant++) {
        int result = prepare_filter(variant);
        if (result != 0) return result;
    }
    return 0;
}

static int install(int variant) {
    if (prepared_filters[variant] != NULL) {
        struct sock_fprog program = {.len = prepared_lengths[variant], .filter = prepared_filters[variant]};
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) == 0 ? 0 : errno;
    }
    scmp_filter_ctx filter = filter_for(variant);
    if (filter == NULL) return ENOMEM;
    int result = seccomp_load(filter);
    seccomp_release(filter);
    return result < 0 ? -result : result;
}

int plugind_confinement_install_base_filter(void) {
    return install(BASE_FILTER);
}

int plugind_confinement_install_filter(int options) {
    if (options < 0 || options >= FINAL_VARIANTS) return EINVAL;
    return install(options);
}

int plugind_confinement_get_seccomp_mode(int *mode) {
    int result = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    if (result < 0) return errno;
    *mode = result;
    return 0;
}

int plugind_confinement_landlock_abi(int *abi) {
    long result = syscall(SYS_landlock_create_ruleset, NULL, 0, CREATE_RULESET_VERSION);
    if (result < 0) {
        if (errno == ENOSYS || errno == EOPNOTSUPP) {
            *abi = 0;
            return 0;
        }
        return errno;
    }
    *abi = (int)result;
    return 0;
}

int plugind_confinement_landlock_create(int abi, int deny_network, int *ruleset) {
    if (abi < 1) return EOPNOTSUPP;
    struct ruleset_attributes attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.handled_access_fs = filesystem_rights(abi);
    size_t size = sizeof attributes.handled_access_fs;
    if (abi >= 4) {
        size = offsetof(struct ruleset_attributes, scoped);
        if (deny_network) attributes.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP;
    }
    if (abi >= 6) {
        // Abstract unix sockets are the owner's local services (a desktop bus, a display), not
        // the network: out of reach whether or not the plugin may use the network.
        size = sizeof attributes;
        attributes.scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET;
    }
    long result = syscall(SYS_landlock_create_ruleset, &attributes, size, 0);
    if (result < 0) return errno;
    *ruleset = (int)result;
    return 0;
}

int plugind_confinement_landlock_allow(int ruleset, int abi, const char *path, int writable) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat status;
    if (fstat(fd, &status) != 0) {
        int error = errno;
        close(fd);
        return error;
    }
    uint64_t rights = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;
    if (writable) {
        rights |= filesystem_rights(abi) & ~(ACCESS_FS_MAKE_CHAR | ACCESS_FS_MAKE_BLOCK);
        // A symlink the plugin plants in a grant cannot lead the plugin anywhere, but the owner
        // or the host application reading the grant would follow it: only when asked for.
        if (writable != PLUGIND_CONFINEMENT_WRITABLE_WITH_SYMLINKS) rights &= ~ACCESS_FS_MAKE_SYM;
    }
    if (!S_ISDIR(status.st_mode)) rights &= file_rights;
    rights &= filesystem_rights(abi);
    struct path_beneath_attributes rule = {.allowed_access = rights, .parent_fd = fd};
    long result = syscall(SYS_landlock_add_rule, ruleset, RULE_PATH_BENEATH, &rule, 0);
    int error = result < 0 ? errno : 0;
    close(fd);
    return error;
}

int plugind_confinement_landlock_enforce(int ruleset) {
    long result = syscall(SYS_landlock_restrict_self, ruleset, 0);
    int error = result < 0 ? errno : 0;
    close(ruleset);
    return error;
}

int plugind_confinement_probe_filter(int *refused) {
    int result = 0;
    // KEYCTL_GET_KEYRING_ID (0) of the user keyring (-4).
    if (syscall(SYS_keyctl, 0, -4, 0) < 0 && errno == EPERM) result |= PLUGIND_CONFINEMENT_PROBE_KEYRING;
    if (unshare(CLONE_NEWUSER) != 0 && errno == EPERM) result |= PLUGIND_CONFINEMENT_PROBE_NAMESPACE;
    // A fork the filter lets through must not run on: the child exits at once.
    long child = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (child == 0) _exit(0);
    if (child < 0 && errno == EPERM) {
        result |= PLUGIND_CONFINEMENT_PROBE_FORK;
    } else if (child > 0) {
        int status;
        while (waitpid((pid_t)child, &status, 0) < 0 && errno == EINTR) {
        }
    }
    *refused = result;
    return 0;
}
