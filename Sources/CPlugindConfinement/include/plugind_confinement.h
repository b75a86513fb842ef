/*
 * plugind_confinement.h — the layers a worker applies to itself before it loads plugin code:
 * process attributes (prctl), resource limits, a seccomp filter against network sockets and
 * io_uring, and a Landlock ruleset for the filesystem, signals and abstract unix sockets.
 * Each function does one layer; the worker verifies each one after applying it.
 *
 * Convention: functions return 0 or an errno value; results go out through out-parameters.
 */
#ifndef PLUGIND_CONFINEMENT_H
#define PLUGIND_CONFINEMENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Wraps prctl(PR_SET_NO_NEW_PRIVS, 1).
int plugind_confinement_set_no_new_privileges(void);
/// Wraps prctl(PR_GET_NO_NEW_PRIVS).
int plugind_confinement_get_no_new_privileges(int *_Nonnull enabled);

/// Wraps prctl(PR_SET_DUMPABLE, 0).
int plugind_confinement_set_not_dumpable(void);
/// Wraps prctl(PR_GET_DUMPABLE).
int plugind_confinement_get_dumpable(int *_Nonnull dumpable);

/// Resource limits a worker sets on itself.
typedef enum plugind_confinement_limit {
    PLUGIND_CONFINEMENT_LIMIT_CORE_FILE_SIZE = 0,
    PLUGIND_CONFINEMENT_LIMIT_ADDRESS_SPACE = 1,
    PLUGIND_CONFINEMENT_LIMIT_CPU_SECONDS = 2,
    PLUGIND_CONFINEMENT_LIMIT_OPEN_FILES = 3,
} plugind_confinement_limit;

/// Wraps setrlimit(2) for `limit`.
int plugind_confinement_set_limit(plugind_confinement_limit limit, uint64_t soft, uint64_t hard);
/// Wraps getrlimit(2) for `limit`.
int plugind_confinement_get_limit(plugind_confinement_limit limit, uint64_t *_Nonnull soft,
                                  uint64_t *_Nonnull hard);

/// Installs a seccomp filter (through libseccomp) that fails socket() and socketpair() for every
/// family but AF_UNIX with EACCES, fails io_uring_setup/enter/register with ENOSYS (io_uring
/// operations would bypass the socket check), and kills a process that makes system calls of a
/// foreign architecture. Requires no-new-privileges.
int plugind_confinement_deny_network_sockets(void);
/// Compiles the filter of `plugind_confinement_deny_network_sockets` once and keeps it, so that
/// processes forked afterwards install it without compiling it (the pre-forked launcher).
int plugind_confinement_prepare_network_filter(void);
/// Wraps prctl(PR_GET_SECCOMP): 0 none, 1 strict, 2 filter.
int plugind_confinement_get_seccomp_mode(int *_Nonnull mode);

/// The Landlock ABI version the kernel offers, or 0 when Landlock is unavailable.
int plugind_confinement_landlock_abi(int *_Nonnull abi);

/// Creates a Landlock ruleset that handles every filesystem right of `abi`; with `deny_network`
/// also TCP bind and connect (ABI 4+) and connecting to abstract unix sockets outside the domain
/// (ABI 6+); always signals to processes outside the domain (ABI 6+).
int plugind_confinement_landlock_create(int abi, int deny_network, int *_Nonnull ruleset);

/// Allows read (and execute) access beneath `path`, or, with `writable`, also creating, writing,
/// truncating and removing. A path that names a file gets the file rights only.
int plugind_confinement_landlock_allow(int ruleset, int abi, const char *_Nonnull path,
                                       int writable);

/// Enforces `ruleset` on the calling thread (which must be the only one) and closes it.
int plugind_confinement_landlock_enforce(int ruleset);

#ifdef __cplusplus
}
#endif

#endif /* PLUGIND_CONFINEMENT_H */
