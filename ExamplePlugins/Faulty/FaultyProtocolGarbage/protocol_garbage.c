// Writes garbage into the protocol descriptors (3: from the host, 4: to the host), then waits:
// its answer would travel through the shared ring, a stream apart from the pipe, and could
// reach the host before the garbage does.
#include <faulty_plugin.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    static const char garbage[] = "this is not a plugind frame, not even close............";
    ssize_t ignored = write(4, garbage, sizeof garbage);
    ignored = write(3, garbage, sizeof garbage);
    (void)ignored;
    for (;;) pause();
    return faulty_reply(response, "garbage written");
}

FAULTY_PLUGIN("Protocol garbage", handle)
