// A function-only plugin: no entry point, just plain C functions that its manifest declares.
// The host calls them through libffi in the worker. One identity function per supported type
// (for exact round trips of boundary values) and a few that compute something.
#include <plugind_plugin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IDENTITY(type, name) \
    PLUGIND_PLUGIN_EXPORT type name(type value) { return value; }

IDENTITY(bool, identity_bool)
IDENTITY(int8_t, identity_int8)
IDENTITY(uint8_t, identity_uint8)
IDENTITY(int16_t, identity_int16)
IDENTITY(uint16_t, identity_uint16)
IDENTITY(int32_t, identity_int32)
IDENTITY(uint32_t, identity_uint32)
IDENTITY(int64_t, identity_int64)
IDENTITY(uint64_t, identity_uint64)
IDENTITY(float, identity_float)
IDENTITY(double, identity_double)
IDENTITY(const char *, identity_string)

static _Thread_local int call_count;

PLUGIND_PLUGIN_EXPORT void count_call(void) { call_count++; }
PLUGIND_PLUGIN_EXPORT int32_t call_count_value(void) { return call_count; }

PLUGIND_PLUGIN_EXPORT int64_t add_int64(int64_t left, int64_t right) { return left + right; }

PLUGIND_PLUGIN_EXPORT double hypotenuse(double a, double b) {
    // Newton's method keeps the library free of libm, so it has no dependency to resolve.
    double square = a * a + b * b;
    if (square == 0) return 0;
    double root = square;
    for (int step = 0; step < 64; step++) root = 0.5 * (root + square / root);
    return root;
}

PLUGIND_PLUGIN_EXPORT uint64_t string_length(const char *text) { return strlen(text); }

PLUGIND_PLUGIN_EXPORT const char *reverse_string(const char *text) {
    // Returned strings are copied out by the worker before the next call.
    static _Thread_local char reversed[4096];
    size_t length = strlen(text);
    if (length >= sizeof reversed) length = sizeof reversed - 1;
    for (size_t index = 0; index < length; index++) reversed[index] = text[length - 1 - index];
    reversed[length] = '\0';
    return reversed;
}

PLUGIND_PLUGIN_EXPORT uint64_t bytes_length(const uint8_t *bytes, size_t length) {
    (void)bytes;
    return length;
}

/// Adler-32 of the bytes.
PLUGIND_PLUGIN_EXPORT uint32_t checksum(const uint8_t *bytes, size_t length) {
    uint32_t a = 1, b = 0;
    for (size_t index = 0; index < length; index++) {
        a = (a + bytes[index]) % 65521;
        b = (b + a) % 65521;
    }
    return (b << 16) | a;
}

PLUGIND_PLUGIN_EXPORT const char *null_string(void) { return NULL; }

PLUGIND_PLUGIN_EXPORT int32_t crash(int32_t value) {
    volatile int32_t *nowhere = NULL;
    *nowhere = value;
    return value;
}
