// Connects to the TCP port given in the request (decimal) on 127.0.0.1 and answers "connected",
// or fails with the reason.
#include <arpa/inet.h>
#include <errno.h>
#include <faulty_plugin.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[32];
    faulty_request_text(request, text, sizeof text);
    char message[160];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(message, sizeof message, "socket: %s", strerror(errno));
        return faulty_fail(response, message);
    }
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(text))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        snprintf(message, sizeof message, "connect: %s", strerror(errno));
        close(fd);
        return faulty_fail(response, message);
    }
    close(fd);
    return faulty_reply(response, "connected");
}

FAULTY_PLUGIN("Network client", handle)
