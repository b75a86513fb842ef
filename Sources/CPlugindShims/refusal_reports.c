// What the sandbox refused, told to the host: the plugin library's calls of socket, connect,
// bind, ptrace and the open family are routed through wrappers (its GOT entries rewritten once,
// after dlopen, before its init) that call the C library's function and, when the call failed
// with the errno a layer gives, report the call, what it named and the layer. The plugin still
// gets its errno. Calls made by other libraries, or by system call directly, are not seen: this
// is a diagnosis for the plugin's author, not a security boundary (the layers are that).
#include "plugind_shims.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static plugind_shim_refusal_sink refusal_sink;
static _Atomic uint32_t dropped;
static _Atomic int64_t window_second = -1;
static _Atomic uint32_t window_count;

// At most this many reports a second; the others are counted and the count rides on the next.
enum { reports_per_second = 8 };

static void report(const char *call, const char *detail, int layer, int error) {
    if (refusal_sink == NULL) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int64_t second = (int64_t)now.tv_sec;
    if (atomic_exchange(&window_second, second) != second) atomic_store(&window_count, 0);
    if (atomic_fetch_add(&window_count, 1) >= reports_per_second) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    refusal_sink(call, detail, layer, error, atomic_exchange(&dropped, 0));
}

static const char *family_name(int domain, char *buffer, size_t size) {
    switch (domain) {
    case AF_UNIX: return "AF_UNIX";
    case AF_INET: return "AF_INET";
    case AF_INET6: return "AF_INET6";
    case AF_NETLINK: return "AF_NETLINK";
    case AF_PACKET: return "AF_PACKET";
    default: snprintf(buffer, size, "family %d", domain); return buffer;
    }
}

// The path of a UNIX socket address ("@name" for an abstract one), or the family.
static void describe_address(const struct sockaddr *address, socklen_t length, char *detail, size_t size) {
    char family[24];
    if (address == NULL || length < sizeof(sa_family_t)) {
        snprintf(detail, size, "no address");
        return;
    }
    if (address->sa_family == AF_UNIX && length > offsetof(struct sockaddr_un, sun_path)) {
        const struct sockaddr_un *unix_address = (const struct sockaddr_un *)address;
        size_t path_length = length - offsetof(struct sockaddr_un, sun_path);
        if (path_length > sizeof unix_address->sun_path) path_length = sizeof unix_address->sun_path;
        if (path_length > 0 && unix_address->sun_path[0] == '\0') {
            snprintf(detail, size, "@%.*s", (int)(path_length - 1), unix_address->sun_path + 1);
        } else {
            snprintf(detail, size, "%.*s", (int)strnlen(unix_address->sun_path, path_length), unix_address->sun_path);
        }
        return;
    }
    snprintf(detail, size, "%s", family_name(address->sa_family, family, sizeof family));
}

static int refusal_socket(int domain, int type, int protocol) {
    int result = socket(domain, type, protocol);
    if (result < 0 && (errno == EACCES || errno == EPERM || errno == EAFNOSUPPORT)) {
        int error = errno;
        char family[24];
        report("socket", family_name(domain, family, sizeof family), PLUGIND_SHIM_LAYER_SECCOMP, error);
        errno = error;
    }
    return result;
}

static void report_address(const char *call, const struct sockaddr *address, socklen_t length) {
    int error = errno;
    char detail[128];
    describe_address(address, length, detail, sizeof detail);
    // A missing path is the view's answer, a refused path Landlock's, the rest the filter's.
    int layer = PLUGIND_SHIM_LAYER_SECCOMP;
    if (error == ENOENT) {
        layer = PLUGIND_SHIM_LAYER_VIEW;
    } else if (error == EACCES && address != NULL && address->sa_family == AF_UNIX && detail[0] != '@') {
        layer = PLUGIND_SHIM_LAYER_LANDLOCK;
    }
    report(call, detail, layer, error);
    errno = error;
}

static int refusal_connect(int socket, const struct sockaddr *address, socklen_t length) {
    int result = connect(socket, address, length);
    if (result < 0 && (errno == ENOENT || errno == EACCES || errno == EPERM)) report_address("connect", address, length);
    return result;
}

static int refusal_bind(int socket, const struct sockaddr *address, socklen_t length) {
    int result = bind(socket, address, length);
    if (result < 0 && (errno == ENOENT || errno == EACCES || errno == EPERM)) report_address("bind", address, length);
    return result;
}

static long refusal_ptrace(int request, pid_t pid, void *address, void *data) {
    long result = ptrace((enum __ptrace_request)request, pid, address, data);
    if (result < 0 && errno == EPERM) {
        char detail[32];
        snprintf(detail, sizeof detail, "request %d", request);
        report("ptrace", detail, PLUGIND_SHIM_LAYER_SECCOMP, EPERM);
        errno = EPERM;
    }
    return result;
}

// EACCES from a path is Landlock's answer (or the file's own mode); EPERM the filter's (set-id
// modes). A missing file is not reported: most are just missing.
static void report_path(const char *call, const char *path) {
    if (errno != EACCES && errno != EPERM) return;
    int error = errno;
    report(call, path != NULL ? path : "(null)", error == EACCES ? PLUGIND_SHIM_LAYER_LANDLOCK : PLUGIND_SHIM_LAYER_SECCOMP, error);
    errno = error;
}

static mode_t mode_argument(int flags, va_list arguments) {
    return (flags & O_CREAT) != 0 || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(arguments, int) : 0;
}

static int refusal_open(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    int result = open(path, flags, mode);
    if (result < 0) report_path("open", path);
    return result;
}

static int refusal_openat(int directory, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    int result = openat(directory, path, flags, mode);
    if (result < 0) report_path("openat", path);
    return result;
}

static FILE *refusal_fopen(const char *path, const char *mode) {
    FILE *result = fopen(path, mode);
    if (result == NULL) report_path("fopen", path);
    return result;
}

static const struct {
    const char *name;
    void *wrapper;
} wrapped[] = {
    {"socket", (void *)refusal_socket}, {"connect", (void *)refusal_connect}, {"bind", (void *)refusal_bind},
    {"ptrace", (void *)refusal_ptrace}, {"open", (void *)refusal_open},       {"open64", (void *)refusal_open},
    {"openat", (void *)refusal_openat}, {"openat64", (void *)refusal_openat}, {"fopen", (void *)refusal_fopen},
    {"fopen64", (void *)refusal_fopen},
};

static void *wrapper_for(const char *name) {
    for (size_t index = 0; index < sizeof wrapped / sizeof wrapped[0]; index++) {
        if (strcmp(wrapped[index].name, name) == 0) return wrapped[index].wrapper;
    }
    return NULL;
}

// Rewrites one GOT slot. One in the RELRO segment is read-only since the loader finished, and
// made so again; any other is writable (and shares its page with data that must stay so).
static void patch_slot(void **slot, void *wrapper, uintptr_t relro_start, uintptr_t relro_end) {
    uintptr_t address = (uintptr_t)slot;
    if (address < relro_start || address >= relro_end) {
        *slot = wrapper;
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    void *start = (void *)(address & ~((uintptr_t)page - 1));
    if (mprotect(start, (size_t)page, PROT_READ | PROT_WRITE) != 0) return;
    *slot = wrapper;
    mprotect(start, (size_t)page, PROT_READ);
}

// The library's RELRO segment, from its program headers (mapped with its ELF header at its base).
static void relro_range(const struct link_map *map, uintptr_t *start, uintptr_t *end) {
    *start = *end = 0;
    const ElfW(Ehdr) *header = (const ElfW(Ehdr) *)map->l_addr;
    if (map->l_addr == 0 || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0) return;
    const ElfW(Phdr) *headers = (const ElfW(Phdr) *)(map->l_addr + header->e_phoff);
    for (int index = 0; index < header->e_phnum; index++) {
        if (headers[index].p_type != PT_GNU_RELRO) continue;
        *start = map->l_addr + headers[index].p_vaddr;
        *end = *start + headers[index].p_memsz;
    }
}

#if defined(__x86_64__)
enum { jump_slot = R_X86_64_JUMP_SLOT, global_data = R_X86_64_GLOB_DAT };
#elif defined(__aarch64__)
enum { jump_slot = R_AARCH64_JUMP_SLOT, global_data = R_AARCH64_GLOB_DAT };
#else
#error "refusal reports know the GOT relocations of x86_64 and aarch64 only"
#endif

// glibc relocates the dynamic section's addresses in place; another loader may not.
static uintptr_t absolute(uintptr_t value, uintptr_t bias) {
    return value < bias ? value + bias : value;
}

int plugind_shim_refusals_install(void *library, plugind_shim_refusal_sink sink) {
    struct link_map *map = NULL;
    if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_ld == NULL) return EINVAL;
    uintptr_t bias = (uintptr_t)map->l_addr;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = (const ElfW(Sym) *)absolute(entry->d_un.d_ptr, bias); break;
        case DT_STRTAB: strings = (const char *)absolute(entry->d_un.d_ptr, bias); break;
        case DT_JMPREL: tables[0] = (const ElfW(Rela) *)absolute(entry->d_un.d_ptr, bias); break;
        case DT_PLTRELSZ: sizes[0] = entry->d_un.d_val; break;
        case DT_RELA: tables[1] = (const ElfW(Rela) *)absolute(entry->d_un.d_ptr, bias); break;
        case DT_RELASZ: sizes[1] = entry->d_un.d_val; break;
        default: break;
        }
    }
    if (symbols == NULL || strings == NULL) return EINVAL;
    refusal_sink = sink;
    uintptr_t relro_start, relro_end;
    relro_range(map, &relro_start, &relro_end);
    for (int table = 0; table < 2; table++) {
        if (tables[table] == NULL) continue;
        for (size_t index = 0; index < sizes[table] / sizeof(ElfW(Rela)); index++) {
            const ElfW(Rela) *relocation = &tables[table][index];
            unsigned long type = ELF64_R_TYPE(relocation->r_info);
            if (type != jump_slot && type != global_data) continue;
            const ElfW(Sym) *symbol = &symbols[ELF64_R_SYM(relocation->r_info)];
            void *wrapper = wrapper_for(strings + symbol->st_name);
            if (wrapper != NULL) patch_slot((void **)(bias + relocation->r_offset), wrapper, relro_start, relro_end);
        }
    }
    return 0;
}
