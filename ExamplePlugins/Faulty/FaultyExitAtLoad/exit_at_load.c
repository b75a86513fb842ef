// Calls exit(3) in a constructor, i.e. inside dlopen().
#include <faulty_plugin.h>

__attribute__((constructor)) static void exit_while_loading(void) {
    fprintf(stderr, "constructor: exit(3)\n");
    exit(3);
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    return faulty_reply(response, "unreachable");
}

FAULTY_PLUGIN("Exit at load", handle)
