/* Functions of a function-only test library that take callbacks, declared by the manifest the
 * callback tests write: honest ones that use each kind of argument register and a thread of
 * their own, and hostile ones that pass a garbage pointer or keep a callback past its call.
 * Compiled at test time. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* f(f(x)): two calls of the callback within one call. */
int64_t apply_twice(int64_t (*f)(int64_t), int64_t x) { return f(f(x)); }

/* Integer and floating arguments interleaved, a float among them, a double returned. */
double call_mixed(double (*f)(int32_t, double, float, int64_t), int32_t a, double b, float c, int64_t d) {
    return f(a, b, c, d);
}

/* A float returned through the callback. */
float halve_with(float (*f)(float), float x) { return f(x) / 2.0f; }

/* The callback with a buffer of `count` bytes this library owns. */
int32_t checksum_with(int32_t (*f)(const uint8_t *, size_t), size_t count) {
    static uint8_t bytes[256];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 7);
    return f(bytes, count <= sizeof bytes ? count : sizeof bytes);
}

/* Hostile: a pointer to nothing, said to hold 16 bytes. */
int32_t checksum_garbage(int32_t (*f)(const uint8_t *, size_t)) { return f((const uint8_t *)(uintptr_t)0x10, 16); }

/* Hostile: keeps the callback past its call, and calls it in a later one. */
static int32_t (*kept)(int32_t);
void keep(int32_t (*f)(int32_t)) { kept = f; }
int32_t call_kept(int32_t x) { return kept ? kept(x) : -1; }

/* The callback from a thread the library starts, joined before the call returns. */
struct thread_call { int32_t (*f)(int32_t); int32_t x; int32_t result; };
static void *thread_body(void *context) {
    struct thread_call *call = context;
    call->result = call->f(call->x);
    return NULL;
}
int32_t call_from_thread(int32_t (*f)(int32_t), int32_t x) {
    struct thread_call call = {f, x, 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, thread_body, &call) != 0) return -1;
    pthread_join(thread, NULL);
    return call.result;
}
