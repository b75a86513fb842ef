// Never returns from a request and never checks for cancellation: it waits in a function of its
// own, which the timed-out request's report names.
#include <faulty_plugin.h>
#include <unistd.h>

__attribute__((noinline)) static void wait_forever_in_plugin(void) {
    for (;;) pause();
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    (void)response;
    wait_forever_in_plugin();
    return PLUGIND_PLUGIN_OK;
}

FAULTY_PLUGIN("Hang", handle)
