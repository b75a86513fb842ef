// Answers with more bytes than its message limit allows: the request is the size in bytes
// (decimal; default 64 MiB). It ignores every error from append.
#include <faulty_plugin.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[32];
    faulty_request_text(request, text, sizeof text);
    size_t size = text[0] ? (size_t)atoll(text) : (64u << 20);
    static uint8_t chunk[65536];
    memset(chunk, 'y', sizeof chunk);
    for (size_t written = 0; written < size; written += sizeof chunk) {
        size_t length = size - written < sizeof chunk ? size - written : sizeof chunk;
        faulty_host->append(response, chunk, length);
    }
    return PLUGIND_PLUGIN_OK;
}

FAULTY_PLUGIN("Oversized response", handle)
