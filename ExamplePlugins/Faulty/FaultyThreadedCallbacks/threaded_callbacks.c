// Calls the host's callbacks from threads of its own while a request runs, and keeps logging
// from them after the request returns, and from a thread its init starts while the worker goes
// on to answer the host: what plugind_plugin.h promises is safe. Under ThreadSanitizer this shows
// whether the worker's side of the callbacks is.
#include <faulty_plugin.h>
#include <pthread.h>

enum { thread_count = 4, messages_per_thread = 200 };

static void *chatter(void *argument) {
    uint64_t request = (uint64_t)(uintptr_t)argument;
    for (int index = 0; index < messages_per_thread; index++) {
        faulty_host->log(faulty_host->context, PLUGIND_PLUGIN_LOG_DEBUG, "from a plugin thread");
        uint8_t byte = (uint8_t)index;
        faulty_host->post_message(faulty_host->context, request, &byte, 1);
        faulty_host->report_progress(faulty_host->context, request, (uint64_t)index, messages_per_thread);
    }
    return NULL;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    pthread_t threads[thread_count];
    for (int index = 0; index < thread_count; index++) {
        pthread_create(&threads[index], NULL, chatter, (void *)(uintptr_t)request->identifier);
    }
    for (int index = 0; index < thread_count; index++) pthread_join(threads[index], NULL);
    // Left running: still logging while the host may already be hanging up.
    pthread_t straggler;
    if (pthread_create(&straggler, NULL, chatter, NULL) == 0) pthread_detach(straggler);
    return faulty_reply(response, "done");
}

static void *init_chatter(void *argument) {
    (void)argument;
    for (int index = 0; index < messages_per_thread; index++) {
        faulty_host->log(faulty_host->context, PLUGIND_PLUGIN_LOG_DEBUG, "from the thread init started");
    }
    return NULL;
}

/// Starts a thread that logs while the worker goes on to send its `ready`.
static int32_t init_with_thread(const plugind_host *host, void **state, plugind_plugin_response *error) {
    int32_t status = faulty_init(host, state, error);
    pthread_t thread;
    if (pthread_create(&thread, NULL, init_chatter, NULL) == 0) pthread_detach(thread);
    return status;
}

FAULTY_PLUGIN_WITH_INIT("Threaded callbacks", init_with_thread, handle)
