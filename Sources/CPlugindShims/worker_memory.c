// A worker's own memory once it serves: what setting up touched and no longer needs goes back to
// the kernel, so that a live worker counts only the pages it uses.
#include "plugind_shims.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void plugind_shim_release_free_memory(void) { (void)malloc_trim(0); }

void plugind_shim_share_allocator_arenas(void) { (void)mallopt(M_ARENA_MAX, 1); }

int plugind_shim_release_unused_stack(unsigned room) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    // Below this frame's page, `room` pages more for the calls that follow (1 to 64: far below
    // the frame, the first thread's walk could pass its stack's guard gap).
    uintptr_t kept = room < 1 ? 1 : room > 64 ? 64 : room;
    uintptr_t top = ((uintptr_t)__builtin_frame_address(0) & ~(page - 1)) - kept * page;
    if (syscall(SYS_gettid) != getpid()) {
        // A thread's stack is a mapping of fixed size (its guard page below, other mappings
        // below that): released down to its lowest address, as the thread's attributes say.
        pthread_attr_t attributes;
        if (pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
        void *low = NULL;
        size_t size = 0;
        int found = pthread_attr_getstack(&attributes, &low, &size);
        pthread_attr_destroy(&attributes);
        uintptr_t bottom = ((uintptr_t)low + page - 1) & ~(page - 1);
        if (found != 0 || top <= bottom || madvise((void *)bottom, top - bottom, MADV_DONTNEED) != 0) return 0;
        return (int)((top - bottom) / page);
    }
    // The first thread's stack is one mapping that grows down, with the kernel's guard gap
    // below it: down page by page from the one below `top`, the first page that is not mapped
    // is its bottom.
    uintptr_t address = top - page;
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
