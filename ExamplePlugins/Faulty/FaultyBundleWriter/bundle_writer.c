// Tries to create a file inside its own bundle (the directory holding its library), or at the
// path given in the request.
#include <dlfcn.h>
#include <errno.h>
#include <faulty_plugin.h>
#include <fcntl.h>
#include <libgen.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char path[4096];
    faulty_request_text(request, path, sizeof path);
    if (path[0] == '\0') {
        Dl_info info;
        if (dladdr((void *)handle, &info) == 0 || info.dli_fname == NULL) return faulty_fail(response, "dladdr failed");
        char library[4096];
        snprintf(library, sizeof library, "%s", info.dli_fname);
        snprintf(path, sizeof path, "%s/written-by-plugin.txt", dirname(library));
    }
    char message[4200];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(message, sizeof message, "open %s for writing: %s", path, strerror(errno));
        return faulty_fail(response, message);
    }
    ssize_t ignored = write(fd, "hello\n", 6);
    (void)ignored;
    close(fd);
    snprintf(message, sizeof message, "wrote %s", path);
    return faulty_reply(response, message);
}

FAULTY_PLUGIN("Bundle writer", handle)
