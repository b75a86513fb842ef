// Spins on the CPU forever, ignoring cancellation.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    (void)response;
    volatile unsigned long counter = 0;
    for (;;) counter++;
}

FAULTY_PLUGIN("Busy loop", handle)
