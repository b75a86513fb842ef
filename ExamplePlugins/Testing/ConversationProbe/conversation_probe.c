// A plugin for the connection tests (ABI 2): it accepts or refuses connections, keeps a counter
// per connection, hears closes, asks the host in the ways a test names, and runs requests on
// several threads. Requests are text commands:
//   count                 the connection's own counter, incremented
//   closed                how many connections it heard close so far
//   ask:TEXT              asks the host TEXT on the request's connection and answers the answer
//   ask-wait:TEXT         the same with a deadline of a minute (for a close while it waits)
//   ask-slow:TEXT         the same with a deadline of 200 ms
//   ask-thread:TEXT       the same from a thread the plugin starts
//   ask-many:N:TEXT       N threads ask at once; answers "answered=A busy=B other=C"
//   ask-big               asks with 2 MiB, over the message limit
//   last-ask-error        the errno of the last ask that failed on any connection
//   together              waits up to 1 s for another request to run at the same time
//   ask-loop:N            asks the host N times with 64 bytes; answers how many were answered
//   spin:MS               uses MS milliseconds of CPU time, then answers "spun"
// A failed ask answers "ask failed: ERRNO CODE MESSAGE".
#include <errno.h>
#include <plugind_plugin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const plugind_host *host;
static atomic_int closed_connections;
static atomic_int last_ask_error;
static pthread_mutex_t meeting_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t meeting = PTHREAD_COND_INITIALIZER;
static int arrived;

struct connection_state {
    atomic_int counter;
};

static int32_t init(const plugind_host *given, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    host = given;
    return PLUGIND_PLUGIN_OK;
}

static int32_t accept_connection(void *state, const plugind_plugin_connection *connection, void **connection_state,
                                 plugind_plugin_response *refusal) {
    (void)state;
    // A plugin whose accept never returns (as hostile or broken code may).
    if (strstr(connection->host_identifier, "never-accepts") != NULL) {
        for (;;) pause();
    }
    if (strstr(connection->host_identifier, "refused") != NULL) {
        char reason[256];
        snprintf(reason, sizeof reason, "this plugin does not talk to %s", connection->host_identifier);
        host->set_error(refusal, reason);
        return 1;
    }
    struct connection_state *own = calloc(1, sizeof *own);
    if (own == NULL) return 2;
    *connection_state = own;
    return PLUGIND_PLUGIN_OK;
}

static void close_connection(void *state, const plugind_plugin_connection *connection, void *connection_state) {
    (void)state;
    (void)connection;
    free(connection_state);
    atomic_fetch_add(&closed_connections, 1);
}

static int32_t reply(plugind_plugin_response *response, const char *text) {
    host->append(response, (const uint8_t *)text, strlen(text));
    return PLUGIND_PLUGIN_OK;
}

/// Asks and writes the outcome into `out`: the answer, or "ask failed: …".
static void ask_into(uint32_t connection, const char *text, size_t length, uint32_t timeout, char *out, size_t capacity) {
    plugind_plugin_answer answer;
    int32_t status = host->ask(host->context, connection, (const uint8_t *)text, length, timeout, &answer);
    if (status == 0) {
        size_t count = answer.length < capacity - 1 ? answer.length : capacity - 1;
        memcpy(out, answer.bytes, count);
        out[count] = '\0';
    } else {
        atomic_store(&last_ask_error, status);
        snprintf(out, capacity, "ask failed: %d %d %s", status, answer.code, answer.message != NULL ? answer.message : "");
    }
    host->release_answer(host->context, &answer);
}

struct threaded_ask {
    uint32_t connection;
    const char *text;
    char result[512];
};

static void *ask_on_thread(void *argument) {
    struct threaded_ask *ask = argument;
    ask_into(ask->connection, ask->text, strlen(ask->text), 0, ask->result, sizeof ask->result);
    return NULL;
}

static int starts_with(const char *text, const char *prefix) {
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char command[1024];
    size_t length = request->length < sizeof command - 1 ? request->length : sizeof command - 1;
    memcpy(command, request->bytes, length);
    command[length] = '\0';
    char out[1024];

    if (strcmp(command, "count") == 0) {
        struct connection_state *own = request->connection_state;
        if (own == NULL) return reply(response, "no connection state");
        snprintf(out, sizeof out, "%d", atomic_fetch_add(&own->counter, 1) + 1);
        return reply(response, out);
    }
    if (strcmp(command, "closed") == 0) {
        snprintf(out, sizeof out, "%d", atomic_load(&closed_connections));
        return reply(response, out);
    }
    if (strcmp(command, "last-ask-error") == 0) {
        snprintf(out, sizeof out, "%d", atomic_load(&last_ask_error));
        return reply(response, out);
    }
    if (starts_with(command, "ask:") || starts_with(command, "ask-wait:") || starts_with(command, "ask-slow:")) {
        const char *text = strchr(command, ':') + 1;
        uint32_t timeout = starts_with(command, "ask-wait:") ? 60000 : starts_with(command, "ask-slow:") ? 200 : 0;
        ask_into(request->connection, text, strlen(text), timeout, out, sizeof out);
        return reply(response, out);
    }
    if (starts_with(command, "ask-thread:")) {
        struct threaded_ask ask = {.connection = request->connection, .text = command + strlen("ask-thread:")};
        pthread_t thread;
        if (pthread_create(&thread, NULL, ask_on_thread, &ask) != 0) return reply(response, "no thread");
        pthread_join(thread, NULL);
        return reply(response, ask.result);
    }
    if (starts_with(command, "ask-many:")) {
        int count = atoi(command + strlen("ask-many:"));
        const char *text = strchr(command + strlen("ask-many:"), ':');
        if (count < 1 || count > 32 || text == NULL) return reply(response, "bad ask-many");
        struct threaded_ask asks[32];
        pthread_t threads[32];
        int started = 0;
        for (int index = 0; index < count; index++) {
            asks[index].connection = request->connection;
            asks[index].text = text + 1;
            if (pthread_create(&threads[index], NULL, ask_on_thread, &asks[index]) == 0) started++;
            else break;
        }
        int answered = 0, busy = 0, other = 0;
        for (int index = 0; index < started; index++) {
            pthread_join(threads[index], NULL);
            char expected[64];
            snprintf(expected, sizeof expected, "ask failed: %d ", EBUSY);
            if (starts_with(asks[index].result, expected)) busy++;
            else if (starts_with(asks[index].result, "ask failed")) other++;
            else answered++;
        }
        snprintf(out, sizeof out, "answered=%d busy=%d other=%d", answered, busy, other);
        return reply(response, out);
    }
    if (strcmp(command, "ask-big") == 0) {
        size_t size = 2 << 20;
        char *big = calloc(1, size);
        if (big == NULL) return reply(response, "no memory");
        plugind_plugin_answer answer;
        int32_t status = host->ask(host->context, request->connection, (const uint8_t *)big, size, 0, &answer);
        host->release_answer(host->context, &answer);
        free(big);
        snprintf(out, sizeof out, "%d", status);
        return reply(response, out);
    }
    if (starts_with(command, "ask-loop:")) {
        int count = atoi(command + strlen("ask-loop:"));
        uint8_t question[64];
        memset(question, 'q', sizeof question);
        int answered = 0;
        for (int index = 0; index < count; index++) {
            plugind_plugin_answer answer;
            if (host->ask(host->context, request->connection, question, sizeof question, 0, &answer) == 0) answered++;
            host->release_answer(host->context, &answer);
        }
        snprintf(out, sizeof out, "%d", answered);
        return reply(response, out);
    }
    if (starts_with(command, "spin:")) {
        long milliseconds = atol(command + strlen("spin:"));
        struct timespec start, now;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
        volatile unsigned long counter = 0;
        do {
            for (int index = 0; index < 10000; index++) counter++;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < milliseconds);
        return reply(response, "spun");
    }
    if (strcmp(command, "together") == 0) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 1;
        pthread_mutex_lock(&meeting_lock);
        int generation = ++arrived;
        pthread_cond_broadcast(&meeting);
        int met = generation % 2 == 0;
        while (!met) {
            if (pthread_cond_timedwait(&meeting, &meeting_lock, &deadline) == ETIMEDOUT) break;
            met = arrived > generation;
        }
        if (!met) arrived = 0;
        pthread_mutex_unlock(&meeting_lock);
        return reply(response, met ? "together" : "alone");
    }
    snprintf(out, sizeof out, "unknown command: %s", command);
    host->set_error(response, out);
    return 1;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "Conversation probe",
    .version = "1.0.0",
    .init = init,
    .handle = handle,
    .concurrency = 4,
    .accept = accept_connection,
    .close = close_connection,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) {
    return &descriptor;
}
