// libseccomp, loaded when a filter is compiled rather than linked: the pre-forked launcher
// compiles every filter once and lets the library go before it forks, so that no spare or worker
// maps it (its relocated data would be every worker's own memory). Loaded from the system
// (Debian's libseccomp2), so that its fixes reach plugind without a rebuild.
#pragma once

#include <seccomp.h>

/// The libseccomp functions plugind calls, resolved by `libseccomp_load`.
struct libseccomp_functions {
    __typeof__(seccomp_init) *init;
    __typeof__(seccomp_release) *release;
    __typeof__(seccomp_attr_set) *attr_set;
    __typeof__(seccomp_rule_add) *rule_add;
    __typeof__(seccomp_rule_add_array) *rule_add_array;
    __typeof__(seccomp_syscall_resolve_name) *syscall_resolve_name;
    __typeof__(seccomp_export_bpf) *export_bpf;
    __typeof__(seccomp_load) *load;
};

/// The functions, valid from a successful `libseccomp_load` until `libseccomp_unload`.
extern struct libseccomp_functions libseccomp;

/// Loads libseccomp.so.2 and resolves every function, unless already loaded: 0, or ELIBACC when
/// the library or one of its functions cannot be found. The launcher loads it before it forks
/// and a worker started without one before its hello; only a spare whose launcher could not
/// compile the filters loads it inside its view, from the system library directories the view
/// binds for the plugin.
int libseccomp_load(void);

/// Unloads the library; the next `libseccomp_load` loads it again.
void libseccomp_unload(void);

/// Why the last `libseccomp_load` that tried to load the library failed, in the dynamic
/// loader's words ("" if it succeeded or none tried).
const char *libseccomp_failure(void);
