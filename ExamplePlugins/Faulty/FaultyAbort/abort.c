// Calls abort() while handling a request.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    (void)response;
    fprintf(stderr, "giving up: abort()\n");
    abort();
}

FAULTY_PLUGIN("Abort", handle)
