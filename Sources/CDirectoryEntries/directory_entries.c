// getdents64(2): a directory listed once is read through its own descriptor, without the
// duplicate and the stream that fdopendir(3) takes.
#include "directory_entries.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

int plugind_read_directory_entries(int fd, void *buffer, size_t capacity, size_t *length) {
    long result;
    do {
        result = syscall(SYS_getdents64, fd, buffer, capacity);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return errno;
    *length = (size_t)result;
    return 0;
}
