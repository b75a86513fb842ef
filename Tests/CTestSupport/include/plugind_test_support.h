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

/// Unlinks and revokes a key added by `plugind_test_add_key`.
void plugind_test_remove_key(int32_t key);

#ifdef __cplusplus
}
#endif

#endif
