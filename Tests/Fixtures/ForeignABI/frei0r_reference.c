/*
 * frei0r_reference: an independent, in-process frei0r host. Tests run a plugin
 * here and through plugind's confined adapter and compare the frames, so this
 * file follows /usr/include/frei0r.h (frei0r 1.2) literally and nothing else.
 *
 * Build: cc -O1 -Wall -Wextra -o frei0r_reference frei0r_reference.c -ldl -lm
 *
 * Usage:
 *   frei0r_reference --list LIBRARY
 *     NAME \t PLUGIN_TYPE \t COLOR_MODEL \t NUM_PARAMS \t MAJOR.MINOR
 *     then per parameter: PARAM \t INDEX \t NAME \t TYPE   (numbers in decimal)
 *   frei0r_reference LIBRARY WIDTH HEIGHT FRAMES TIMESTEP OUTPUT
 *                    [INPUT1 [INPUT2 [INPUT3]]] [--param INDEX=VALUE ...]
 *     Inputs: filter 1, source 0, mixer2 2, mixer3 3; each file holds exactly
 *     one frame of WIDTH*HEIGHT*4 bytes, fed unchanged to every update.
 *     --param sets a BOOL or DOUBLE parameter to VALUE (strtod) after
 *     construct; "--param A=1 --param B=2" and "--param A=1 B=2" both work.
 *     Other parameters keep the values f0r_construct gave them (frei0r has no
 *     declared defaults). OUTPUT receives FRAMES frames, concatenated.
 *
 * Exit status: 0 success; 1 I/O or memory failure; 2 usage error (arguments,
 * sizes not multiples of 8 in 8..2048, wrong number of inputs for the plugin
 * type, input of the wrong size, --param on a missing or non BOOL/DOUBLE
 * parameter); 3 dlopen failed; 4 a symbol the plugin type needs is missing or
 * the plugin type is unknown; 5 f0r_construct returned NULL.
 *
 * Sequence: f0r_init (its int result is ignored: frei0r.h gives it no
 * meaning) -> f0r_get_plugin_info -> f0r_construct(W, H) -> f0r_set_param_value
 * for each --param -> for frame k = 0 .. FRAMES-1 at time t = (double)k *
 * TIMESTEP (a product, not a running sum): the update below, then append the
 * output frame -> f0r_destruct -> f0r_deinit. The library is not dlclosed.
 *   filter  f0r_update(inst, t, in1, out); when the filter exports no
 *           f0r_update but has f0r_update2: f0r_update2(inst, t, in1, NULL, NULL, out)
 *   source  f0r_update(inst, t, NULL, out)
 *   mixer2  f0r_update2(inst, t, in1, in2, NULL, out)   (mixers must not be
 *   mixer3  f0r_update2(inst, t, in1, in2, in3, out)     given f0r_update)
 * The input and output buffers are allocated once, 64-byte aligned (frei0r.h
 * asks for 16) and zeroed, and reused for every frame. The output buffer is
 * not cleared between frames, because the confined adapter does not clear it
 * either: a plugin that leaves pixels unwritten then behaves the same in both.
 */
/* posix_memalign also under -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <frei0r.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    EXIT_IO = 1,
    EXIT_USAGE = 2,
    EXIT_LOAD = 3,
    EXIT_SYMBOL = 4,
    EXIT_CONSTRUCT = 5,
};

/* The entry points of frei0r.h, resolved from one library. */
typedef int (*init_fn)(void);
typedef void (*deinit_fn)(void);
typedef void (*get_plugin_info_fn)(f0r_plugin_info_t *);
typedef void (*get_param_info_fn)(f0r_param_info_t *, int);
typedef f0r_instance_t (*construct_fn)(unsigned int, unsigned int);
typedef void (*destruct_fn)(f0r_instance_t);
typedef void (*param_value_fn)(f0r_instance_t, f0r_param_t, int);
typedef void (*update_fn)(f0r_instance_t, double, const uint32_t *, uint32_t *);
typedef void (*update2_fn)(f0r_instance_t, double, const uint32_t *, const uint32_t *,
                           const uint32_t *, uint32_t *);
struct api {
    init_fn init;
    deinit_fn deinit;
    get_plugin_info_fn get_plugin_info;
    get_param_info_fn get_param_info;
    construct_fn construct;
    destruct_fn destruct;
    param_value_fn set_param_value;
    param_value_fn get_param_value;
    update_fn update;   /* NULL when not exported */
    update2_fn update2; /* NULL when not exported */
};

static int usage(void)
{
    fprintf(stderr, "usage: frei0r_reference --list LIBRARY\n"
                    "       frei0r_reference LIBRARY WIDTH HEIGHT FRAMES TIMESTEP OUTPUT"
                    " [INPUT1 [INPUT2 [INPUT3]]] [--param INDEX=VALUE ...]\n");
    return EXIT_USAGE;
}

/* POSIX guarantees that dlsym's result converts to a function pointer.
   frei0r.h: a plugin must export "all functions declared", except that
   f0r_update2 is optional for filters and sources and mixers may lack
   f0r_update; those two are checked per plugin type in load(). */
#define REQUIRE(field, type, name)                                   \
    do {                                                             \
        if ((api->field = (type)dlsym(lib, name)) == NULL) {         \
            fprintf(stderr, "%s: missing %s\n", path, name);         \
            return EXIT_SYMBOL;                                      \
        }                                                            \
    } while (0)

/* Loads LIBRARY, calls f0r_init and f0r_get_plugin_info, and checks that every
   symbol the plugin type needs is there. Returns 0 or an exit status; on
   success the caller owes an f0r_deinit. */
static int load(const char *path, struct api *api, f0r_plugin_info_t *info)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return EXIT_LOAD;
    }
    REQUIRE(init, init_fn, "f0r_init");
    REQUIRE(deinit, deinit_fn, "f0r_deinit");
    REQUIRE(get_plugin_info, get_plugin_info_fn, "f0r_get_plugin_info");
    REQUIRE(get_param_info, get_param_info_fn, "f0r_get_param_info");
    REQUIRE(construct, construct_fn, "f0r_construct");
    REQUIRE(destruct, destruct_fn, "f0r_destruct");
    REQUIRE(set_param_value, param_value_fn, "f0r_set_param_value");
    REQUIRE(get_param_value, param_value_fn, "f0r_get_param_value");
    api->update = (update_fn)dlsym(lib, "f0r_update");
    api->update2 = (update2_fn)dlsym(lib, "f0r_update2");

    (void)api->init();
    memset(info, 0, sizeof *info);
    api->get_plugin_info(info);
    const char *missing = NULL;
    switch (info->plugin_type) {
    case F0R_PLUGIN_TYPE_FILTER:
        if (api->update == NULL && api->update2 == NULL)
            missing = "f0r_update";
        break;
    case F0R_PLUGIN_TYPE_SOURCE:
        if (api->update == NULL)
            missing = "f0r_update";
        break;
    case F0R_PLUGIN_TYPE_MIXER2:
    case F0R_PLUGIN_TYPE_MIXER3:
        if (api->update2 == NULL)
            missing = "f0r_update2";
        break;
    default:
        fprintf(stderr, "%s: unknown plugin type %d\n", path, info->plugin_type);
        api->deinit();
        return EXIT_SYMBOL;
    }
    if (missing != NULL) {
        fprintf(stderr, "%s: missing %s\n", path, missing);
        api->deinit();
        return EXIT_SYMBOL;
    }
    return 0;
}

static int list(const char *path)
{
    struct api api;
    f0r_plugin_info_t info;
    int status = load(path, &api, &info);
    if (status != 0)
        return status;
    printf("%s\t%d\t%d\t%d\t%d.%d\n", info.name ? info.name : "", info.plugin_type,
           info.color_model, info.num_params, info.major_version, info.minor_version);
    for (int i = 0; i < info.num_params; i++) {
        f0r_param_info_t p;
        memset(&p, 0, sizeof p);
        api.get_param_info(&p, i);
        printf("PARAM\t%d\t%s\t%d\n", i, p.name ? p.name : "", p.type);
    }
    api.deinit();
    return fflush(stdout) == 0 ? 0 : EXIT_IO;
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

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *s != '\0' && *end == '\0' && errno != ERANGE;
}

static uint32_t *alloc_frame(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

/* Reads exactly one frame; 0 when the file is shorter or longer. */
static int read_frame(const char *path, uint32_t *dst, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 0;
    }
    int ok = fread(dst, 1, bytes, f) == bytes && fgetc(f) == EOF;
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: expected exactly %zu bytes\n", path, bytes);
    return ok;
}

/* Everything between f0r_get_plugin_info and f0r_deinit; main calls deinit. */
static int run(const struct api *api, const f0r_plugin_info_t *info, unsigned long width,
               unsigned long height, unsigned long frames, double timestep,
               const char *out_path, const char *const *inputs, int n_inputs,
               char **params, int n_args)
{
    static const int needed_inputs[] = {1, 0, 2, 3}; /* by F0R_PLUGIN_TYPE_* */
    if (n_inputs != needed_inputs[info->plugin_type]) {
        fprintf(stderr, "plugin type %d takes %d input(s), got %d\n", info->plugin_type,
                needed_inputs[info->plugin_type], n_inputs);
        return EXIT_USAGE;
    }

    /* Validate every --param before constructing anything. */
    enum { MAX_PARAMS = 256 };
    int n_params = 0;
    int param_index[MAX_PARAMS];
    double param_value[MAX_PARAMS];
    for (int a = 0; a < n_args; a++) {
        if (strcmp(params[a], "--param") == 0)
            continue;
        char *eq = strchr(params[a], '=');
        if (eq == NULL || n_params == MAX_PARAMS)
            return usage();
        *eq = '\0';
        unsigned long index;
        if (!parse_ulong(params[a], &index) || index >= (unsigned long)info->num_params) {
            fprintf(stderr, "%s: no such parameter\n", params[a]);
            return EXIT_USAGE;
        }
        f0r_param_info_t p;
        memset(&p, 0, sizeof p);
        api->get_param_info(&p, (int)index);
        if (p.type != F0R_PARAM_BOOL && p.type != F0R_PARAM_DOUBLE) {
            fprintf(stderr, "parameter %lu has type %d: only BOOL and DOUBLE can be set\n",
                    index, p.type);
            return EXIT_USAGE;
        }
        if (!parse_double(eq + 1, &param_value[n_params])) {
            fprintf(stderr, "%s: not a number\n", eq + 1);
            return EXIT_USAGE;
        }
        param_index[n_params++] = (int)index;
    }

    /* Allocated once and never freed: the process exits right after. */
    size_t bytes = (size_t)width * height * 4;
    uint32_t *in[3] = {NULL, NULL, NULL};
    uint32_t *out = alloc_frame(bytes);
    if (out == NULL)
        return EXIT_IO;
    for (int i = 0; i < n_inputs; i++) {
        if ((in[i] = alloc_frame(bytes)) == NULL)
            return EXIT_IO;
        if (!read_frame(inputs[i], in[i], bytes))
            return EXIT_USAGE;
    }
    FILE *out_file = fopen(out_path, "wb");
    if (out_file == NULL) {
        fprintf(stderr, "%s: %s\n", out_path, strerror(errno));
        return EXIT_IO;
    }

    f0r_instance_t inst = api->construct((unsigned int)width, (unsigned int)height);
    if (inst == NULL) {
        fprintf(stderr, "f0r_construct returned NULL\n");
        fclose(out_file);
        return EXIT_CONSTRUCT;
    }
    for (int i = 0; i < n_params; i++)
        api->set_param_value(inst, &param_value[i], param_index[i]);
    int ok = 1;
    for (unsigned long k = 0; k < frames; k++) {
        double t = (double)k * timestep;
        switch (info->plugin_type) {
        case F0R_PLUGIN_TYPE_FILTER:
            if (api->update != NULL)
                api->update(inst, t, in[0], out);
            else
                api->update2(inst, t, in[0], NULL, NULL, out);
            break;
        case F0R_PLUGIN_TYPE_SOURCE:
            api->update(inst, t, NULL, out);
            break;
        case F0R_PLUGIN_TYPE_MIXER2:
            api->update2(inst, t, in[0], in[1], NULL, out);
            break;
        default: /* F0R_PLUGIN_TYPE_MIXER3: load() refused every other type */
            api->update2(inst, t, in[0], in[1], in[2], out);
            break;
        }
        ok = ok && fwrite(out, 1, bytes, out_file) == bytes;
    }
    api->destruct(inst);
    if (fclose(out_file) != 0 || !ok) {
        fprintf(stderr, "%s: write failed\n", out_path);
        return EXIT_IO;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--list") == 0)
        return list(argv[2]);
    if (argc < 7)
        return usage();

    unsigned long width, height, frames;
    double timestep;
    if (!parse_ulong(argv[2], &width) || !parse_ulong(argv[3], &height)
        || !parse_ulong(argv[4], &frames) || !parse_double(argv[5], &timestep))
        return usage();
    /* frei0r.h: multiples of 8, greater than 0, at most 2048. */
    if (width == 0 || height == 0 || width % 8 || height % 8 || width > 2048 || height > 2048) {
        fprintf(stderr, "%lux%lu: sizes must be multiples of 8 in 8...2048\n", width, height);
        return EXIT_USAGE;
    }
    /* Inputs come first; everything from the first --param on is parameters. */
    const char *inputs[3];
    int n_inputs = 0, first_param = argc;
    for (int a = 7; a < argc && first_param == argc; a++) {
        if (strcmp(argv[a], "--param") == 0)
            first_param = a;
        else if (n_inputs == 3)
            return usage();
        else
            inputs[n_inputs++] = argv[a];
    }

    struct api api;
    f0r_plugin_info_t info;
    int status = load(argv[1], &api, &info);
    if (status != 0)
        return status;
    status = run(&api, &info, width, height, frames, timestep, argv[6], inputs, n_inputs,
                 argv + first_param, argc - first_param);
    api.deinit();
    return status;
}
