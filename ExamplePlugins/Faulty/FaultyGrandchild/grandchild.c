// Leaves a grandchild behind: forks, the child starts a new session and forks again, and the
// grandchild renames itself and sleeps forever. The request is "NAME" or "NAME hang"; the name is
// at most 15 characters, and with "hang" the request itself never returns.
#include <faulty_plugin.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[64];
    faulty_request_text(request, text, sizeof text);
    char *space = strchr(text, ' ');
    int hang = space != NULL && strcmp(space + 1, "hang") == 0;
    if (space != NULL) *space = '\0';
    char name[16];
    snprintf(name, sizeof name, "%s", text[0] ? text : "orphan");

    int ready[2];
    if (pipe(ready) != 0) return faulty_fail(response, "pipe failed");
    pid_t child = fork();
    if (child < 0) return faulty_fail(response, "fork failed");
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            prctl(PR_SET_NAME, name, 0, 0, 0);
            ssize_t ignored = write(ready[1], "r", 1);
            (void)ignored;
            for (;;) pause();
        }
        _exit(0);
    }
    waitpid(child, NULL, 0);
    char byte;
    ssize_t ignored = read(ready[0], &byte, 1);
    (void)ignored;
    close(ready[0]);
    close(ready[1]);
    if (hang) {
        for (;;) pause();
    }
    return faulty_reply(response, "grandchild running");
}

FAULTY_PLUGIN("Grandchild", handle)
