// mkostemp(3), which Swift's view of glibc does not offer (it is a GNU extension).
#include "plugind_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

int plugind_shim_make_temporary_file(char *template_path, int *fd) {
    int result = mkostemp(template_path, O_CLOEXEC);
    if (result < 0) return errno;
    *fd = result;
    return 0;
}
