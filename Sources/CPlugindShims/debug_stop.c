// `plugind debug`: the worker made traceable by the owner's debugger, waiting until it attached,
// then stopped just before the plugin's init with the init's address in the signal's value.
#include "plugind_shims.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

int plugind_shim_debug_allow_tracer(void) {
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return errno;
    // Yama's restricted mode lets only an ancestor trace a process; the debugger is the owner's
    // command's child, not the worker's ancestor. Without Yama the call fails and is not needed.
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 && errno != EINVAL) return errno;
    return 0;
}

int plugind_shim_debug_hold_release(void) {
    sigset_t release;
    sigemptyset(&release);
    sigaddset(&release, PLUGIND_SHIM_DEBUG_RELEASE_SIGNAL);
    return pthread_sigmask(SIG_BLOCK, &release, NULL) == 0 ? 0 : EINVAL;
}

int plugind_shim_debug_wait_for_release(unsigned int seconds) {
    // The worker cannot see its tracer (TracerPid reads 0 for a tracer outside its pid
    // namespace): the owner's command, which can, sends the release once the debugger attached.
    // Taken with sigtimedwait, the signal is never delivered, so the debugger does not stop on it.
    sigset_t release;
    sigemptyset(&release);
    sigaddset(&release, PLUGIND_SHIM_DEBUG_RELEASE_SIGNAL);
    if (pthread_sigmask(SIG_BLOCK, &release, NULL) != 0) return EINVAL;
    struct timespec limit = {.tv_sec = seconds, .tv_nsec = 0};
    for (;;) {
        int taken = sigtimedwait(&release, NULL, &limit);
        if (taken == PLUGIND_SHIM_DEBUG_RELEASE_SIGNAL) return 0;
        if (taken < 0 && errno == EINTR) continue;
        return taken < 0 ? errno : EIO;
    }
}

int plugind_shim_debug_release(pid_t pid) {
    return kill(pid, PLUGIND_SHIM_DEBUG_RELEASE_SIGNAL) == 0 ? 0 : errno;
}

void plugind_shim_debug_stop_before_init(const void *init) {
    union sigval value = {.sival_ptr = (void *)init};
    // To this thread, the one about to call init, not to whichever thread the kernel picks.
    pthread_sigqueue(pthread_self(), SIGTRAP, value);
}
