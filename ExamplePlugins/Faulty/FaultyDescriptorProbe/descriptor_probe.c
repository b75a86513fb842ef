// Answers with the descriptors it can see open ("0 1 2 3 4 …"), found with fcntl alone so that
// no file-system access is needed: shows what a worker leaks into plugin code.
#include <faulty_plugin.h>
#include <fcntl.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    char list[4096] = "";
    size_t used = 0;
    for (int fd = 0; fd < 1024 && used < sizeof list - 8; fd++) {
        if (fcntl(fd, F_GETFD) != -1) used += (size_t)snprintf(list + used, sizeof list - used, used ? " %d" : "%d", fd);
    }
    return faulty_reply(response, list);
}

FAULTY_PLUGIN("Descriptor probe", handle)
