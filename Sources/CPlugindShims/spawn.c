// Spawning a worker. Everything between clone and execve runs in the child on its own stack while
// sharing the parent's memory (CLONE_VM | CLONE_VFORK), so it may only make async-signal-safe
// system calls: no malloc, no stdio, no locks, no Swift.
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
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

static size_t format_id_map(char *buffer, unsigned long id) {
    // "<id> <id> 1\n", formatted in the parent (snprintf is not async-signal-safe).
    char digits[24];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + id % 10);
        id /= 10;
    } while (id != 0);
    size_t length = 0;
    for (int copy = 0; copy < 2; copy++) {
        for (size_t index = count; index > 0; index--) buffer[length++] = digits[index - 1];
        buffer[length++] = ' ';
    }
    buffer[length++] = '1';
    buffer[length++] = '\n';
    buffer[length] = '\0';
    return length;
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

static int fail(spawn_context *context, int error) {
    context->child_errno = error == 0 ? EINVAL : error;
    _exit(127);
}

static int spawn_child(void *argument) {
    spawn_context *context = argument;
    const plugind_shim_spawn_request *request = context->request;

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
        int error = write_file("/proc/self/setgroups", "deny");
        if (error == 0) error = write_file("/proc/self/uid_map", context->uid_map);
        if (error == 0) error = write_file("/proc/self/gid_map", context->gid_map);
        if (error != 0) return fail(context, error);
    }
    if ((request->flags & PLUGIND_SHIM_SPAWN_NEW_SESSION) && setsid() < 0) {
        return fail(context, errno);
    }
    if ((request->flags & PLUGIND_SHIM_SPAWN_DIE_WITH_PARENT) &&
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
        return fail(context, errno);
    }

    // Move every source descriptor above the target range first, so that a source numbered like
    // a target is not clobbered before it is copied.
    int count = request->descriptor_count;
    int moved[PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS];
    for (int index = 0; index < count; index++) {
        moved[index] = fcntl(request->descriptors[index], F_DUPFD, count);
        if (moved[index] < 0) return fail(context, errno);
    }
    for (int index = 0; index < count; index++) {
        if (dup2(moved[index], index) < 0) return fail(context, errno);
    }
    if (syscall(SYS_close_range, (unsigned int)count, ~0U, 0) != 0) {
        // Kernels before 5.9: close one by one up to the descriptor limit.
        long limit = sysconf(_SC_OPEN_MAX);
        for (long fd = count; fd < limit; fd++) close((int)fd);
    }
    if (chdir("/") != 0) return fail(context, errno);

    execve(request->path, request->argv, request->envp);
    return fail(context, errno);
}

int plugind_shim_spawn(const plugind_shim_spawn_request *request, pid_t *pid, int *pidfd) {
    if (request->descriptor_count < 0 ||
        request->descriptor_count > PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS) {
        return EINVAL;
    }
    spawn_context context;
    memset(&context, 0, sizeof context);
    context.request = request;
    format_id_map(context.uid_map, (unsigned long)request->uid);
    format_id_map(context.gid_map, (unsigned long)request->gid);

    void *stack = mmap(NULL, child_stack_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return errno;

    int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_PID_NAMESPACE) flags |= CLONE_NEWPID;
    if (request->flags & PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE) flags |= CLONE_NEWUSER;

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
