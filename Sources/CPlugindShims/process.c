// Process and descriptor syscalls that glibc 2.36 does not wrap, and macros Swift cannot import.
#include "plugind_shims.h"

#include <sys/prctl.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

int plugind_shim_pidfd_open(pid_t pid, int *pidfd) {
    long result = syscall(SYS_pidfd_open, pid, 0);
    if (result < 0) return errno;
    *pidfd = (int)result;
    return 0;
}

int plugind_shim_request_stack(int pidfd, uint64_t request) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = PLUGIND_SHIM_STACK_SIGNAL;
    // SI_QUEUE: the value travels with the signal (a positive code would be refused).
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_ptr = (void *)(uintptr_t)request;
    if (syscall(SYS_pidfd_send_signal, pidfd, PLUGIND_SHIM_STACK_SIGNAL, &info, 0) != 0) return errno;
    return 0;
}

int plugind_shim_pidfd_send_signal(int pidfd, int signal) {
    if (syscall(SYS_pidfd_send_signal, pidfd, signal, NULL, 0) != 0) return errno;
    return 0;
}

int plugind_shim_pidfd_wait(int pidfd, int no_hang, plugind_shim_exit_info *info) {
    siginfo_t status;
    struct rusage usage;
    memset(&status, 0, sizeof status);
    memset(&usage, 0, sizeof usage);
    int options = WEXITED | (no_hang ? WNOHANG : 0);
    // The raw system call, because glibc's waitid() drops the rusage argument.
    while (syscall(SYS_waitid, P_PIDFD, pidfd, &status, options, &usage) != 0) {
        if (errno != EINTR) return errno;
    }
    memset(info, 0, sizeof *info);
    if (status.si_pid == 0) return 0;  // WNOHANG and still running
    switch (status.si_code) {
    case CLD_EXITED: info->state = 1; break;
    case CLD_DUMPED: info->state = 3; break;
    default: info->state = 2; break;
    }
    info->value = status.si_status;
    info->user_microseconds =
        (uint64_t)usage.ru_utime.tv_sec * 1000000u + (uint64_t)usage.ru_utime.tv_usec;
    info->system_microseconds =
        (uint64_t)usage.ru_stime.tv_sec * 1000000u + (uint64_t)usage.ru_stime.tv_usec;
    info->max_resident_kilobytes = (uint64_t)usage.ru_maxrss;
    return 0;
}

const char *plugind_shim_signal_abbreviation(int signal) { return sigabbrev_np(signal); }

int plugind_shim_close_range(unsigned int first, unsigned int last) {
    if (syscall(SYS_close_range, first, last, 0) != 0) return errno;
    return 0;
}

int plugind_shim_pipe(int *read_end, int *write_end) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    *read_end = fds[0];
    *write_end = fds[1];
    return 0;
}

int plugind_shim_set_cloexec(int fd) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) return errno;
    return 0;
}

int plugind_shim_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return errno;
    return 0;
}

int plugind_shim_set_pipe_size(int fd, int size, int *actual) {
    int result = fcntl(fd, F_SETPIPE_SZ, size);
    if (result < 0) return errno;
    *actual = result;
    return 0;
}

int plugind_shim_ignore_sigpipe(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &action, NULL) != 0) return errno;
    return 0;
}

int plugind_shim_raise_open_file_limit(uint64_t *limit) {
    struct rlimit current;
    if (getrlimit(RLIMIT_NOFILE, &current) != 0) return errno;
    if (current.rlim_cur < current.rlim_max) {
        current.rlim_cur = current.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &current) != 0) return errno;
    }
    *limit = (uint64_t)current.rlim_cur;
    return 0;
}

int plugind_shim_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0) == 0 ? 0 : errno;
}

int plugind_shim_allowed_processor_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int plugind_shim_open_beneath(int directory, const char *path, int flags, int *fd) {
    struct {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
    } how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW), .mode = 0,
             .resolve = 0x08 /* RESOLVE_BENEATH */ | 0x04 /* RESOLVE_NO_SYMLINKS */ | 0x02 /* RESOLVE_NO_MAGICLINKS */};
    long result = syscall(SYS_openat2, directory, path, &how, sizeof how);
    if (result < 0 && errno == ENOSYS) return plugind_shim_open_beneath_by_walk(directory, path, flags, fd);
    if (result < 0) return errno;
    *fd = (int)result;
    return 0;
}

/* Where openat2 is missing (ENOSYS: a seccomp profile older than the call, as some container
 * runtimes ship, or valgrind), the same guarantees by a walk: one component at a time, each
 * opened relative to the last with O_NOFOLLOW (a symlink anywhere fails with ELOOP, as
 * RESOLVE_NO_SYMLINKS does), and ".." or an absolute path refused with EXDEV, as RESOLVE_BENEATH
 * does. Every step is relative to a descriptor, so nothing can be swapped between the steps. */
int plugind_shim_open_beneath_by_walk(int directory, const char *path, int flags, int *fd) {
    char copy[4096];
    size_t length = strlen(path);
    if (length == 0) return ENOENT;
    if (length >= sizeof copy) return ENAMETOOLONG;
    if (path[0] == '/') return EXDEV;
    memcpy(copy, path, length + 1);
    int current = directory, owned = -1;
    char *rest = NULL;
    char *component = strtok_r(copy, "/", &rest);
    while (component != NULL) {
        char *next = strtok_r(NULL, "/", &rest);
        if (strcmp(component, "..") == 0) {
            if (owned >= 0) close(owned);
            return EXDEV;
        }
        int opened = next != NULL ? openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                  : openat(current, component, flags | O_NOFOLLOW | O_CLOEXEC);
        int error = errno;
        if (owned >= 0) close(owned);
        if (opened < 0) return error;
        if (next == NULL) {
            *fd = opened;
            return 0;
        }
        owned = current = opened;
        component = next;
    }
    return ENOENT;
}
