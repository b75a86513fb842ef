/*
 * callback_stubs.h — private to CPlugindCallbacks: shared by callback_stubs.S (which generates the
 * stubs) and callbacks.c (which checks the public PLUGIND_CALLBACK_SLOTS against it), so the
 * assembly and the header cannot disagree on the pool size. Must stay assembler-safe: macros only.
 */
#ifndef PLUGIND_CALLBACK_STUBS_H
#define PLUGIND_CALLBACK_STUBS_H

#define PLUGIND_CALLBACK_STUB_COUNT 64

/* The slot numbers callback_stubs.S iterates over with .irp; the assembler checks that the list
 * has PLUGIND_CALLBACK_STUB_COUNT entries. */
#define PLUGIND_CALLBACK_STUB_SLOTS                                                                \
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,  \
    26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,    \
    49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63

#endif
