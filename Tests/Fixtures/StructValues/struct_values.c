/* Structs passed and returned by value, one for each way x86-64 passes them: in general
 * registers, in vector registers, split between both, and in memory. The suite declares each
 * layout in a manifest and checks every answer against arithmetic of its own. */
#include <stdint.h>

struct mixed { double x; int32_t n; };          /* 16 bytes: a vector and a general register */
struct floats3 { float a, b, c; };              /* 12 bytes: two vector registers */
struct wide { int64_t a, b, c; double d; };     /* 32 bytes: passed and returned in memory */
struct small { uint8_t tag; int16_t value; };   /* 4 bytes with a padding byte */
struct named { const char *label; int32_t n; }; /* a string field the library sets */

struct mixed mixed_scale(struct mixed m, int32_t k) {
    struct mixed r = { m.x * k, m.n * k };
    return r;
}

/* Five structs of 16 bytes: the last ones no longer fit in registers and go on the stack. */
double mixed_sum5(struct mixed a, struct mixed b, struct mixed c, struct mixed d, struct mixed e) {
    return a.x + b.x + c.x + d.x + e.x + a.n + b.n + c.n + d.n + e.n;
}

struct floats3 floats3_scale(struct floats3 v, float k) {
    struct floats3 r = { v.a * k, v.b * k, v.c * k };
    return r;
}

struct wide wide_add(struct wide left, struct wide right) {
    struct wide r = { left.a + right.a, left.b + right.b, left.c + right.c, left.d + right.d };
    return r;
}

int32_t small_total(int32_t before, struct small s, int32_t after) {
    return before * 1000000 + s.tag * 1000 + s.value + after * 7;
}

struct named parity(int32_t n) {
    struct named r = { (n % 2 == 0) ? "even" : "odd", n };
    return r;
}

/* Hostile: a returned struct whose string points nowhere the worker may read. */
struct named garbage_label(void) {
    struct named r = { (const char *)(uintptr_t)0x10, 0 };
    return r;
}
