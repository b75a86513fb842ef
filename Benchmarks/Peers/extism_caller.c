// The Extism side of the peer benchmark, called from C (no host language in between): a 64-byte
// echo call on a live instance, and a new instance from a module compiled once plus its first
// call, which is what Extism does where plugind launches a worker and answers its first
// request. libextism is loaded from the path given (Scripts/bench.sh takes it from PyPI's
// extism-sys wheel, which ships the library without a header), so the 1.x C API functions
// used are declared here. Prints one JSON line per figure, like plugind-bench:
//   extism_caller LIBEXTISM MODULE ITERATIONS
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ExtismPlugin ExtismPlugin;
typedef struct ExtismCompiledPlugin ExtismCompiledPlugin;

static struct {
    ExtismCompiledPlugin *(*compile)(const uint8_t *, uint64_t, const void **, uint64_t, bool, char **);
    ExtismPlugin *(*instantiate)(const ExtismCompiledPlugin *, char **);
    int32_t (*call)(ExtismPlugin *, const char *, const uint8_t *, uint64_t);
    uint64_t (*output_length)(ExtismPlugin *);
    const uint8_t *(*output_data)(ExtismPlugin *);
    const char *(*error)(ExtismPlugin *);
    void (*release)(ExtismPlugin *);
} extism;

static void *find(void *library, const char *name) {
    void *address = dlsym(library, name);
    if (address == NULL) {
        fprintf(stderr, "extism_caller: %s has no %s\n", "libextism", name);
        exit(1);
    }
    return address;
}

static double microseconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e6 + (double)(now.tv_nsec - start->tv_nsec) / 1e3;
}

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *samples, int count) {
    qsort(samples, (size_t)count, sizeof *samples, ascending);
    printf("{\"name\":\"%s\",\"unit\":\"us\",\"samples\":%d,\"median\":%.3f,\"p10\":%.3f,\"p90\":%.3f,\"extra\":{}}\n", name,
           count, samples[count / 2], samples[count / 10], samples[count * 9 / 10]);
}

// One echo call; the caller takes the answer as bytes of its own, as a plugind host does.
static void echo(ExtismPlugin *plugin, const uint8_t *request, uint64_t length, uint8_t *answer) {
    if (extism.call(plugin, "echo", request, length) != 0) {
        fprintf(stderr, "extism_caller: echo failed: %s\n", extism.error(plugin));
        exit(1);
    }
    if (extism.output_length(plugin) != length) {
        fprintf(stderr, "extism_caller: echo answered %llu bytes for %llu\n", (unsigned long long)extism.output_length(plugin),
                (unsigned long long)length);
        exit(1);
    }
    memcpy(answer, extism.output_data(plugin), length);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: extism_caller LIBEXTISM MODULE ITERATIONS\n");
        return 64;
    }
    int iterations = atoi(argv[3]);
    if (iterations < 10) iterations = 10;
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "extism_caller: %s\n", dlerror());
        return 1;
    }
    extism.compile = find(library, "extism_compiled_plugin_new");
    extism.instantiate = find(library, "extism_plugin_new_from_compiled");
    extism.call = find(library, "extism_plugin_call");
    extism.output_length = find(library, "extism_plugin_output_length");
    extism.output_data = find(library, "extism_plugin_output_data");
    extism.error = find(library, "extism_plugin_error");
    extism.release = find(library, "extism_plugin_free");

    FILE *file = fopen(argv[2], "rb");
    if (file == NULL) {
        perror(argv[2]);
        return 1;
    }
    static uint8_t module[1 << 20];
    size_t size = fread(module, 1, sizeof module, file);
    fclose(file);
    char *error = NULL;
    ExtismCompiledPlugin *compiled = extism.compile(module, size, NULL, 0, false, &error);
    if (compiled == NULL) {
        fprintf(stderr, "extism_caller: cannot compile %s: %s\n", argv[2], error ? error : "");
        return 1;
    }
    double *samples = malloc(sizeof(double) * (size_t)iterations);
    uint8_t request[64], answer[64];
    memset(request, 'a', sizeof request);

    // An instance from the compiled module and its first one-byte call.
    int warm_up = 5;
    for (int i = 0; i < iterations / 10 + warm_up; i++) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        ExtismPlugin *plugin = extism.instantiate(compiled, &error);
        if (plugin == NULL) {
            fprintf(stderr, "extism_caller: cannot instantiate: %s\n", error ? error : "");
            return 1;
        }
        echo(plugin, request, 1, answer);
        double elapsed = microseconds_since(&start);
        extism.release(plugin);
        if (i >= warm_up) samples[i - warm_up] = elapsed;
    }
    report("extism-instance-first-call", samples, iterations / 10);

    // 64-byte echo calls on one live instance.
    ExtismPlugin *plugin = extism.instantiate(compiled, &error);
    if (plugin == NULL) return 1;
    for (int i = 0; i < iterations + 100; i++) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        echo(plugin, request, sizeof request, answer);
        double elapsed = microseconds_since(&start);
        if (i >= 100) samples[i - 100] = elapsed;
    }
    if (memcmp(request, answer, sizeof request) != 0) {
        fprintf(stderr, "extism_caller: the echo changed the bytes\n");
        return 1;
    }
    report("extism-call-64", samples, iterations);
    extism.release(plugin);
    free(samples);
    return 0;
}
