// Answers with a well-formed frame whose shared-memory location points far outside the region,
// written straight to the protocol descriptor (4) ahead of the worker's own answer.
#include <faulty_plugin.h>
#include <string.h>
#include <unistd.h>

static void put_le(uint8_t *destination, uint64_t value, int bytes) {
    for (int index = 0; index < bytes; index++) destination[index] = (uint8_t)(value >> (8 * index));
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    uint8_t frame[24 + 16] = {'P', 'L', 'G', 'D', 2, 0x83};
    put_le(frame + 6, 1, 2);                      // flags: shared memory
    put_le(frame + 8, request->identifier, 8);    // request identifier
    put_le(frame + 16, 16, 4);                    // payload: one location
    put_le(frame + 24, 0xFFFFFFFF00000000u, 8);   // offset, far outside the region
    put_le(frame + 32, 1 << 20, 8);               // length
    ssize_t ignored = write(4, frame, sizeof frame);
    (void)ignored;
    return faulty_reply(response, "lied about shared memory");
}

FAULTY_PLUGIN("Shared memory lie", handle)
