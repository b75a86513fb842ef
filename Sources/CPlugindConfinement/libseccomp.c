#include "libseccomp.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct libseccomp_functions libseccomp;

static void *library;
// Launchers, spares and workers compile filters on one thread, and the table above is read
// without a lock: the lock only keeps two threads from loading the library at once.
static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;
// Why the last load failed (dlerror's words), for the reports; empty once a load succeeds.
static char failure[256];

static int resolve(void) {
    struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&libseccomp.init, "seccomp_init"},
        {(void **)&libseccomp.release, "seccomp_release"},
        {(void **)&libseccomp.attr_set, "seccomp_attr_set"},
        {(void **)&libseccomp.rule_add, "seccomp_rule_add"},
        {(void **)&libseccomp.rule_add_array, "seccomp_rule_add_array"},
        {(void **)&libseccomp.syscall_resolve_name, "seccomp_syscall_resolve_name"},
        {(void **)&libseccomp.export_bpf, "seccomp_export_bpf"},
        {(void **)&libseccomp.load, "seccomp_load"},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (*symbols[index].slot == NULL) return ELIBACC;
    }
    return 0;
}

int libseccomp_load(void) {
    pthread_mutex_lock(&loading);
    int result = 0;
    if (library == NULL) {
        library = dlopen("libseccomp.so.2", RTLD_NOW | RTLD_LOCAL);
        result = library == NULL ? ELIBACC : resolve();
        if (result != 0) {
            const char *reason = dlerror();
            snprintf(failure, sizeof failure, "%s", reason != NULL ? reason : "libseccomp.so.2: a function is missing");
        } else {
            failure[0] = '\0';
        }
        if (result != 0 && library != NULL) {
            dlclose(library);
            library = NULL;
        }
        if (result != 0) memset(&libseccomp, 0, sizeof libseccomp);
    }
    pthread_mutex_unlock(&loading);
    return result;
}

void libseccomp_unload(void) {
    pthread_mutex_lock(&loading);
    if (library != NULL) dlclose(library);
    library = NULL;
    memset(&libseccomp, 0, sizeof libseccomp);
    pthread_mutex_unlock(&loading);
}

const char *libseccomp_failure(void) {
    return failure;
}
