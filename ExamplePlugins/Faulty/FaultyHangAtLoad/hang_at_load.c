// Never returns from a constructor, so dlopen() never returns.
#include <faulty_plugin.h>
#include <unistd.h>

__attribute__((constructor)) static void hang_while_loading(void) {
    for (;;) pause();
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    return faulty_reply(response, "unreachable");
}

FAULTY_PLUGIN("Hang at load", handle)
