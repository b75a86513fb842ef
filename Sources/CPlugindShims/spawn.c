// Spawning a worker. Everything between clone and execve runs in the child on its own stack while
// sharing the parent's memory (CLONE_VM | CLONE_VFORK), so it may only make async-signal-safe
// system calls: no malloc, no stdio, no locks, no Swift.
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

enum { child_stack_size = 64 * 1024, id_map_capacity = 64 };

typedef struct spawn_context {
    const plugind_shim_spawn_request *request;
    char uid_map[id_map_capacity];
    char gid_map[id_map_capacity];
    // Written by the child when a step fails; the parent reads it after the child has exec'd or
    // exited (CLONE_VFORK guarantees that ordering).
    volatile int child_errno;
} spawn_context;

static size_t format_number(char *buffer, unsigned long value) {
    char digits[24];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    for (size_t index = 0; index < count; index++) buffer[index] = digits[count - 1 - index];
    return count;
}

static size_t format_id_map(char *buffer, unsigned long id, unsigned long count) {
    // "<id> <id> <count>\n", formatted in the parent (snprintf is not async-signal-safe).
    size_t length = format_number(buffer, id);
    buffer[length++] = ' ';
    length += format_number(buffer + length, id);
    buffer[length++] = ' ';
    length += format_number(buffer + length, count == 0 ? 1 : count);
    buffer[length++] = '\n';
    buffer[length] = '\0';
    return length;
}

static void close_above(unsigned int first, unsigned int last) {
    if (first > last) return;
    if (syscall(SYS_close_range, first, last, 0) != 0) {
        // Kernels before 5.9: close one by one up to the descriptor limit.
        long limit = sysconf(_SC_OPEN_MAX);
        for (long fd = first; fd < limit && (unsigned long)fd <= last; fd++) close((int)fd);
    }
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t length = strlen(text);
    ssize_t written = write(fd, text, length);
    int error = written == (ssize_t)length ? 0 : (written < 0 ? errno : EIO);
    close(fd);
    return error;
}

/// Writes "plugind-worker: worker set-up failed: errno N" to `fd` without stdio.
static void report_setup_failure(int error, int fd) {
    static const char prefix[] = "plugind-worker: worker set-up failed: errno ";
    char digits[16];
    size_t count = 0;
    unsigned int value = (unsigned int)error;
    do {
        digits[sizeof digits - 1 - count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0 && count < sizeof digits - 1);
    ssize_t ignored = write(fd, prefix, sizeof prefix - 1);
    ignored = write(fd, digits + sizeof digits - count, count);
    ignored = write(fd, "\n", 1);
    (void)ignored;
}

/// Raises this process's OOM score adjustment to `target` when it is lower (the kernel lets any
/// process raise its own). Async-signal-safe: no stdio. A vfork child's write changes only its
/// own score, not that of the parent whose memory it shares. Returns 0 or an errno.
static int raise_oom_score(int target) {
    int descriptor = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    if (descriptor < 0) return errno;
    char text[16];
    ssize_t length = read(descriptor, text, sizeof text - 1);
    int result = 0;
    if (length <= 0) {
        result = length < 0 ? errno : EIO;
    } else {
        int index = text[0] == '-' ? 1 : 0, value = 0;
        for (; index < length && text[index] >= '0' && text[index] <= '9' && value < 10000; index++) {
            value = value * 10 + (text[index] - '0');
        }
        if (text[0] == '-') value = -value;
        if (value < target && target >= -1000 && target <= 1000) {
            char digits[8];
            int count = 0, magnitude = target < 0 ? -target : target;
            do {
                digits[sizeof digits - 1 - count++] = (char)('0' + magnitude % 10);
                magnitude /= 10;
            } while (magnitude != 0);
            if (target < 0) digits[sizeof digits - 1 - count++] = '-';
            if (pwrite(descriptor, digits + sizeof digits - count, (size_t)count, 0) != count) result = errno;
        }
    }
    close(descriptor);
    return result;
}

/// Resets what a new worker process must not inherit and gives it its session, identity in its
/// user namespace and parent-death signal. With `mapped_by_parent`, the parent wrote the id maps
/// (it is privileged and maps the child to an unprivileged id): the child waits for them on
/// `sync`, then clears its groups and takes the ids. Async-signal-safe system calls only.
static int prepare_process(const plugind_shim_spawn_request *request, const char *uid_map, const char *gid_map,
                           int mapped_by_parent, int sync) {
    // The parent maps ids or moves the child into its control group first: wait for it.
    if (sync >= 0) {
        char verdict = 0;
        ssize_t count;
        while ((count = read(sync, &verdict, 1)) < 0 && errno == EINTR) {
        }
        close(sync);
        if (count != 1 || verdict != 1) return EPERM;
    }
    // Default dispositions and an empty mask: the child must not inherit the host's handlers.
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    for (int signal_number = 1; signal_number < NSIG; signal_number++) {
        if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
        sigaction(signal_number, &default_action, NULL);
    }
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);

    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE) {
        if (mapped_by_parent) {
            // Root of its namespace until its view is built, without root's groups; the worker
            // then takes `uid` and `gid`.
            if (setgroups(0, NULL) != 0) return errno;
        } else {
            int error = write_file("/proc/self/setgroups", "deny");
            if (error == 0) error = write_file("/proc/self/uid_map", uid_map);
            if (error == 0) error = write_file("/proc/self/gid_map", gid_map);
            if (error != 0) return error;
        }
    }
    if ((request->flags & PLUGIND_SHIM_SPAWN_NEW_SESSION) && setsid() < 0) return errno;
    if ((request->flags & PLUGIND_SHIM_SPAWN_DIE_WITH_PARENT) && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
        return errno;
    }
    if (request->flags & PLUGIND_SHIM_SPAWN_RAISE_OOM_SCORE) (void)raise_oom_score(request->oom_score_adj);
    if (!(request->flags & PLUGIND_SHIM_SPAWN_KEEP_DIRECTORY) && chdir("/") != 0) return errno;
    return 0;
}

/// Writes `pid` into each of the request's cgroup files. Returns 0 or an errno.
static int join_cgroups(const plugind_shim_spawn_request *request, pid_t pid) {
    char digits[16];
    size_t count = 0;
    unsigned long value = (unsigned long)pid;
    do {
        digits[sizeof digits - 1 - count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    char text[17];
    memcpy(text, digits + sizeof digits - count, count);
    text[count] = '\0';
    for (int index = 0; index < request->cgroup_file_count; index++) {
        int error = write_file(request->cgroup_files[index], text);
        if (error != 0) return error;
    }
    return 0;
}

/// Writes the id maps of `child` (the caller is privileged): root to root, so that the child can
/// reach the owner's paths while it builds its view, and `uid_map`/`gid_map` (the unprivileged
/// ids it then takes). Returns 0 or an errno.
static int write_child_maps(pid_t child, const char *uid_map, const char *gid_map) {
    // "/proc/<pid>/uid_map", formatted without stdio.
    char path[48];
    static const char prefix[] = "/proc/";
    memcpy(path, prefix, sizeof prefix - 1);
    size_t length = sizeof prefix - 1;
    char digits[16];
    size_t count = 0;
    unsigned long value = (unsigned long)child;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (count > 0) path[length++] = digits[--count];
    static const char uid_name[] = "/uid_map";
    static const char gid_name[] = "/gid_map";
    char map[2 * id_map_capacity];
    static const char root_line[] = "0 0 1\n";
    memcpy(path + length, uid_name, sizeof uid_name);
    memcpy(map, root_line, sizeof root_line - 1);
    memcpy(map + sizeof root_line - 1, uid_map, strlen(uid_map) + 1);
    int error = write_file(path, map);
    if (error != 0) return error;
    memcpy(path + length, gid_name, sizeof gid_name);
    memcpy(map + sizeof root_line - 1, gid_map, strlen(gid_map) + 1);
    return write_file(path, map);
}

/// Makes `request->descriptors[i]` descriptor `i` and closes everything above, except
/// `request->keep_descriptor`. Async-signal-safe system calls only.
static int install_descriptors(const plugind_shim_spawn_request *request) {
    // Move every source descriptor above the target range first, so that a source numbered like
    // a target is not clobbered before it is copied.
    int count = request->descriptor_count;
    int moved[PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS];
    int floor = count > request->keep_descriptor + 1 ? count : request->keep_descriptor + 1;
    for (int index = 0; index < count; index++) {
        moved[index] = fcntl(request->descriptors[index], F_DUPFD, floor);
        if (moved[index] < 0) return errno;
    }
    for (int index = 0; index < count; index++) {
        if (dup2(moved[index], index) < 0) return errno;
    }
    unsigned int first = (unsigned int)count;
    if (request->keep_descriptor >= count) {
        if (request->keep_descriptor > count) close_above(first, (unsigned int)request->keep_descriptor - 1);
        first = (unsigned int)request->keep_descriptor + 1;
    }
    close_above(first, ~0U);
    return 0;
}

/// `prepare_process` for a child forked without exec (a worker or a spare of the launcher), which
/// must never be dumpable: the owner's other processes could ptrace it and inject into what
/// becomes a plugin's worker. The launcher is not dumpable, and a forked child inherits that;
/// only while it writes its own id maps (files a non-dumpable process cannot open) is it, for a
/// few system calls. Not for `spawn_child`, which shares the caller's memory and so its flag.
static int prepare_forked_process(const plugind_shim_spawn_request *request, const char *uid_map, const char *gid_map,
                                  int mapped_by_parent, int sync) {
    int writes_own_maps = (request->flags & PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE) && !mapped_by_parent;
    if (writes_own_maps && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return errno;
    int error = prepare_process(request, uid_map, gid_map, mapped_by_parent, sync);
    if (error == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) error = errno;
    return error;
}

static int prepare_child(const plugind_shim_spawn_request *request, const char *uid_map, const char *gid_map,
                         int mapped_by_parent, int sync) {
    int error = prepare_forked_process(request, uid_map, gid_map, mapped_by_parent, sync);
    return error != 0 ? error : install_descriptors(request);
}

/// execve of the request's path, or execveat of its executable descriptor. Returns only on failure.
static void exec_request(const plugind_shim_spawn_request *request) {
    if (request->executable_descriptor >= 0) {
        syscall(SYS_execveat, request->executable_descriptor, "", request->argv, request->envp, AT_EMPTY_PATH);
    } else {
        execve(request->path, request->argv, request->envp);
    }
}

static int spawn_child(void *argument) {
    spawn_context *context = argument;
    // Not `prepare_child`: it makes the child not dumpable, and this child shares the caller's
    // memory, whose dumpable flag that is (the host would become not dumpable at its first spawn,
    // and every later child's own /proc files root's). The exec sets the new image's flag.
    int error = prepare_process(context->request, context->uid_map, context->gid_map, 0, -1);
    if (error == 0) error = install_descriptors(context->request);
    if (error == 0) {
        exec_request(context->request);
        error = errno;
    }
    context->child_errno = error == 0 ? EINVAL : error;
    _exit(127);
}

#if defined(__SANITIZE_THREAD__) || (defined(__has_feature) && __has_feature(thread_sanitizer))
#define PLUGIND_SHIM_THREAD_SANITIZER 1
#endif

#ifdef PLUGIND_SHIM_THREAD_SANITIZER
/// Under ThreadSanitizer, which cannot follow a child that shares its memory: fork and exec (the
/// sanitizer knows fork), the pidfd opened afterwards. Tests only; never in a release.
static int spawn_with_fork(const plugind_shim_spawn_request *request, pid_t *pid, int *pidfd) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(report[0]);
        close(report[1]);
        return error;
    }
    if (child == 0) {
        plugind_shim_spawn_request copy = *request;
        int error = prepare_child(&copy, "", "", 0, -1);
        if (error == 0) {
            exec_request(request);
            error = errno;
        }
        ssize_t ignored = write(report[1], &error, sizeof error);
        (void)ignored;
        _exit(127);
    }
    close(report[1]);
    int error = 0;
    ssize_t count = read(report[0], &error, sizeof error);
    close(report[0]);
    if (count == sizeof error) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
        return error;
    }
    long opened = syscall(SYS_pidfd_open, child, 0);
    if (opened < 0) return errno;
    *pid = child;
    *pidfd = (int)opened;
    return 0;
}
#endif

int plugind_shim_spawn(const plugind_shim_spawn_request *request, pid_t *pid, int *pidfd) {
    if (request->descriptor_count < 0 || request->descriptor_count > PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS) {
        return EINVAL;
    }
    if (request->executable_descriptor >= 0 &&
        (request->executable_descriptor != request->keep_descriptor || request->keep_descriptor < request->descriptor_count)) {
        return EINVAL;
    }
#ifdef PLUGIND_SHIM_THREAD_SANITIZER
    return spawn_with_fork(request, pid, pidfd);
#endif
    spawn_context context;
    memset(&context, 0, sizeof context);
    context.request = request;
    format_id_map(context.uid_map, (unsigned long)request->uid, 1);
    format_id_map(context.gid_map, (unsigned long)request->gid, 1);

    void *stack = mmap(NULL, child_stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return errno;

    // Namespaces are made by forks of the launcher, which can wait for a privileged parent to
    // map ids; a spawned child cannot.
    if (request->flags & (PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE | PLUGIND_SHIM_SPAWN_NEW_PID_NAMESPACE |
                          PLUGIND_SHIM_SPAWN_NEW_MOUNT_NAMESPACE | PLUGIND_SHIM_SPAWN_NEW_IPC_NAMESPACE)) {
        munmap(stack, child_stack_size);
        return EINVAL;
    }
    int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;

    // Block every signal so that no handler of the host runs in the child, which shares our
    // memory until it execs.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int child_pidfd = -1;
    pid_t child = clone(spawn_child, (char *)stack + child_stack_size, flags, &context,
                        &child_pidfd);
    int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    munmap(stack, child_stack_size);

    if (child < 0) return clone_errno;
    if (context.child_errno != 0) {
        siginfo_t info;
        while (waitid(P_PIDFD, (id_t)child_pidfd, &info, WEXITED) < 0 && errno == EINTR) {
        }
        close(child_pidfd);
        return context.child_errno;
    }
    *pid = child;
    *pidfd = child_pidfd;
    return 0;
}

/// clone() without CLONE_VM: a fork with the request's namespace flags. Returns the child's pid,
/// 0 in the child, or -errno.
static long fork_with_flags(const plugind_shim_spawn_request *request) {
    long flags = SIGCHLD;
    if (request->flags & PLUGIND_SHIM_SPAWN_SIBLING) flags |= CLONE_PARENT;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_PID_NAMESPACE) flags |= CLONE_NEWPID;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE) flags |= CLONE_NEWUSER;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_MOUNT_NAMESPACE) flags |= CLONE_NEWNS;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_IPC_NAMESPACE) flags |= CLONE_NEWIPC;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_NET_NAMESPACE) flags |= CLONE_NEWNET;
    // The kernel stores the pid before clone returns: no signal can fall between the two.
    if (request->record_child_pid != NULL) flags |= CLONE_PARENT_SETTID;
    // The raw system call behaves like fork(): the child continues here, on a copy of this stack.
    // The caller is single-threaded, so no lock can be held in the copy. (parent_tid is the third
    // argument on x86-64 and arm64 alike.)
    long child = syscall(SYS_clone, flags, NULL, request->record_child_pid, NULL, 0);
    return child < 0 ? -errno : child;
}

/// Sets up a forked child from `request`; returns 0 or an errno.
typedef int (*child_setup)(const plugind_shim_spawn_request *request, const char *uid_map, const char *gid_map,
                           int mapped_by_parent, int sync);

/// Forks with the request's flags and runs `setup` in the child. The parent does not wait for
/// the set-up (that would cost a context switch per launch): a failure is written to `output`,
/// which the host shows, and ends the child with status 127.
static int fork_and_set_up(const plugind_shim_spawn_request *request, child_setup setup, int output, pid_t *pid,
                           int *is_child) {
    char uid_map[id_map_capacity];
    char gid_map[id_map_capacity];
    format_id_map(uid_map, (unsigned long)request->uid, request->id_count);
    format_id_map(gid_map, (unsigned long)request->gid, request->id_count);
    // Only a privileged process may map its child to ids other than its own: it does so itself,
    // and the child waits for it on a pipe.
    int mapped_by_parent = (request->flags & PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE) && geteuid() == 0;
    int waits = mapped_by_parent || request->cgroup_file_count > 0;
    int sync[2] = {-1, -1};
    if (waits && pipe2(sync, O_CLOEXEC) != 0) return errno;
    long child = fork_with_flags(request);
    if (child < 0) {
        if (waits) {
            close(sync[0]);
            close(sync[1]);
        }
        return (int)-child;
    }
    if (child == 0) {
        if (waits) close(sync[1]);
        int error = setup(request, uid_map, gid_map, mapped_by_parent, sync[0]);
        if (error != 0) {
            report_setup_failure(error, output);
            _exit(127);
        }
        *is_child = 1;
        return 0;
    }
    if (waits) {
        close(sync[0]);
        // On failure the child reads no verdict, reports it and exits; it is still returned, so
        // that whoever reaps it learns why.
        char verdict = join_cgroups(request, (pid_t)child) == 0 ? 1 : 0;
        if (verdict && mapped_by_parent && write_child_maps((pid_t)child, uid_map, gid_map) != 0) verdict = 0;
        if (verdict) {
            ssize_t ignored = write(sync[1], &verdict, 1);
            (void)ignored;
        }
        close(sync[1]);
    }
    *is_child = 0;
    *pid = (pid_t)child;
    return 0;
}

int plugind_shim_fork_worker(const plugind_shim_spawn_request *request, pid_t *pid, int *is_child) {
    if (request->descriptor_count < 0 || request->descriptor_count > PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS) {
        return EINVAL;
    }
    int output = request->descriptor_count > 1 ? request->descriptors[1] : 2;
    return fork_and_set_up(request, prepare_child, output, pid, is_child);
}

/// A spare's set-up: the process's, then every descriptor closed but stdin, stdout, stderr (all
/// /dev/null in the launcher) and the spare's socket.
static int prepare_spare(const plugind_shim_spawn_request *request, const char *uid_map, const char *gid_map,
                         int mapped_by_parent, int sync) {
    int error = prepare_forked_process(request, uid_map, gid_map, mapped_by_parent, sync);
    if (error != 0) return error;
    int keep = request->keep_descriptor;
    if (keep > 3) close_above(3, (unsigned int)keep - 1);
    close_above(keep >= 3 ? (unsigned int)keep + 1 : 3, ~0U);
    return 0;
}

int plugind_shim_fork_spare(const plugind_shim_spawn_request *request, pid_t *pid, int *is_child) {
    return fork_and_set_up(request, prepare_spare, 2, pid, is_child);
}

int plugind_shim_install_descriptors(const plugind_shim_spawn_request *request) {
    if (request->descriptor_count < 0 || request->descriptor_count > PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS) {
        return EINVAL;
    }
    return install_descriptors(request);
}
