// Claims an ABI version this plugind does not speak, in its descriptor and in the note the
// header's ABI 999 would have recorded.
#define PLUGIND_PLUGIN_NO_ABI_NOTE
#include <faulty_plugin.h>

__attribute__((used, section(".note.plugind"), aligned(4))) static const plugind_plugin_abi_note abi_note = {
    8, 4, PLUGIND_PLUGIN_NOTE_TYPE_ABI, "plugind", 999};

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
