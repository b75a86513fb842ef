// Allocates and touches 16 MiB blocks without checking malloc's result, like a careless plugin:
// past the address-space limit malloc returns NULL and the memset faults.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    (void)response;
    for (;;) {
        char *block = malloc(16u << 20);
        memset(block, 1, 16u << 20);
    }
}

FAULTY_PLUGIN("Memory hog", handle)
