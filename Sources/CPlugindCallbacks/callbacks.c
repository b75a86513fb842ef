/*
 * callbacks.c — the C half of the callback stub pool: the dispatcher the stubs call and the stub
 * addresses. The stubs themselves are x86-64 and AArch64 assembly (callback_stubs.S); on other
 * architectures this file reports no slots, so callbacks are refused instead of called with the
 * wrong registers.
 */
#include "plugind_callbacks.h"

#include "callback_stubs.h"

#include <stddef.h>

_Static_assert(PLUGIND_CALLBACK_SLOTS == PLUGIND_CALLBACK_STUB_COUNT,
               "plugind_callbacks.h and callback_stubs.h disagree on the pool size");

#if defined(__x86_64__) || defined(__aarch64__)

/* Read by callback_stubs.S with a PC-relative load (hidden: no GOT, no interposition). Written
 * with a release store; the stubs load it with acquire semantics (a plain aligned mov on x86-64,
 * whose ordering is TSO; ldar on AArch64), so a stub called on a thread the library created sees
 * the dispatcher and everything written before it was installed, and replacing it while stubs run
 * is not a data race (each call sees the old or the new one, never a torn pointer). */
__attribute__((visibility("hidden"))) plugind_callback_dispatcher plugind_callback_current_dispatcher;

/* Each slot's stub address as an offset from the table itself (callback_stubs.S). */
extern const int32_t plugind_callback_stub_offsets[PLUGIND_CALLBACK_STUB_COUNT]
    __attribute__((visibility("hidden")));

void plugind_callbacks_set_dispatcher(plugind_callback_dispatcher dispatcher) {
    __atomic_store_n(&plugind_callback_current_dispatcher, dispatcher, __ATOMIC_RELEASE);
}

void *plugind_callback_stub(uint32_t slot) {
    if (slot >= PLUGIND_CALLBACK_STUB_COUNT) return NULL;
    /* Integer arithmetic: the result is a code address in .text, not a pointer into the table. */
    uintptr_t table = (uintptr_t)plugind_callback_stub_offsets;
    return (void *)(table + (uintptr_t)(intptr_t)plugind_callback_stub_offsets[slot]);
}

uint32_t plugind_callback_slot_count(void) { return PLUGIND_CALLBACK_STUB_COUNT; }

#else

void plugind_callbacks_set_dispatcher(plugind_callback_dispatcher dispatcher) { (void)dispatcher; }

void *plugind_callback_stub(uint32_t slot) {
    (void)slot;
    return NULL;
}

uint32_t plugind_callback_slot_count(void) { return 0; }

#endif
