// The Extism side of the peer benchmark: a plugin module (wasm32, no libc, no WASI) whose
// `echo` export answers a call with the call's own input, copied through the plugin's memory as
// a plugin written with Extism's C PDK would (read the input, allocate an output block, write it
// back), so that it does the work plugind's Echo does. It calls the kernel functions every
// Extism runtime provides to plugins, from the import module "extism:host/env".
// Built by Scripts/bench.sh with the toolchain's clang:
//   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export=echo -o echo.wasm extism_echo.wasm.c
#include <stdint.h>

#define EXTISM_KERNEL(function) __attribute__((import_module("extism:host/env"), import_name(function)))

EXTISM_KERNEL("input_length") uint64_t input_length(void);
EXTISM_KERNEL("input_load_u64") uint64_t input_load_u64(uint64_t offset);
EXTISM_KERNEL("input_load_u8") uint32_t input_load_u8(uint64_t offset);
EXTISM_KERNEL("alloc") uint64_t kernel_alloc(uint64_t length);
EXTISM_KERNEL("store_u64") void store_u64(uint64_t address, uint64_t value);
EXTISM_KERNEL("store_u8") void store_u8(uint64_t address, uint32_t value);
EXTISM_KERNEL("output_set") void output_set(uint64_t address, uint64_t length);

// The largest input the benchmark sends fits; anything larger is refused (status 1).
enum { capacity = 64 << 10 };
static uint64_t words[capacity / 8];

__attribute__((export_name("echo"))) int32_t echo(void) {
    uint64_t length = input_length();
    if (length > capacity) return 1;
    uint64_t whole = length / 8;
    for (uint64_t i = 0; i < whole; i++) words[i] = input_load_u64(i * 8);
    uint8_t *bytes = (uint8_t *)words;
    for (uint64_t i = whole * 8; i < length; i++) bytes[i] = (uint8_t)input_load_u8(i);
    uint64_t output = kernel_alloc(length);
    for (uint64_t i = 0; i < whole; i++) store_u64(output + i * 8, words[i]);
    for (uint64_t i = whole * 8; i < length; i++) store_u8(output + i, bytes[i]);
    output_set(output, length);
    return 0;
}
