/*
 * plugind_callbacks.h — C function pointers a plugin library can call back into the worker
 * (qsort's comparator, sqlite3_exec's row callback) without generated code.
 *
 * Why a pool of compiled stubs: libffi closures need memory that is writable and executable, or
 * a memfd or temporary file mapped twice; the worker's seccomp filter refuses all three, and
 * Debian builds libffi without static trampolines (--disable-exec-static-tramp). So
 * callback_stubs.S compiles a fixed number of stubs into the worker's read-only text. Each stub
 * captures every register an argument can arrive in and hands them, with its slot number, to one
 * dispatcher, which decodes them by the callback's declared signature (the worker forwards the
 * call to the host). The slot is the callback's identity: the pool size bounds how many callbacks
 * can be handed out at once.
 */
#ifndef PLUGIND_CALLBACKS_H
#define PLUGIND_CALLBACKS_H

#include <stdint.h>

/* Nullability for Swift's importer; other compilers (gcc builds of the standalone tests) ignore it. */
#if !defined(__clang__) && !defined(_Nonnull)
#define _Nonnull
#define _Nullable
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// The number of stubs compiled in, the same on every architecture so that slot numbers mean the
/// same everywhere; `plugind_callback_slot_count` says how many actually exist here.
enum { PLUGIND_CALLBACK_SLOTS = 64 };

/// What a stub returns to its caller: in rax and xmm0 on x86-64, x0 and d0 on AArch64; every
/// scalar return type fits one of them. An integer or
/// pointer result goes in `integer` (the caller reads only its width); a double in `floating`; a
/// float is the low 32 bits of `floating` (store its bits there, do not convert). Not covered:
/// long double and _Complex long double (x87), __int128 (rax:rdx), structs returned by value.
typedef struct {
    uint64_t integer;
    double floating;
} plugind_callback_return;

/// Called by every stub, on the thread that called the stub. integers: rdi, rsi, rdx, rcx, r8, r9
/// on x86-64 (six entries), x0..x7 on AArch64 (eight), as the callee saw them (an argument narrower
/// than 64 bits is in the low bits and the high bits are unspecified by the ABI, so read only its
/// width). floats: the low 64 bits of xmm0..xmm7 or v0..v7 (eight entries; a float argument is the
/// low 32 bits). Integer-class and SSE-class
/// arguments are assigned registers independently, so the n-th integer/pointer argument is
/// integers[n] and the n-th float/double argument is floats[n] whatever their interleaving. Both
/// arrays live on the stub's stack frame: valid only until the dispatcher returns.
typedef plugind_callback_return (*plugind_callback_dispatcher)(uint32_t slot, const uint64_t *_Nonnull integers,
                                                               const uint64_t *_Nonnull floats);

/// Installs the one dispatcher every stub calls; call it before handing out any stub. NULL (the
/// initial state) makes every stub return 0 and 0.0, so a stub called too early or after teardown
/// does not jump to address 0. Stored with release semantics and loaded with acquire semantics by
/// the stubs, so a thread the library started sees the dispatcher and everything written before
/// it was installed.
void plugind_callbacks_set_dispatcher(plugind_callback_dispatcher _Nullable dispatcher);

/// The address of stub `slot`: pass it as a C function of any signature with at most 6
/// integer/pointer (8 on AArch64) and 8 floating (float/double) arguments, none on the stack, no
/// struct by value, not variadic — the stub reads only registers, so anything passed on the stack
/// or in al is lost.
/// NULL when slot >= plugind_callback_slot_count().
void *_Nullable plugind_callback_stub(uint32_t slot);

/// PLUGIND_CALLBACK_SLOTS on x86-64 and AArch64, 0 on other architectures: the stubs are
/// assembly; elsewhere callbacks are refused rather than called with the wrong registers.
uint32_t plugind_callback_slot_count(void);

#ifdef __cplusplus
}
#endif

#endif
