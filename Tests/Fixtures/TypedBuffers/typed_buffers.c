/* Functions of a function-only test library (no plugind_plugin_entry), declared by the manifest
 * the typed-buffer tests write: honest ones that use each kind of buffer and pointer argument, and
 * hostile ones that report lengths beyond the capacity they were given. Compiled at test time. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* An inout buffer of int32 counted by `count` (the host passes the buffer, not the count). */
void reverse_int32(int32_t *values, size_t count) {
    for (size_t i = 0; i < count / 2; i++) {
        int32_t kept = values[i];
        values[i] = values[count - 1 - i];
        values[count - 1 - i] = kept;
    }
}

/* Two in buffers sharing one count. */
int64_t dot_int32(const int32_t *left, const int32_t *right, uint32_t count) {
    int64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) sum += (int64_t)left[i] * right[i];
    return sum;
}

/* An out buffer of int32 counted by *len: capacity in, number written out. -1 when `wanted` did
 * not fit. */
int32_t squares(int32_t *out, uint32_t *len, uint32_t wanted) {
    uint32_t count = wanted < *len ? wanted : *len;
    for (uint32_t i = 0; i < count; i++) out[i] = (int32_t)(i * i);
    *len = count;
    return count == wanted ? 0 : -1;
}

/* An out buffer of a constant 16 bytes. */
void fill16(uint8_t *out, uint8_t seed) {
    for (int i = 0; i < 16; i++) out[i] = (uint8_t)(seed + i);
}

/* An out buffer counted by an argument the host passes. */
void iota_bytes(uint8_t *out, uint64_t count) {
    for (uint64_t i = 0; i < count; i++) out[i] = (uint8_t)i;
}

/* An out buffer the library fills as fast as libc can: what a call costs beyond the library's
 * own work (the benchmark's 64 KiB out buffer against 64 KiB in). */
void fill_bytes(uint8_t *out, uint64_t count, uint8_t value) {
    memset(out, value, count);
}

/* An inout buffer counted by *len: NUL-terminated text in, "!" appended when there is room for it
 * and its NUL; *len is the length of the text on return. */
int32_t append_bang(char *text, uint64_t *len) {
    size_t length = strnlen(text, *len);
    if (length + 2 > *len) return -1;
    text[length] = '!';
    text[length + 1] = 0;
    *len = length + 1;
    return 0;
}

/* errno as the caller asks. */
int32_t fail_with(int32_t number) {
    errno = number;
    return -1;
}

/* Hostile: fills the capacity it was given, then claims 4096 bytes more. */
int32_t liar_length(uint8_t *dest, uint64_t *len) {
    memset(dest, 'A', *len);
    *len += 4096;
    return 0;
}

/* Hostile: a negative length. */
int32_t negative_length(uint8_t *dest, int32_t *len) {
    (void)dest;
    *len = -1;
    return 0;
}

/* A struct the host declares with an out buffer counted by a count the library decreases as it
 * writes (zlib's next_out/avail_out): this one claims more room left than it was given. */
struct sink {
    uint8_t *next_out;
    uint32_t avail_out;
    uint32_t written;
};

int32_t sink_overstate(struct sink *sink) {
    sink->written = 1;
    sink->avail_out += 100;
    sink->next_out = (uint8_t *)(uintptr_t)0x1000; /* never followed by the worker */
    return 0;
}

/* An honest one: writes `value` into every byte of the room given. */
int32_t sink_fill(struct sink *sink, uint8_t value) {
    while (sink->avail_out > 0) {
        *sink->next_out++ = value;
        sink->avail_out--;
        sink->written++;
    }
    return 0;
}
