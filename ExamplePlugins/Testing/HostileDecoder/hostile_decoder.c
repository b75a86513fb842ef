// A function-only library that is hostile to its host on purpose, for the function-session tests
// (AppExtensionFunctionSession): a decoder that crashes on some inputs, as a parser of untrusted
// files would. The tests give the manifest (FunctionSessionTests.manifest):
//
//   int32  decode(bytes input)                        FNV-1a of the input, its top bit cleared
//   handle decoder open_decoder(string path)          a decoder seeded by the number in the file
//                                                     at `path`; NULL when it cannot be read
//   int32  decode_with(handle decoder, bytes input)   decode() seeded by the decoder
//   int32  close_decoder(handle decoder)              releases a decoder
//   int32  spin(void)                                 never returns: for the CPU limit
//
// An input that starts with "CRASH" writes through NULL (SIGSEGV); one that starts with "ABORT"
// calls abort() (SIGABRT).
#include <plugind_plugin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct decoder {
    uint32_t seed;
} decoder;

static int starts_with(const uint8_t *bytes, size_t length, const char *prefix) {
    size_t count = strlen(prefix);
    return length >= count && memcmp(bytes, prefix, count) == 0;
}

static int32_t checksum(uint32_t seed, const uint8_t *bytes, size_t length) {
    if (starts_with(bytes, length, "CRASH")) {
        volatile int32_t *nowhere = NULL;
        *nowhere = (int32_t)length;
    }
    if (starts_with(bytes, length, "ABORT")) abort();
    uint32_t hash = 2166136261u ^ seed;
    for (size_t index = 0; index < length; index++) {
        hash ^= bytes[index];
        hash *= 16777619u;
    }
    return (int32_t)(hash & 0x7fffffffu);
}

PLUGIND_PLUGIN_EXPORT int32_t decode(const uint8_t *bytes, size_t length) { return checksum(0, bytes, length); }

PLUGIND_PLUGIN_EXPORT decoder *open_decoder(const char *path) {
    FILE *file = fopen(path, "r");
    if (file == NULL) return NULL;
    unsigned long seed = 0;
    int read = fscanf(file, "%lu", &seed);
    fclose(file);
    if (read != 1) return NULL;
    decoder *made = malloc(sizeof *made);
    if (made == NULL) return NULL;
    made->seed = (uint32_t)seed;
    return made;
}

PLUGIND_PLUGIN_EXPORT int32_t decode_with(const decoder *decoder, const uint8_t *bytes, size_t length) {
    return checksum(decoder->seed, bytes, length);
}

PLUGIND_PLUGIN_EXPORT int32_t close_decoder(decoder *decoder) {
    free(decoder);
    return 0;
}

PLUGIND_PLUGIN_EXPORT int32_t spin(void) {
    volatile uint64_t turns = 0;
    for (;;) turns++;
}
