// Reads the file whose path is the request and answers with its contents, or fails with the
// reason.
#include <errno.h>
#include <faulty_plugin.h>
#include <fcntl.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char path[4096];
    faulty_request_text(request, path, sizeof path);
    char message[4200];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(message, sizeof message, "open %s: %s", path, strerror(errno));
        return faulty_fail(response, message);
    }
    uint8_t buffer[4096];
    ssize_t length;
    while ((length = read(fd, buffer, sizeof buffer)) > 0) faulty_host->append(response, buffer, (size_t)length);
    close(fd);
    return PLUGIND_PLUGIN_OK;
}

FAULTY_PLUGIN("File reader", handle)
