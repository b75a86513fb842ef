// Crashes while handling a request, in functions of its own, so that the crash report's
// backtrace has names to show. The request picks how:
//   (empty)   dereferences NULL in dereference_null_for_request, called by handle;
//   "libc"    passes NULL to strlen: the fault is inside the C library;
//   "smash"   overwrites its own frame (return address and saved registers), then faults;
//   "recurse" recurses until the stack is gone.
#include <faulty_plugin.h>
#include <string.h>

__attribute__((noinline)) static void dereference_null_for_request(uint64_t identifier) {
    fprintf(stderr, "about to dereference NULL for request %llu\n", (unsigned long long)identifier);
    volatile int *nowhere = NULL;
    *nowhere = 42;
}

__attribute__((noinline)) static size_t measure_null_in_libc(const char *text) {
    return strlen(text);
}

__attribute__((noinline)) static void smash_own_frame(void) {
    volatile uintptr_t frame[2];
    // Past the array: the saved frame pointer, the return address and the caller's frame.
    for (int index = 0; index < 32; index++) ((volatile uintptr_t *)frame)[index] = 0x4141414141414141;
    volatile int *nowhere = NULL;
    *nowhere = 1;
}

__attribute__((noinline)) static int recurse_until_the_stack_is_gone(volatile int depth) {
    volatile char ballast[512];
    ballast[0] = (char)depth;
    return recurse_until_the_stack_is_gone(depth + 1) + ballast[0];
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)response;
    char how[16] = {0};
    memcpy(how, request->bytes, request->length < sizeof how - 1 ? request->length : sizeof how - 1);
    volatile const char *nothing = NULL;
    if (strcmp(how, "libc") == 0) return (int32_t)measure_null_in_libc((const char *)nothing);
    if (strcmp(how, "smash") == 0) smash_own_frame();
    if (strcmp(how, "recurse") == 0) return recurse_until_the_stack_is_gone(0);
    dereference_null_for_request(request->identifier);
    return PLUGIND_PLUGIN_OK;
}

FAULTY_PLUGIN("Segfault", handle)
