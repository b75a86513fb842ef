// mkostemp(3) and renameat2(2), which Swift's view of glibc does not offer (GNU extensions).
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

int plugind_shim_make_temporary_file(char *template_path, int *fd) {
    int result = mkostemp(template_path, O_CLOEXEC);
    if (result < 0) return errno;
    *fd = result;
    return 0;
}

int plugind_shim_exchange_paths(const char *first, const char *second) {
    return renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE) == 0 ? 0 : errno;
}
