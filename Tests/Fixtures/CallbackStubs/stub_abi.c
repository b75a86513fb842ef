/*
 * stub_abi.c — the callback stub pool (Sources/CPlugindCallbacks) called as C code calls a
 * function pointer, with a dispatcher of its own, on whatever architecture it is compiled for:
 * CallbackStubABITests builds it for this machine and for AArch64 (run under qemu-user), so the
 * AArch64 stubs are checked here without an AArch64 machine.
 *
 * Each check calls a stub through a function type, and the dispatcher decodes the registers as
 * the declaration of that slot says; the expected values are computed by plain C in this file
 * (and qsort's result by libc's qsort with an ordinary comparator). Prints one line per failed
 * check and "ok N" at the end; exits 1 when anything failed.
 */
#include "plugind_callbacks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { APPLY, MIXED, HALVE, COMPARE, WIDE, NARROW, CALLS };

static unsigned failures;
static unsigned checks;

#define CHECK(condition, ...)                                                                      \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(condition)) {                                                                        \
            failures++;                                                                            \
            printf("FAILED %s:%d: ", __FILE__, __LINE__);                                          \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static double as_double(uint64_t bits) {
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static float as_float(uint64_t bits) {
    uint32_t low = (uint32_t)bits;
    float value;
    memcpy(&value, &low, sizeof value);
    return value;
}

static plugind_callback_return dispatch(uint32_t slot, const uint64_t *integers, const uint64_t *floats) {
    plugind_callback_return result = {0, 0.0};
    switch (slot) {
    case APPLY: /* int64_t (int64_t) */
        result.integer = (uint64_t)((int64_t)integers[0] * 3 + 1);
        break;
    case MIXED: /* double (int32_t, double, float, int64_t): classes assigned independently */
        result.floating = (int32_t)integers[0] + as_double(floats[0]) * 2 + as_float(floats[1]) * 4 + (double)(int64_t)integers[1] * 8;
        break;
    case HALVE: { /* float (float): the result's bits are the low 32 of `floating` */
        float half = as_float(floats[0]) / 2;
        uint32_t bits;
        memcpy(&bits, &half, sizeof bits);
        uint64_t wide = bits;
        memcpy(&result.floating, &wide, sizeof wide);
        break;
    }
    case COMPARE: { /* int (const void *, const void *): qsort's comparator over int64_t */
        int64_t a, b;
        memcpy(&a, (const void *)(uintptr_t)integers[0], sizeof a);
        memcpy(&b, (const void *)(uintptr_t)integers[1], sizeof b);
        result.integer = (uint64_t)(int64_t)((a > b) - (a < b));
        break;
    }
    case WIDE: { /* (6 × int64_t, 8 × double): both sums; the caller's type picks the register */
        int64_t integer = 0;
        double floating = 0;
        for (int index = 0; index < 6; index++) integer += (int64_t)integers[index] * (index + 1);
        for (int index = 0; index < 8; index++) floating += as_double(floats[index]) * (index + 1);
        result.integer = (uint64_t)integer;
        result.floating = floating;
        break;
    }
    case NARROW: /* int32_t (int8_t, uint16_t): only each argument's width is read */
        result.integer = (uint64_t)(int64_t)((int8_t)integers[0] * 100000 + (uint16_t)integers[1]);
        break;
    default:
        break;
    }
    return result;
}

static int compare_int64(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return (a > b) - (a < b);
}

static void *call_from_thread(void *argument) {
    int64_t (*apply)(int64_t) = (int64_t (*)(int64_t))plugind_callback_stub(APPLY);
    *(int64_t *)argument = apply(*(int64_t *)argument);
    return NULL;
}

int main(void) {
    CHECK(plugind_callback_slot_count() == PLUGIND_CALLBACK_SLOTS, "slot count %u", plugind_callback_slot_count());
    CHECK(plugind_callback_stub(PLUGIND_CALLBACK_SLOTS) == NULL, "a stub past the pool");
    for (uint32_t slot = 0; slot < PLUGIND_CALLBACK_SLOTS; slot++) {
        void *stub = plugind_callback_stub(slot);
        CHECK(stub != NULL, "stub %u is NULL", slot);
        if (slot > 0) CHECK(stub != plugind_callback_stub(slot - 1), "stubs %u and %u share an address", slot - 1, slot);
    }

    /* Before a dispatcher is installed a stub answers 0 and 0.0. */
    CHECK(((int64_t (*)(int64_t))plugind_callback_stub(APPLY))(7) == 0, "a stub without a dispatcher");
    CHECK(((double (*)(double))plugind_callback_stub(APPLY))(7.5) == 0.0, "a stub without a dispatcher, double");
    plugind_callbacks_set_dispatcher(dispatch);

    int64_t applied = ((int64_t (*)(int64_t))plugind_callback_stub(APPLY))(-5);
    CHECK(applied == -14, "apply(-5) = %lld", (long long)applied);
    double mixed = ((double (*)(int32_t, double, float, int64_t))plugind_callback_stub(MIXED))(3, 0.5, 0.25f, -2);
    CHECK(mixed == 3 + 1 + 1 - 16, "mixed = %g", mixed);
    float half = ((float (*)(float))plugind_callback_stub(HALVE))(3.0f);
    CHECK(half == 1.5f, "halve(3) = %g", (double)half);

    int64_t (*wide_integer)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double, double, double, double,
                            double, double, double) =
        (int64_t (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double, double, double, double, double,
                     double, double))plugind_callback_stub(WIDE);
    double (*wide_floating)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double, double, double, double,
                            double, double, double) =
        (double (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double, double, double, double, double,
                    double, double))plugind_callback_stub(WIDE);
    int64_t integer_sum = wide_integer(1, -2, 3, -4, 5, INT64_C(1) << 40, 1, 2, 3, 4, 5, 6, 7, 8.5);
    CHECK(integer_sum == 1 - 4 + 9 - 16 + 25 + (INT64_C(6) << 40), "wide integer sum %lld", (long long)integer_sum);
    double floating_sum = wide_floating(1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8.5);
    CHECK(floating_sum == 1 + 4 + 9 + 16 + 25 + 36 + 49 + 68, "wide floating sum %g", floating_sum);

    int32_t narrow = ((int32_t (*)(int8_t, uint16_t))plugind_callback_stub(NARROW))(-3, 65535);
    CHECK(narrow == -300000 + 65535, "narrow = %d", narrow);

    /* qsort through a stub, against qsort with an ordinary comparator. */
    enum { COUNT = 10000 };
    int64_t *values = malloc(COUNT * sizeof *values), *expected = malloc(COUNT * sizeof *expected);
    if (values == NULL || expected == NULL) return 2;
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (int index = 0; index < COUNT; index++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        values[index] = (int64_t)state;
    }
    values[0] = INT64_MIN, values[1] = INT64_MAX, values[2] = values[3];
    memcpy(expected, values, COUNT * sizeof *values);
    qsort(values, COUNT, sizeof *values, (int (*)(const void *, const void *))plugind_callback_stub(COMPARE));
    qsort(expected, COUNT, sizeof *expected, compare_int64);
    CHECK(memcmp(values, expected, COUNT * sizeof *values) == 0, "qsort through a stub disagrees with qsort");
    free(values);
    free(expected);

    /* A thread the caller did not start sees the dispatcher. */
    pthread_t thread;
    int64_t through_thread = 10;
    CHECK(pthread_create(&thread, NULL, call_from_thread, &through_thread) == 0, "pthread_create");
    pthread_join(thread, NULL);
    CHECK(through_thread == 31, "apply(10) on another thread = %lld", (long long)through_thread);

    printf("%s %u checks\n", failures == 0 ? "ok" : "failed", checks);
    return failures == 0 ? 0 : 1;
}
