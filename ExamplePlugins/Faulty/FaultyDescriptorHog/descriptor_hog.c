// Opens /dev/null until open() fails, keeps them all, and reports how far it got.
#include <errno.h>
#include <faulty_plugin.h>
#include <fcntl.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    int opened = 0;
    for (;;) {
        if (open("/dev/null", O_RDONLY) < 0) break;
        opened++;
    }
    char message[128];
    snprintf(message, sizeof message, "open failed after %d descriptors: %s", opened, strerror(errno));
    return faulty_fail(response, message);
}

FAULTY_PLUGIN("Descriptor hog", handle)
