#include "plugind_confinement.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

int plugind_confinement_landlock_abi(int *abi) {
    long result = syscall(SYS_landlock_create_ruleset, NULL, 0, CREATE_RULESET_VERSION);
    if (result < 0) {
        *abi = 0;
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
