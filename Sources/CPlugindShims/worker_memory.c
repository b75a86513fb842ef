// A worker's own memory once it serves: what setting up touched and no longer needs goes back to
// the kernel, so that a live worker counts only the pages it uses.
#include "plugind_shims.h"

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void plugind_shim_release_free_memory(void) { (void)malloc_trim(0); }

void plugind_shim_share_allocator_arenas(void) { (void)mallopt(M_ARENA_MAX, 1); }

int plugind_shim_release_unused_main_stack(void) {
    // Another thread's stack is a mapping of fixed size with a guard page and other mappings
    // right below it: walking down from it would reach memory that is not this thread's.
    if (syscall(SYS_gettid) != getpid()) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    // Two pages of room below this frame for the calls that follow (madvise's own frame, a
    // signal handler's), then down page by page: the first page that is not mapped is the
    // bottom of the stack's mapping.
    uintptr_t address = ((uintptr_t)__builtin_frame_address(0) & ~(page - 1)) - 3 * page;
    struct rlimit limit;
    uintptr_t most = 8u << 20;
    if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < most) most = limit.rlim_cur;
    int released = 0;
    for (uintptr_t walked = 0; walked < most; walked += page, address -= page) {
        if (madvise((void *)address, page, MADV_DONTNEED) != 0) break;
        released += 1;
    }
    return released;
}

int plugind_shim_main_stack_may_grow_to(size_t bytes) {
    if (syscall(SYS_gettid) != getpid()) return 0;
    struct rlimit limit;
    if (getrlimit(RLIMIT_STACK, &limit) != 0) return 0;
    return limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= bytes;
}
