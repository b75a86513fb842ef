// Writes N MiB (the request, decimal; default 100) to stdout and N MiB to stderr, interleaved with
// printf lines, then answers normally. Output must neither corrupt nor stall the protocol.
#include <faulty_plugin.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[32];
    faulty_request_text(request, text, sizeof text);
    long mebibytes = text[0] ? atol(text) : 100;
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (long index = 0; index < mebibytes * 16; index++) {
        printf("stdout line %ld\n", index);
        fwrite(chunk, 1, sizeof chunk, stdout);
        fprintf(stderr, "stderr line %ld\n", index);
        fwrite(chunk, 1, sizeof chunk, stderr);
    }
    fflush(stdout);
    char reply[64];
    snprintf(reply, sizeof reply, "flooded %ld MiB", mebibytes);
    return faulty_reply(response, reply);
}

FAULTY_PLUGIN("Flood", handle)
