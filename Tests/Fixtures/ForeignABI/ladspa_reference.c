/*
 * ladspa_reference: an independent, in-process LADSPA host. Tests run a plugin
 * here and through plugind's confined adapter and compare the outputs, so this
 * file follows /usr/include/ladspa.h (LADSPA 1.1) literally and nothing else.
 *
 * Build: cc -O1 -Wall -Wextra -o ladspa_reference ladspa_reference.c -ldl -lm
 *
 * Usage:
 *   ladspa_reference --list LIBRARY
 *   ladspa_reference --defaults LIBRARY LABEL RATE
 *     one line per descriptor, index order:
 *     INDEX \t UNIQUEID \t LABEL \t AUDIO_IN \t AUDIO_OUT \t CONTROL_IN \t CONTROL_OUT
 *   ladspa_reference LIBRARY LABEL RATE BLOCK FRAMES INPUT OUTPUT [INDEX=VALUE ...]
 *     INPUT: raw little-endian float32, planar: FRAMES samples per audio input
 *     port, ports in index order (exactly that many bytes). OUTPUT: the same
 *     layout for the audio output ports. INDEX=VALUE sets input control port
 *     INDEX (a port index) to VALUE, parsed with strtof (correctly rounded).
 *
 * Exit status: 0 success; 1 I/O or memory failure; 2 usage error (arguments,
 * INPUT of the wrong size, an override that names no input control port);
 * 3 dlopen failed; 4 no ladspa_descriptor symbol or no descriptor with LABEL;
 * 5 instantiate returned NULL; 6 malformed descriptor (a port that is not
 * exactly one of input/output and one of audio/control, or a NULL mandatory
 * function pointer).
 *
 * Run sequence (ladspa.h): instantiate(desc, RATE) -> connect_port for every
 * port -> activate if non-NULL -> run(h, n) per block of BLOCK frames, the last
 * block FRAMES % BLOCK frames long -> deactivate if non-NULL -> cleanup. Each
 * audio port has its own zeroed, 64-byte aligned buffer of BLOCK floats (never
 * shared between an input and an output: in-place operation changes the output
 * of some plugins that do not declare INPLACE_BROKEN). Each control port has
 * its own float. This host never changes the MXCSR (process default 0x1F80:
 * no flush-to-zero, no denormals-are-zero, round to nearest); the adapter must
 * run plugins the same way, because FTZ/DAZ changes some plugins' output.
 *
 * Default control values (the Swift adapter must follow the same rule):
 *   1. lower = (double)LowerBound, upper = (double)UpperBound; when
 *      LADSPA_HINT_SAMPLE_RATE is set both are multiplied by (double)RATE.
 *   2. By HintDescriptor & LADSPA_HINT_DEFAULT_MASK, all in double:
 *        MINIMUM  lower
 *        LOW      lower * 0.75 + upper * 0.25
 *        MIDDLE   lower * 0.5  + upper * 0.5
 *        HIGH     lower * 0.25 + upper * 0.75
 *        MAXIMUM  upper
 *        0, 1, 100, 440  that number
 *      With LADSPA_HINT_LOGARITHMIC, LOW/MIDDLE/HIGH are instead
 *      exp(log(lower) * w + log(upper) * (1 - w)) with w = 0.75/0.5/0.25
 *      (libm exp/log, no guard for bounds <= 0: a zero bound makes log give
 *      -inf and the default 0, a negative bound makes it NaN). Each product is rounded
 *      separately (no fused multiply-add: x86-64 baseline has no FMA).
 *      NONE and the six mask values ladspa.h leaves undefined:
 *        lower if LADSPA_HINT_BOUNDED_BELOW, else upper if
 *        LADSPA_HINT_BOUNDED_ABOVE, else 0.
 *   3. With LADSPA_HINT_INTEGER the double is rounded to the nearest integer,
 *      ties to even (rint() in the default rounding mode; Swift:
 *      .rounded(.toNearestOrEven)), before step 4.
 *   4. The double is converted to float (round to nearest even).
 *   Defaults are not clamped to the bounds: ladspa.h does not ask for it and
 *   some plugins declare defaults outside their range (cmt delay_0.01s).
 */
/* posix_memalign also under -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <ladspa.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "INPUT and OUTPUT are little-endian float32 and are read/written natively"
#endif

enum {
    EXIT_IO = 1,
    EXIT_USAGE = 2,
    EXIT_LOAD = 3,
    EXIT_DESCRIPTOR = 4,
    EXIT_INSTANTIATE = 5,
    EXIT_MALFORMED = 6,
};

/* ladspa.h: a port is exactly one of input/output and one of control/audio. */
static int port_is_valid(LADSPA_PortDescriptor d)
{
    return (!LADSPA_IS_PORT_INPUT(d) != !LADSPA_IS_PORT_OUTPUT(d))
        && (!LADSPA_IS_PORT_CONTROL(d) != !LADSPA_IS_PORT_AUDIO(d));
}

static double interpolate(double lower, double upper, double w, int logarithmic)
{
    if (logarithmic)
        return exp(log(lower) * w + log(upper) * (1.0 - w));
    return lower * w + upper * (1.0 - w);
}

/* The rule is spelled out in the comment at the top of this file. */
static float default_value(const LADSPA_PortRangeHint *hint, unsigned long rate)
{
    LADSPA_PortRangeHintDescriptor d = hint->HintDescriptor;
    double lower = hint->LowerBound;
    double upper = hint->UpperBound;
    int logarithmic = LADSPA_IS_HINT_LOGARITHMIC(d) != 0;
    double v;

    if (LADSPA_IS_HINT_SAMPLE_RATE(d)) {
        lower *= (double)rate;
        upper *= (double)rate;
    }
    switch (d & LADSPA_HINT_DEFAULT_MASK) {
    case LADSPA_HINT_DEFAULT_MINIMUM: v = lower; break;
    case LADSPA_HINT_DEFAULT_LOW: v = interpolate(lower, upper, 0.75, logarithmic); break;
    case LADSPA_HINT_DEFAULT_MIDDLE: v = interpolate(lower, upper, 0.5, logarithmic); break;
    case LADSPA_HINT_DEFAULT_HIGH: v = interpolate(lower, upper, 0.25, logarithmic); break;
    case LADSPA_HINT_DEFAULT_MAXIMUM: v = upper; break;
    case LADSPA_HINT_DEFAULT_0: v = 0.0; break;
    case LADSPA_HINT_DEFAULT_1: v = 1.0; break;
    case LADSPA_HINT_DEFAULT_100: v = 100.0; break;
    case LADSPA_HINT_DEFAULT_440: v = 440.0; break;
    default:
        if (LADSPA_IS_HINT_BOUNDED_BELOW(d))
            v = lower;
        else if (LADSPA_IS_HINT_BOUNDED_ABOVE(d))
            v = upper;
        else
            v = 0.0;
        break;
    }
    if (LADSPA_IS_HINT_INTEGER(d))
        v = rint(v);
    return (float)v;
}

/* Parses a whole decimal unsigned number; 0 on any trailing garbage. */
static int parse_ulong(const char *s, unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0';
}

static int usage(void)
{
    fprintf(stderr,
            "usage: ladspa_reference --list LIBRARY\n"
            "       ladspa_reference LIBRARY LABEL RATE BLOCK FRAMES INPUT OUTPUT"
            " [INDEX=VALUE ...]\n");
    return EXIT_USAGE;
}

static LADSPA_Descriptor_Function load(const char *path, int *status)
{
    /* RTLD_LOCAL keeps one plugin's symbols out of every other library. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        *status = EXIT_LOAD;
        return NULL;
    }
    /* POSIX guarantees that dlsym's result converts to a function pointer. */
    LADSPA_Descriptor_Function f = (LADSPA_Descriptor_Function)dlsym(lib, "ladspa_descriptor");
    if (f == NULL) {
        fprintf(stderr, "%s: no ladspa_descriptor symbol\n", path);
        *status = EXIT_DESCRIPTOR;
    }
    return f;
}

static int list(const char *path)
{
    int status = 0;
    LADSPA_Descriptor_Function f = load(path, &status);
    if (f == NULL)
        return status;
    const LADSPA_Descriptor *desc;
    for (unsigned long i = 0; (desc = f(i)) != NULL; i++) {
        unsigned long ai = 0, ao = 0, ci = 0, co = 0;
        for (unsigned long p = 0; p < desc->PortCount; p++) {
            LADSPA_PortDescriptor d = desc->PortDescriptors[p];
            if (!port_is_valid(d))
                continue; /* counted nowhere: the sum then differs from PortCount */
            if (LADSPA_IS_PORT_AUDIO(d) && LADSPA_IS_PORT_INPUT(d))
                ai++;
            else if (LADSPA_IS_PORT_AUDIO(d))
                ao++;
            else if (LADSPA_IS_PORT_INPUT(d))
                ci++;
            else
                co++;
        }
        printf("%lu\t%lu\t%s\t%lu\t%lu\t%lu\t%lu\n", i, desc->UniqueID,
               desc->Label ? desc->Label : "", ai, ao, ci, co);
    }
    return fflush(stdout) == 0 ? 0 : EXIT_IO;
}

static float *alloc_block(unsigned long count)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, count * sizeof(float)) != 0)
        return NULL;
    memset(p, 0, count * sizeof(float));
    return p;
}

/* Reads exactly count floats; 0 when the file is shorter or longer. */
static int read_exact(const char *path, float *dst, unsigned long count)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 0;
    }
    int ok = fread(dst, sizeof(float), count, f) == count && fgetc(f) == EOF;
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: expected exactly %lu bytes\n", path,
                count * (unsigned long)sizeof(float));
    return ok;
}

/* The descriptor of `path` labelled `label`, or NULL with *status set and the cause printed. */
static const LADSPA_Descriptor *find(const char *path, const char *label, int *status)
{
    LADSPA_Descriptor_Function f = load(path, status);
    if (f == NULL)
        return NULL;
    const LADSPA_Descriptor *desc;
    for (unsigned long i = 0; (desc = f(i)) != NULL; i++)
        if (desc->Label != NULL && strcmp(desc->Label, label) == 0)
            return desc;
    fprintf(stderr, "%s: no descriptor labelled %s\n", path, label);
    *status = EXIT_DESCRIPTOR;
    return NULL;
}

/* Prints "INDEX\tVALUE" for each control input of LABEL: its default at RATE, by the rule above. */
static int defaults(const char *path, const char *label, unsigned long rate)
{
    int status = 0;
    const LADSPA_Descriptor *desc = find(path, label, &status);
    if (desc == NULL)
        return status;
    for (unsigned long p = 0; p < desc->PortCount; p++) {
        LADSPA_PortDescriptor d = desc->PortDescriptors[p];
        if (port_is_valid(d) && LADSPA_IS_PORT_CONTROL(d) && LADSPA_IS_PORT_INPUT(d))
            printf("%lu\t%.9g\n", p, (double)default_value(&desc->PortRangeHints[p], rate));
    }
    return fflush(stdout) == 0 ? 0 : EXIT_IO;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--list") == 0)
        return list(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--defaults") == 0)
        return defaults(argv[2], argv[3], strtoul(argv[4], NULL, 10));
    if (argc < 8)
        return usage();

    const char *path = argv[1], *label = argv[2], *in_path = argv[6], *out_path = argv[7];
    unsigned long rate, block, frames;
    if (!parse_ulong(argv[3], &rate) || rate == 0 || !parse_ulong(argv[4], &block)
        || block == 0 || block > (1ul << 24) || !parse_ulong(argv[5], &frames)
        || frames > (1ul << 30))
        return usage();

    int status = 0;
    const LADSPA_Descriptor *desc = find(path, label, &status);
    if (desc == NULL)
        return status;
    if (desc->instantiate == NULL || desc->connect_port == NULL || desc->run == NULL
        || desc->cleanup == NULL) {
        fprintf(stderr, "%s: NULL mandatory function pointer\n", label);
        return EXIT_MALFORMED;
    }

    unsigned long ports = desc->PortCount, n_in = 0, n_out = 0;
    for (unsigned long p = 0; p < ports; p++) {
        LADSPA_PortDescriptor d = desc->PortDescriptors[p];
        if (!port_is_valid(d)) {
            fprintf(stderr, "%s: port %lu has descriptor %d\n", label, p, d);
            return EXIT_MALFORMED;
        }
        if (LADSPA_IS_PORT_AUDIO(d) && LADSPA_IS_PORT_INPUT(d))
            n_in++;
        else if (LADSPA_IS_PORT_AUDIO(d))
            n_out++;
    }

    /* One float per port: control ports are connected to their own entry.
       calloc(0) may return NULL, hence the + 1. */
    float *control = calloc(ports + 1, sizeof(float));
    float **audio = calloc(ports + 1, sizeof(float *));
    float *in_data = calloc(n_in * frames + 1, sizeof(float));
    float *out_data = calloc(n_out * frames + 1, sizeof(float));
    if (control == NULL || audio == NULL || in_data == NULL || out_data == NULL) {
        fprintf(stderr, "out of memory\n");
        return EXIT_IO;
    }
    for (unsigned long p = 0; p < ports; p++) {
        LADSPA_PortDescriptor d = desc->PortDescriptors[p];
        if (LADSPA_IS_PORT_CONTROL(d) && LADSPA_IS_PORT_INPUT(d))
            control[p] = default_value(&desc->PortRangeHints[p], rate);
    }
    for (int a = 8; a < argc; a++) {
        unsigned long index;
        char *eq = strchr(argv[a], '=');
        char *end;
        if (eq == NULL)
            return usage();
        *eq = '\0';
        if (!parse_ulong(argv[a], &index) || index >= ports
            || !LADSPA_IS_PORT_CONTROL(desc->PortDescriptors[index])
            || !LADSPA_IS_PORT_INPUT(desc->PortDescriptors[index])) {
            fprintf(stderr, "%s: not an input control port\n", argv[a]);
            return EXIT_USAGE;
        }
        errno = 0;
        control[index] = strtof(eq + 1, &end);
        if (eq[1] == '\0' || *end != '\0' || errno == ERANGE) {
            fprintf(stderr, "%s: not a float\n", eq + 1);
            return EXIT_USAGE;
        }
    }
    if (!read_exact(in_path, in_data, n_in * frames))
        return EXIT_USAGE;
    for (unsigned long p = 0; p < ports; p++) {
        if (LADSPA_IS_PORT_AUDIO(desc->PortDescriptors[p])
            && (audio[p] = alloc_block(block)) == NULL) {
            fprintf(stderr, "out of memory\n");
            return EXIT_IO;
        }
    }

    LADSPA_Handle h = desc->instantiate(desc, rate);
    if (h == NULL) {
        fprintf(stderr, "%s: instantiate returned NULL\n", label);
        return EXIT_INSTANTIATE;
    }
    for (unsigned long p = 0; p < ports; p++)
        desc->connect_port(h, p, LADSPA_IS_PORT_AUDIO(desc->PortDescriptors[p]) ? audio[p]
                                                                                : &control[p]);
    if (desc->activate != NULL)
        desc->activate(h);
    for (unsigned long done = 0; done < frames;) {
        unsigned long n = frames - done < block ? frames - done : block;
        unsigned long ci = 0, co = 0; /* channel numbers of audio in/out ports */
        for (unsigned long p = 0; p < ports; p++) {
            LADSPA_PortDescriptor d = desc->PortDescriptors[p];
            if (LADSPA_IS_PORT_AUDIO(d) && LADSPA_IS_PORT_INPUT(d))
                memcpy(audio[p], in_data + ci++ * frames + done, n * sizeof(float));
        }
        desc->run(h, n);
        for (unsigned long p = 0; p < ports; p++) {
            LADSPA_PortDescriptor d = desc->PortDescriptors[p];
            if (LADSPA_IS_PORT_AUDIO(d) && LADSPA_IS_PORT_OUTPUT(d))
                memcpy(out_data + co++ * frames + done, audio[p], n * sizeof(float));
        }
        done += n;
    }
    if (desc->deactivate != NULL)
        desc->deactivate(h);
    desc->cleanup(h);

    FILE *out = fopen(out_path, "wb");
    if (out == NULL) {
        fprintf(stderr, "%s: %s\n", out_path, strerror(errno));
        return EXIT_IO;
    }
    int ok = fwrite(out_data, sizeof(float), n_out * frames, out) == n_out * frames;
    if (fclose(out) != 0 || !ok) {
        fprintf(stderr, "%s: write failed\n", out_path);
        return EXIT_IO;
    }
    return 0;
}
