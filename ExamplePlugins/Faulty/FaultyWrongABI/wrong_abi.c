// Claims an ABI version this plugind does not speak.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    return faulty_reply(response, "unreachable");
}

static const plugind_plugin descriptor = {
    .abi_version = 999,
    .size = sizeof(plugind_plugin),
    .name = "Wrong ABI",
    .version = "1.0.0",
    .init = faulty_init,
    .handle = handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
