/*
 * plugind_sndfile.h — the part of libsndfile's ABI that 'plugind audio apply' uses, declared here
 * from its documentation so that plugind neither builds against sndfile.h nor links libsndfile:
 * the command loads libsndfile.so.1 when it runs, and plugind's packages only suggest it.
 */
#ifndef PLUGIND_SNDFILE_H
#define PLUGIND_SNDFILE_H

#include <stdint.h>

/* SF_INFO, field for field. */
typedef struct plugind_sndfile_info {
    int64_t frames;
    int samplerate;
    int channels;
    int format;
    int sections;
    int seekable;
} plugind_sndfile_info;

#define PLUGIND_SNDFILE_READ 0x10
#define PLUGIND_SNDFILE_WRITE 0x20
#define PLUGIND_SNDFILE_FORMAT_WAV 0x010000
#define PLUGIND_SNDFILE_FORMAT_FLOAT 0x0006

typedef void *_Nullable (*plugind_sndfile_open_function)(const char *_Nonnull path, int mode, plugind_sndfile_info *_Nonnull info);
typedef int64_t (*plugind_sndfile_readf_float_function)(void *_Nonnull file, float *_Nonnull samples, int64_t frames);
typedef int64_t (*plugind_sndfile_writef_float_function)(void *_Nonnull file, const float *_Nonnull samples, int64_t frames);
typedef int (*plugind_sndfile_close_function)(void *_Nonnull file);
typedef const char *_Nonnull (*plugind_sndfile_strerror_function)(void *_Nullable file);

#endif
