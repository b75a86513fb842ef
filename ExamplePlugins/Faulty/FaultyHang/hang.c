// Never returns from a request and never checks for cancellation.
#include <faulty_plugin.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    (void)response;
    for (;;) pause();
}

FAULTY_PLUGIN("Hang", handle)
