// Answers with a well-formed frame whose shared-memory location points far outside the region,
// ahead of the worker's own answer: written into the worker → host ring the way the worker writes
// (the plugin finds the shared memory in its own address space), or, when the host agreed to no
// ring, straight to the protocol descriptor (4). With the ring it then never returns, so that the
// worker's own answer does not overwrite the lie before the host reads it.
#include <faulty_plugin.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_le(uint8_t *destination, uint64_t value, int bytes) {
    for (int index = 0; index < bytes; index++) destination[index] = (uint8_t)(value >> (8 * index));
}

// Where the worker mapped the memory the host shares with it, from /proc/self/maps; NULL when it
// did not (no shared memory, or no rings: the mapping is then smaller than the rings' end).
static uint8_t *shared_memory(void) {
    FILE *maps = fopen("/proc/self/maps", "re");
    if (maps == NULL) return NULL;
    char line[512];
    uint8_t *found = NULL;
    while (found == NULL && fgets(line, sizeof line, maps) != NULL) {
        if (strstr(line, "plugind-messages") == NULL) continue;
        unsigned long start = 0, end = 0;
        if (sscanf(line, "%lx-%lx", &start, &end) == 2 && end - start > 4096 + 2 * 16384) found = (uint8_t *)start;
    }
    fclose(maps);
    return found;
}

// The worker → host ring of `SharedMemoryLayout`: its positions at 512 and 576, its 16 KiB at
// 4096 + 16 KiB.
static int append_to_ring(uint8_t *memory, const uint8_t *frame, size_t length) {
    _Atomic uint64_t *head = (_Atomic uint64_t *)(memory + 512);
    _Atomic uint64_t *tail = (_Atomic uint64_t *)(memory + 576);
    uint8_t *bytes = memory + 4096 + 16384;
    uint64_t position = atomic_load(head);
    if (position - atomic_load(tail) + length > 16384) return -1;
    for (size_t index = 0; index < length; index++) bytes[(position + index) & 16383] = frame[index];
    atomic_store(head, position + length);
    uint8_t wake[24] = {'P', 'L', 'G', 'D', 2, 0x93};
    return write(4, wake, sizeof wake) == (ssize_t)sizeof wake ? 0 : -1;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    uint8_t frame[24 + 16] = {'P', 'L', 'G', 'D', 2, 0x83};
    put_le(frame + 6, 1, 2);                      // flags: shared memory
    put_le(frame + 8, request->identifier, 8);    // request identifier
    put_le(frame + 16, 16, 4);                    // payload: one location
    put_le(frame + 24, 0xFFFFFFFF00000000u, 8);   // offset, far outside the region
    put_le(frame + 32, 1 << 20, 8);               // length
    uint8_t *memory = shared_memory();
    if (memory != NULL && append_to_ring(memory, frame, sizeof frame) == 0) {
        for (;;) pause();
    }
    ssize_t ignored = write(4, frame, sizeof frame);
    (void)ignored;
    return faulty_reply(response, "lied about shared memory");
}

FAULTY_PLUGIN("Shared memory lie", handle)
