#include "plugind_test_support.h"

#include <linux/keyctl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int32_t plugind_test_add_key(const char *description, const char *payload) {
    long key = syscall(SYS_add_key, "user", description, payload, strlen(payload), KEY_SPEC_SESSION_KEYRING);
    if (key < 0) return -1;
    syscall(SYS_keyctl, KEYCTL_LINK, key, KEY_SPEC_USER_KEYRING);
    return (int32_t)key;
}

void plugind_test_remove_key(int32_t key) {
    syscall(SYS_keyctl, KEYCTL_REVOKE, key);
    syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_SESSION_KEYRING);
    syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_USER_KEYRING);
}

#include <sys/xattr.h>

int plugind_test_has_xattr(const char *path, const char *name) {
    return getxattr(path, name, NULL, 0) >= 0;
}

#include <fcntl.h>
#include <stdio.h>

int plugind_test_exchange(const char *first, const char *second) {
    return renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE) == 0 ? 0 : -1;
}

int plugind_test_limit_processes(int32_t pid, int64_t soft) {
    struct rlimit limit;
    if (prlimit(pid, RLIMIT_NPROC, NULL, &limit) != 0) return -1;
    limit.rlim_cur = soft < 0 ? limit.rlim_max : (rlim_t)soft;
    return prlimit(pid, RLIMIT_NPROC, &limit, NULL);
}

#include <sched.h>

int plugind_test_confine_thread(int32_t tid, int32_t processor) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(processor, &set);
    return sched_setaffinity(tid, sizeof set, &set);
}

int32_t plugind_test_first_allowed_processor(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    for (int processor = 0; processor < CPU_SETSIZE; processor++) {
        if (CPU_ISSET(processor, &set)) return processor;
    }
    return -1;
}

int32_t plugind_test_allowed_processors(int32_t pid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(pid, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}
