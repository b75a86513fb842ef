// The stack symbolizer, run as `plugind-worker --symbolize` by a host whose worker sent a stack
// report. The objects it parses are the plugin's own files, which a hostile author shapes at
// will, so the parsing (elfutils' libdw) never runs in the host: this process opens the files the
// host named, then confines itself to reading them and writing its answer before it parses any.
//
// libdw is loaded here, when a report is symbolized, not linked into the worker executable: every
// worker and launcher would otherwise map it and its compression libraries for nothing (unique
// memory in every worker with a layout of its own, and their loading in every launcher's start).
#include "plugind_symbolizer.h"

#include "plugind_confinement.h"

#include <dlfcn.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

enum { max_objects = 16, max_frames = 64, max_request = 64 * 1024, max_name = 1024 };

// The libdw functions the symbolizer calls, resolved by load_libdw.
static struct {
    __typeof__(dwfl_begin) *begin;
    __typeof__(dwfl_end) *end;
    __typeof__(dwfl_report_begin) *report_begin;
    __typeof__(dwfl_report_elf) *report_elf;
    __typeof__(dwfl_report_end) *report_end;
    __typeof__(dwfl_addrmodule) *addrmodule;
    __typeof__(dwfl_module_addrinfo) *module_addrinfo;
    __typeof__(dwfl_module_getsrc) *module_getsrc;
    __typeof__(dwfl_lineinfo) *lineinfo;
    __typeof__(dwfl_module_nextcu) *module_nextcu;
    __typeof__(dwfl_offline_section_address) *offline_section_address;
    __typeof__(dwarf_haspc) *haspc;
    __typeof__(dwarf_getsrc_die) *getsrc_die;
    __typeof__(dwarf_lineno) *lineno;
    __typeof__(dwarf_linesrc) *linesrc;
} libdw;

// Loads libdw (Debian's libdw1) and resolves every function above; 0 when all were found. Done
// before confinement, which forbids opening files and executable mappings.
static int load_libdw(void) {
    void *library = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return -1;
    struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&libdw.begin, "dwfl_begin"},
        {(void **)&libdw.end, "dwfl_end"},
        {(void **)&libdw.report_begin, "dwfl_report_begin"},
        {(void **)&libdw.report_elf, "dwfl_report_elf"},
        {(void **)&libdw.report_end, "dwfl_report_end"},
        {(void **)&libdw.addrmodule, "dwfl_addrmodule"},
        {(void **)&libdw.module_addrinfo, "dwfl_module_addrinfo"},
        {(void **)&libdw.module_getsrc, "dwfl_module_getsrc"},
        {(void **)&libdw.lineinfo, "dwfl_lineinfo"},
        {(void **)&libdw.module_nextcu, "dwfl_module_nextcu"},
        {(void **)&libdw.offline_section_address, "dwfl_offline_section_address"},
        {(void **)&libdw.haspc, "dwarf_haspc"},
        {(void **)&libdw.getsrc_die, "dwarf_getsrc_die"},
        {(void **)&libdw.lineno, "dwarf_lineno"},
        {(void **)&libdw.linesrc, "dwarf_linesrc"},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (*symbols[index].slot == NULL) return -1;
    }
    return 0;
}

struct object {
    int descriptor;
    uint64_t bias;
    /// Whether source lines are looked up: not for the worker executable, whose line tables are
    /// large and say nothing to a plugin's author.
    int lines;
    char *path;
};

struct frame {
    int index;
    uint64_t address;
    int object;
};

// Implemented by the toolchain's runtimes, both linked into the worker executable.
extern char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status);
extern char *swift_demangle(const char *mangled, size_t length, char *buffer, size_t *buffer_length, uint32_t flags);

static size_t read_request(int input, char *buffer, size_t capacity) {
    size_t length = 0;
    while (length + 1 < capacity) {
        ssize_t got = read(input, buffer + length, capacity - 1 - length);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        length += (size_t)got;
    }
    buffer[length] = '\0';
    return length;
}

static int open_object(const char *path) {
    int descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (descriptor < 0) return -1;
    struct stat status;
    if (fstat(descriptor, &status) != 0 || !S_ISREG(status.st_mode)) {
        close(descriptor);
        return -1;
    }
    return descriptor;
}

// Bounded in time and memory, then reading the descriptors already open, mapping (never
// executable) and writing the answer: all that is left to do (plugind_confinement.h).
static int confine(void) {
    struct rlimit cpu = {.rlim_cur = 5, .rlim_max = 5};
    struct rlimit memory = {.rlim_cur = 2ULL << 30, .rlim_max = 2ULL << 30};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &memory);
    return plugind_confinement_install_symbolizer_filter();
}

// No separate debug files: looking for them would open paths the plugin's files name.
static int no_debuginfo(Dwfl_Module *module, void **user, const char *name, Dwarf_Addr base, const char *file,
                        const char *debuglink, GElf_Word crc, char **debuginfo_name) {
    (void)module, (void)user, (void)name, (void)base, (void)file, (void)debuglink, (void)crc;
    *debuginfo_name = NULL;
    return -1;
}

static int no_elf(Dwfl_Module *module, void **user, const char *name, Dwarf_Addr base, char **file_name, Elf **elf) {
    (void)module, (void)user, (void)name, (void)base, (void)elf;
    *file_name = NULL;
    return -1;
}

// Rust's legacy names end in a hash ("::h0123456789abcdef"), which says nothing to a reader.
static void drop_rust_hash(char *name) {
    size_t length = strlen(name);
    if (length < 19) return;
    char *suffix = name + length - 19;
    if (strncmp(suffix, "::h", 3) != 0) return;
    for (size_t index = 3; index < 19; index++) {
        char c = suffix[index];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return;
    }
    *suffix = '\0';
}

static char *demangled(const char *name) {
    int status = 0;
    if (strncmp(name, "_Z", 2) == 0) {
        char *result = __cxa_demangle(name, NULL, NULL, &status);
        if (result != NULL && status == 0) {
            drop_rust_hash(result);
            return result;
        }
        free(result);
    } else if (strncmp(name, "$s", 2) == 0 || strncmp(name, "$S", 2) == 0 || strncmp(name, "$e", 2) == 0 ||
               strncmp(name, "_T0", 3) == 0) {
        char *result = swift_demangle(name, strlen(name), NULL, NULL, 0);
        if (result != NULL) return result;
    }
    return strdup(name);
}

// Names travel as tab-separated fields on one line: tabs, newlines and other control characters
// become '?'; long names are cut.
static void put_field(FILE *stream, const char *text) {
    size_t written = 0;
    for (const unsigned char *c = (const unsigned char *)text; c != NULL && *c != '\0' && written < max_name; c++) {
        fputc(*c < 0x20 || *c == 0x7F ? '?' : *c, stream);
        written++;
    }
}

// Without .debug_aranges (clang emits none by default), libdw 0.188 cannot tell which unit holds
// an address: each unit's ranges are asked instead.
static const char *line_from_units(Dwfl_Module *module, Dwarf_Addr address, int *line) {
    Dwarf_Addr bias = 0;
    for (Dwarf_Die *unit = libdw.module_nextcu(module, NULL, &bias); unit != NULL;
         unit = libdw.module_nextcu(module, unit, &bias)) {
        if (libdw.haspc(unit, address - bias) <= 0) continue;
        Dwarf_Line *found = libdw.getsrc_die(unit, address - bias);
        if (found == NULL || libdw.lineno(found, line) != 0) return NULL;
        return libdw.linesrc(found, NULL, NULL);
    }
    return NULL;
}

static int parse(char *request, struct object *objects, int *object_count, struct frame *frames, int *frame_count) {
    *object_count = 0;
    *frame_count = 0;
    for (char *line = strtok(request, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int index = 0, consumed = 0;
        unsigned long long number = 0;
        if (strncmp(line, "object ", 7) == 0) {
            char kind = 0;
            if (sscanf(line + 7, "%d %llx %c %n", &index, &number, &kind, &consumed) != 3 || index != *object_count ||
                index >= max_objects || (kind != 'l' && kind != 'n'))
                return -1;
            objects[index].bias = number;
            objects[index].lines = kind == 'l';
            objects[index].path = line + 7 + consumed;
            objects[index].descriptor = -1;
            (*object_count)++;
        } else if (strncmp(line, "frame ", 6) == 0) {
            char object[16] = {0};
            if (sscanf(line + 6, "%d %llx %15s", &index, &number, object) != 3 || *frame_count >= max_frames) return -1;
            frames[*frame_count].index = index;
            frames[*frame_count].address = number;
            frames[*frame_count].object = object[0] == '-' ? -1 : atoi(object);
            if (frames[*frame_count].object >= *object_count) return -1;
            (*frame_count)++;
        } else {
            return -1;
        }
    }
    return 0;
}

int plugind_symbolizer_run(int input, int output) {
    static char request[max_request];
    read_request(input, request, sizeof request);
    static struct object objects[max_objects];
    static struct frame frames[max_frames];
    int object_count = 0, frame_count = 0;
    if (parse(request, objects, &object_count, frames, &frame_count) != 0) return 2;
    for (int index = 0; index < object_count; index++) objects[index].descriptor = open_object(objects[index].path);
    FILE *stream = fdopen(output, "w");
    if (stream == NULL) return 2;
    // Buffered before confinement: fdopen's buffer is allocated on first write otherwise.
    static char stream_buffer[64 * 1024];
    setvbuf(stream, stream_buffer, _IOFBF, sizeof stream_buffer);
    if (load_libdw() != 0) return 5;
    if (confine() != 0) return 3;

    Dwfl_Callbacks callbacks = {
        .find_elf = no_elf,
        .find_debuginfo = no_debuginfo,
        .section_address = libdw.offline_section_address,
    };
    Dwfl *dwfl = libdw.begin(&callbacks);
    if (dwfl == NULL) return 4;
    libdw.report_begin(dwfl);
    for (int index = 0; index < object_count; index++) {
        if (objects[index].descriptor < 0) continue;
        // On success libdw owns the descriptor.
        if (libdw.report_elf(dwfl, objects[index].path, objects[index].path, objects[index].descriptor,
                            objects[index].bias, false) == NULL) {
            close(objects[index].descriptor);
        }
    }
    libdw.report_end(dwfl, NULL, NULL);

    for (int index = 0; index < frame_count; index++) {
        // A return address is looked up one byte back: in the call, not in what follows it.
        Dwarf_Addr lookup = frames[index].address - (frames[index].index > 0 ? 1 : 0);
        Dwfl_Module *module = libdw.addrmodule(dwfl, lookup);
        if (module == NULL) continue;
        GElf_Off offset = 0;
        GElf_Sym symbol;
        const char *name = libdw.module_addrinfo(module, lookup, &offset, &symbol, NULL, NULL, NULL);
        const char *file = NULL;
        int line = 0;
        int object = frames[index].object;
        if (object >= 0 && objects[object].lines) {
            Dwfl_Line *source = libdw.module_getsrc(module, lookup);
            file = source != NULL ? libdw.lineinfo(source, NULL, &line, NULL, NULL, NULL) : line_from_units(module, lookup, &line);
        }
        if (name == NULL && file == NULL) continue;
        fprintf(stream, "%d\t", frames[index].index);
        if (name != NULL) {
            char *readable = demangled(name);
            put_field(stream, readable);
            free(readable);
        }
        fprintf(stream, "\t%llx\t", (unsigned long long)(name != NULL ? offset + (lookup != frames[index].address) : 0));
        if (file != NULL) put_field(stream, file);
        fprintf(stream, "\t%d\n", file != NULL ? line : 0);
    }
    fflush(stream);
    libdw.end(dwfl);
    return 0;
}
