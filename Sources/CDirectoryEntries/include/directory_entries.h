/*
 * directory_entries.h — getdents64(2) for the bundle reader, which Swift's view of glibc does not
 * offer (a GNU extension). A target of its own, so that the worker, which never lists a bundle,
 * does not link it.
 */
#ifndef PLUGIND_DIRECTORY_ENTRIES_H
#define PLUGIND_DIRECTORY_ENTRIES_H

#include <stddef.h>

/// Reads the next entries of the directory open as `fd` into `buffer` (each a `struct dirent64`);
/// `length` 0 at the end. Returns 0 or an errno.
int plugind_read_directory_entries(int fd, void *_Nonnull buffer, size_t capacity, size_t *_Nonnull length);

#endif
