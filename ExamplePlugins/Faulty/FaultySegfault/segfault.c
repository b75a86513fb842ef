// Dereferences NULL while handling a request.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)response;
    fprintf(stderr, "about to dereference NULL for request %llu\n", (unsigned long long)request->identifier);
    volatile int *nowhere = NULL;
    *nowhere = 42;
    return PLUGIND_PLUGIN_OK;
}

FAULTY_PLUGIN("Segfault", handle)
