// What a host records of its workers for the owner: entries sent to the system journal, and the
// statistics page of each running worker that `plugind top` reads.
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int plugind_shim_journal_socket(void) {
    // Non-blocking: a journal that does not keep up loses entries (counted by the caller), it
    // never holds up the thread that writes them.
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return fd < 0 ? -errno : fd;
}

int plugind_shim_journal_send(int fd, const char *path, const void *bytes, size_t length) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t path_length = strlen(path);
    if (path_length >= sizeof address.sun_path) return ENAMETOOLONG;
    memcpy(address.sun_path, path, path_length);
    socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_length + 1);
    ssize_t sent = sendto(fd, bytes, length, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&address, size);
    if (sent < 0) return errno;
    return sent == (ssize_t)length ? 0 : EMSGSIZE;
}

int plugind_shim_statistics_page_create(int directory, const char *name, const void *header, size_t length, size_t size,
                                        void **address) {
    if (length > size) return EINVAL;
    int fd = openat(directory, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    // The header is complete in the file before anyone maps it: a reader sees all of it or
    // nothing (an empty file it skips).
    if (ftruncate(fd, (off_t)size) != 0 || pwrite(fd, header, length, 0) != (ssize_t)length) {
        int error = errno ? errno : EIO;
        close(fd);
        unlinkat(directory, name, 0);
        return error;
    }
    void *mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int error = errno;
    close(fd);
    if (mapped == MAP_FAILED) {
        unlinkat(directory, name, 0);
        return error;
    }
    *address = mapped;
    return 0;
}
