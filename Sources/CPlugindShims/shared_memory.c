// Shared memory for large messages between host and worker: a sealed memfd mapped by both.
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

int plugind_shim_shared_memory_create(size_t size, int *fd) {
    int created = memfd_create("plugind-messages", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (created < 0) return errno;
    if (ftruncate(created, (off_t)size) != 0 ||
        fcntl(created, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int error = errno;
        close(created);
        return error;
    }
    *fd = created;
    return 0;
}

int plugind_shim_shared_memory_map(int fd, void **address, size_t *size) {
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return errno;
    if ((seals & F_SEAL_SHRINK) == 0) return EPERM;
    struct stat status;
    if (fstat(fd, &status) != 0) return errno;
    if (status.st_size <= 0) return EINVAL;
    void *mapped = mmap(NULL, (size_t)status.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) return errno;
    *address = mapped;
    *size = (size_t)status.st_size;
    return 0;
}

void plugind_shim_shared_memory_unmap(void *address, size_t size) {
    munmap(address, size);
}

int plugind_shim_shared_word_wait(void *address, uint32_t expected, uint32_t timeoutMicroseconds) {
    struct timespec timeout = {
        .tv_sec = timeoutMicroseconds / 1000000,
        .tv_nsec = (long)(timeoutMicroseconds % 1000000) * 1000,
    };
    // FUTEX_WAIT without FUTEX_PRIVATE_FLAG: the word lies in a mapping another process shares.
    long result = syscall(SYS_futex, address, FUTEX_WAIT, expected, &timeout, NULL, 0);
    return result == 0 ? 0 : errno;
}

void plugind_shim_shared_word_wake(void *address) {
    syscall(SYS_futex, address, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int plugind_shim_fork_record_map(int fd, size_t size, void **address) {
    struct stat status;
    if (fstat(fd, &status) != 0) return errno;
    if (status.st_size < (off_t)size) return EINVAL;
    void *mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) return errno;
    if (madvise(mapped, size, MADV_DONTFORK) != 0) {
        int error = errno;
        munmap(mapped, size);
        return error;
    }
    close(fd);
    *address = mapped;
    return 0;
}

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

int plugind_shim_sealed_file_create(const char *name, int *fd) {
    // Executable: plugin libraries are mapped from it. Kernels before 6.3 do not know MFD_EXEC
    // (and make every memfd executable).
    int created = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
    if (created < 0 && errno == EINVAL) created = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (created < 0) return errno;
    *fd = created;
    return 0;
}

int plugind_shim_sealed_file_seal(int fd) {
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return errno;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return errno;
    int needed = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if ((seals & needed) != needed) return EPERM;
    // Nobody may write it, so only its owner may set user.* attributes on it or change its mode:
    // a worker of a root host (another uid) can do neither to a copy other launches share.
    return fchmod(fd, 0555) == 0 ? 0 : errno;
}

int plugind_shim_sealed_file_make_private(int fd) {
    struct stat status;
    if (fstat(fd, &status) != 0) return errno;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) return errno;
    int copy = -1;
    int result = plugind_shim_sealed_file_create("plugind:private", &copy);
    if (result != 0) return result;
    off_t offset = 0;
    while (result == 0 && offset < status.st_size) {
        ssize_t sent = sendfile(copy, fd, &offset, (size_t)(status.st_size - offset));
        if (sent < 0 && errno != EINTR) result = errno;
        if (sent == 0) result = EIO;
    }
    if (result == 0) result = plugind_shim_sealed_file_seal(copy);
    if (result == 0 && dup3(copy, fd, (flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) result = errno;
    close(copy);
    return result;
}

int plugind_shim_sealed_file_restrict_to_execution(int fd) {
    return fchmod(fd, 0111) == 0 ? 0 : errno;
}
