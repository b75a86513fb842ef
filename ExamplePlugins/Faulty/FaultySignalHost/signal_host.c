// Sends SIGWINCH (harmless if it arrives) to the process whose pid is the request, or to its
// parent when the request is empty, and reports whether the kernel let it.
#include <errno.h>
#include <faulty_plugin.h>
#include <signal.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[32];
    faulty_request_text(request, text, sizeof text);
    pid_t target = text[0] ? (pid_t)atoi(text) : getppid();
    char message[128];
    if (kill(target, SIGWINCH) != 0) {
        snprintf(message, sizeof message, "kill %d: %s", (int)target, strerror(errno));
        return faulty_fail(response, message);
    }
    snprintf(message, sizeof message, "signalled %d", (int)target);
    return faulty_reply(response, message);
}

FAULTY_PLUGIN("Signal host", handle)
