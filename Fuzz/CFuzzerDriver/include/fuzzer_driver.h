/*
 * libFuzzer's entry for programs that have their own main (SwiftPM gives every executable one).
 * Only referenced when the fuzz targets are built with -DFUZZING and -sanitize=fuzzer.
 */
#ifndef PLUGIND_FUZZER_DRIVER_H
#define PLUGIND_FUZZER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *_Nonnull argc, char *_Nullable *_Nullable *_Nonnull argv,
                        int (*_Nonnull callback)(const uint8_t *_Nullable data, size_t size));

#endif
