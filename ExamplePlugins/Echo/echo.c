// Echo: answers each request with its own bytes. Used to measure the cost of crossing the
// process boundary and to check that payloads arrive byte for byte.
#include <plugind_plugin.h>
#include <string.h>

static const plugind_host *host;

static int32_t echo_init(const plugind_host *host_interface, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    host = host_interface;
    return PLUGIND_PLUGIN_OK;
}

static int32_t echo_handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    int32_t result = host->append(response, request->bytes, request->length);
    if (result != 0) {
        host->set_error(response, "the echo does not fit in a response");
        return 1;
    }
    return PLUGIND_PLUGIN_OK;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "Echo",
    .version = "1.0.0",
    .init = echo_init,
    .handle = echo_handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
