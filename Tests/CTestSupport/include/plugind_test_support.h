/*
 * plugind_test_support.h — system calls the tests make that Swift cannot call directly.
 */
#ifndef PLUGIND_TEST_SUPPORT_H
#define PLUGIND_TEST_SUPPORT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Adds a "user" key with `description` and `payload` to the caller's session keyring (and links
/// it into the user keyring). Returns the key's serial number, or -1 with errno set.
int32_t plugind_test_add_key(const char *_Nonnull description, const char *_Nonnull payload);

/// Whether `path` has the extended attribute `name`.
int plugind_test_has_xattr(const char *_Nonnull path, const char *_Nonnull name);

/// Swaps two directory entries atomically (renameat2 with RENAME_EXCHANGE). 0, or -1 with errno.
int plugind_test_exchange(const char *_Nonnull first, const char *_Nonnull second);

/// Sets the soft process limit (RLIMIT_NPROC) of process `pid` to `soft`, or to its hard limit
/// when `soft` is negative (prlimit). 0, or -1 with errno.
int plugind_test_limit_processes(int32_t pid, int64_t soft);

/// Confines thread `tid` to processor `processor` (sched_setaffinity). 0, or -1 with errno.
int plugind_test_confine_thread(int32_t tid, int32_t processor);

/// The first processor the calling thread may run on, or -1.
int32_t plugind_test_first_allowed_processor(void);

/// How many processors thread or process `pid` may run on (sched_getaffinity), or -1 with errno.
int32_t plugind_test_allowed_processors(int32_t pid);

/// Unlinks and revokes a key added by `plugind_test_add_key`.
void plugind_test_remove_key(int32_t key);

#ifdef __cplusplus
}
#endif

#endif
