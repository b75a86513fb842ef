// A text filter in C: answers each request with the same bytes, ASCII letters upper-cased.
// The Swift plugin SwiftTextFilter does exactly the same through PluginKit.
#include <plugind_plugin.h>

static const plugind_host *host;

static int32_t text_filter_init(const plugind_host *host_interface, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    host = host_interface;
    return PLUGIND_PLUGIN_OK;
}

static int32_t text_filter_handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    // Write straight into the response buffer: one pass, no temporary copy.
    uint8_t *output = host->reserve(response, request->length);
    if (output == NULL && request->length > 0) {
        host->set_error(response, "out of memory for the response");
        return 1;
    }
    for (size_t index = 0; index < request->length; index++) {
        uint8_t byte = request->bytes[index];
        output[index] = (byte >= 'a' && byte <= 'z') ? (uint8_t)(byte - 'a' + 'A') : byte;
    }
    return PLUGIND_PLUGIN_OK;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "Upper-case text filter (C)",
    .version = "1.0.0",
    .init = text_filter_init,
    .handle = text_filter_handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
