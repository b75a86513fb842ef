// Spins on the CPU forever, ignoring cancellation. With the request "block-sigxcpu" it first
// ignores SIGXCPU for the whole process (blocking it would cover only its own thread; the worker's
// other threads would still take it), so that only the hard CPU limit's SIGKILL can stop it.
#include <faulty_plugin.h>

#include <signal.h>
#include <string.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)response;
    static const char block_request[] = "block-sigxcpu";
    if (request->length == sizeof block_request - 1 && memcmp(request->bytes, block_request, request->length) == 0) {
        struct sigaction ignore;
        memset(&ignore, 0, sizeof ignore);
        ignore.sa_handler = SIG_IGN;
        sigaction(SIGXCPU, &ignore, NULL);
    }
    volatile unsigned long counter = 0;
    for (;;) counter++;
}

FAULTY_PLUGIN("Busy loop", handle)
