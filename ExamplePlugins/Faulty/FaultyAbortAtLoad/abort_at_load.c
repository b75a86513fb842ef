// Aborts in a constructor, i.e. inside dlopen().
#include <faulty_plugin.h>

__attribute__((constructor)) static void abort_while_loading(void) {
    fprintf(stderr, "constructor: abort()\n");
    abort();
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    return faulty_reply(response, "unreachable");
}

FAULTY_PLUGIN("Abort at load", handle)
