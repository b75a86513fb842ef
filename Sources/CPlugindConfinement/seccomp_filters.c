// The worker's seccomp filters (and the symbolizer's), compiled with libseccomp (libseccomp.h).
#include "plugind_confinement.h"

#include "libseccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
    int number = libseccomp.syscall_resolve_name(name);
    return number == __NR_SCMP_ERROR ? fallback : number;
}

static int deny(scmp_filter_ctx filter, int error, int number) {
    return libseccomp.rule_add(filter, SCMP_ACT_ERRNO(error), number, 0);
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
        int result = libseccomp.rule_add_array(filter, SCMP_ACT_ERRNO(EPERM), number, 1, &comparison);
        if (result != 0) return result;
    }
    return 0;
}

static scmp_filter_ctx new_filter(void) {
    scmp_filter_ctx filter = libseccomp.init(SCMP_ACT_ALLOW);
    // A binary tree of system call numbers: shorter paths for the kernel's check at install time
    // and for every call afterwards. Older libseccomp keeps the linear list.
    if (filter != NULL) (void)libseccomp.attr_set(filter, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    return filter;
}

static scmp_filter_ctx finished(scmp_filter_ctx filter, int result) {
    if (result == 0) return filter;
    libseccomp.release(filter);
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
    // Memory is writable or executable, never both (W^X): code a plugin writes cannot run without
    // passing through a file the loader maps. mmap, mprotect and pkey_mprotect take the
    // protection as their third argument; EACCES is what the kernel's own refusal says.
    const int mapping[] = {SCMP_SYS(mmap), SCMP_SYS(mprotect), SCMP_SYS(pkey_mprotect)};
    for (size_t index = 0; result == 0 && index < sizeof mapping / sizeof mapping[0]; index++) {
        result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EACCES), mapping[index], 1,
                                     SCMP_A2_64(SCMP_CMP_MASKED_EQ, PROT_WRITE | PROT_EXEC, PROT_WRITE | PROT_EXEC));
    }
    // No new namespaces, whatever else the plugin may do.
    const uint64_t namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                                CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */;
    if (result == 0) result = deny_bits(filter, SCMP_SYS(clone), 0, namespaces);
    // The parent-death signal stays SIGKILL: a plugin that clears it on every thread (running a
    // signal handler of its own on the thread that waits) keeps its worker alive after its host is
    // killed. SIGKILL may still be set, for the plugin's own children.
    if (result == 0) {
        result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 2, SCMP_A0_32(SCMP_CMP_EQ, PR_SET_PDEATHSIG),
                                     SCMP_A1_64(SCMP_CMP_NE, SIGKILL));
    }
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
            result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EACCES), socket_calls[index], 1,
                                      SCMP_A0_32(SCMP_CMP_NE, AF_UNIX));
        }
        // Its unix sockets keep the default buffers: what they hold in the kernel, which no
        // memory limit counts without a control group, stays near 2 × 208 KiB a socket (times
        // the open-files limit) instead of up to 8 MiB each.
        const int buffer_options[] = {SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE};
        for (size_t index = 0; result == 0 && index < 4; index++) {
            result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setsockopt), 2, SCMP_A1_32(SCMP_CMP_EQ, SOL_SOCKET),
                                      SCMP_A2_32(SCMP_CMP_EQ, (uint32_t)buffer_options[index]));
        }
    } else {
        // A plugin granted the network shares the host's network namespace, where abstract unix
        // names are the machine's: no unix socket of its own making (a socketpair stays, for
        // wake-ups), and bind only with the address sizes of IPv4, IPv6, netlink and packet
        // sockets, so that a socketpair's socket cannot take most abstract names either.
        if (result == 0) {
            result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
        }
        // One rule a size (libseccomp compares an argument once a rule): every length a unix
        // address can have, autobind's included; longer ones are no unix address.
        for (socklen_t size = 0; result == 0 && size <= sizeof(struct sockaddr_un); size++) {
            if (size == sizeof(struct sockaddr_in) || size == sizeof(struct sockaddr_in6) ||
                size == sizeof(struct sockaddr_nl) || size == sizeof(struct sockaddr_ll)) {
                continue;
            }
            result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(bind), 1, SCMP_A2_32(SCMP_CMP_EQ, size));
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
            result = libseccomp.rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        }
        const int spawning[] = {SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(memfd_create), SCMP_SYS(shmget),
                                SCMP_SYS(msgget), SCMP_SYS(mq_open)};
        if (result == 0) result = deny_all(filter, EPERM, spawning, sizeof spawning / sizeof spawning[0]);
    }
    return finished(filter, result);
}

/// Builds the filter `variant` in `*filter`: 0, or the errno of what failed.
static int filter_for(int variant, scmp_filter_ctx *filter) {
    int result = libseccomp_load();
    if (result != 0) return result;
    *filter = variant == BASE_FILTER ? base_filter() : final_filter(variant);
    return *filter == NULL ? ENOMEM : 0;
}

/// Compiles the filter `variant` into BPF kept in `prepared_filters`.
static int prepare_filter(int variant) {
    if (prepared_filters[variant] != NULL) return 0;
    scmp_filter_ctx filter = NULL;
    int built = filter_for(variant, &filter);
    if (built != 0) return built;
    // libseccomp 2.5 exports BPF to a descriptor only.
    int fd = memfd_create("plugind-seccomp", MFD_CLOEXEC);
    int result = fd < 0 ? errno : -libseccomp.export_bpf(filter, fd);
    libseccomp.release(filter);
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
    int result = 0;
    for (int variant = 0; result == 0 && variant <= BASE_FILTER; variant++) result = prepare_filter(variant);
    // What is forked from here installs the programs above: libseccomp has done its part.
    libseccomp_unload();
    return result;
}

int plugind_confinement_load_filter_compiler(void) {
    return libseccomp_load();
}

const char *plugind_confinement_filter_compiler_failure(void) {
    return libseccomp_failure();
}

static int install(int variant) {
    if (prepared_filters[variant] != NULL) {
        struct sock_fprog program = {.len = prepared_lengths[variant], .filter = prepared_filters[variant]};
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) == 0 ? 0 : errno;
    }
    scmp_filter_ctx filter = NULL;
    int built = filter_for(variant, &filter);
    if (built != 0) return built;
    int result = libseccomp.load(filter);
    libseccomp.release(filter);
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

int plugind_confinement_install_symbolizer_filter(void) {
    int loaded = libseccomp_load();
    if (loaded != 0) return loaded;
    scmp_filter_ctx filter = libseccomp.init(SCMP_ACT_ERRNO(EPERM));
    if (filter == NULL) return ENOMEM;
    const int allowed[] = {
        SCMP_SYS(read),         SCMP_SYS(pread64),         SCMP_SYS(write),      SCMP_SYS(writev),
        SCMP_SYS(close),        SCMP_SYS(fstat),           SCMP_SYS(newfstatat), SCMP_SYS(lseek),
        SCMP_SYS(munmap),       SCMP_SYS(mremap),          SCMP_SYS(brk),        SCMP_SYS(madvise),
        SCMP_SYS(exit),         SCMP_SYS(exit_group),      SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(futex),        SCMP_SYS(getrandom),       SCMP_SYS(clock_gettime), SCMP_SYS(gettid),
        SCMP_SYS(getpid),       SCMP_SYS(sched_yield),
    };
    int result = 0;
    for (size_t index = 0; result == 0 && index < sizeof allowed / sizeof allowed[0]; index++) {
        result = libseccomp.rule_add(filter, SCMP_ACT_ALLOW, allowed[index], 0);
    }
    if (result == 0)
        result = libseccomp.rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    if (result == 0)
        result = libseccomp.rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    if (result == 0) result = libseccomp.attr_set(filter, SCMP_FLTATR_CTL_NNP, 1);
    if (result == 0) result = libseccomp.load(filter);
    libseccomp.release(filter);
    return result == 0 ? 0 : -result;
}
