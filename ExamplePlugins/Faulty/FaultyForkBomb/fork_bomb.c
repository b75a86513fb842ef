// Forks children that fork again, until fork fails or the tree holds 128 processes; every
// process but the worker then sleeps forever. (Bounded so that a machine without a process limit
// survives the test; the point is that all of them die with the worker.)
#include <faulty_plugin.h>
#include <sys/mman.h>
#include <unistd.h>

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    pid_t worker = getpid();
    int *count = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (count == MAP_FAILED) return faulty_fail(response, "mmap failed");
    *count = 1;
    for (int generation = 0; generation < 8; generation++) {
        if (__atomic_add_fetch(count, 1, __ATOMIC_SEQ_CST) > 128) break;
        if (fork() < 0) break;
    }
    if (getpid() != worker) {
        for (;;) pause();
    }
    char reply[64];
    snprintf(reply, sizeof reply, "forked until %d processes", *count > 128 ? 128 : *count);
    return faulty_reply(response, reply);
}

FAULTY_PLUGIN("Fork bomb", handle)
