// Closes the protocol descriptors (3 and 4) and then answers as if nothing happened.
#include <faulty_plugin.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    close(3);
    close(4);
    return faulty_reply(response, "closed");
}

FAULTY_PLUGIN("Protocol close", handle)
