/*
 * A C host on libplugind, for HostLibraryTests: each scenario prints what it saw, one fact per
 * line, and exits non-zero at the first thing that is not as the header promises. Every wait has
 * a deadline (poll with a timeout, timed condition waits): a broken library fails the test, it
 * never hangs it.
 *
 *   host_test discover POINT
 *   host_test updates POINT BUNDLE ASIDE     (moves BUNDLE out of its root and back)
 *   host_test send POINT                     (the first plugin: a blocking and an async send)
 *   host_test ask POINT                      (the greeter: its ask answered later, from another thread)
 *   host_test close-while-asked POINT ROUNDS (the hostile probe asks from 16 threads while the host
 *                                               closes each connection and frees the handler's
 *                                               context at once, as a C host does: AddressSanitizer
 *                                               reports a handler or completion that ran after
 *                                               plugind_connection_close returned)
 *   host_test call POINT                     (the function library: typed calls and their errors)
 *   host_test fail POINT TIMEOUT_MS INTERRUPTS  (a request that fails: a crash, a hang, a limit;
 *                                               INTERRUPTS 1 when the worker ends with it)
 *   host_test misuse                         (NULL, released and wrong handles; indexes out of range)
 *   host_test leak POINT                     (the sanitizer's positive control: a reply never freed)
 *   host_test descriptors POINT              (the host out of descriptors: a launch fails naming the
 *                                               limit, the running worker answers, then a launch works)
 *   host_test qsort POINT COUNT              (the first plugin's qsort of COUNT int64s with a C
 *                                               comparator of this host's: the order libc's qsort
 *                                               gives in this process, every comparison the host's)
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <plugind/plugind.h>

#define DEADLINE_SECONDS 120

static void fail(const char *what, plugind_error *error) {
    fprintf(stderr, "host_test: %s: %s\n", what, error != NULL ? plugind_error_message(error) : "(no error)");
    exit(1);
}

static void expect(int condition, const char *what) {
    if (!condition) {
        fprintf(stderr, "host_test: expected %s\n", what);
        exit(1);
    }
}

static struct timespec deadline(void) {
    struct timespec when;
    clock_gettime(CLOCK_REALTIME, &when);
    when.tv_sec += DEADLINE_SECONDS;
    return when;
}

static plugind_monitor *monitor_for(const char *point) {
    plugind_error *error = NULL;
    plugind_monitor *monitor = plugind_monitor_create(point, PLUGIND_SCOPE_NONE, &error);
    if (monitor == NULL) fail("plugind_monitor_create", error);
    return monitor;
}

static plugind_identity *first_identity(plugind_monitor *monitor) {
    plugind_error *error = NULL;
    plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
    if (identity == NULL) fail("plugind_monitor_identity_at(0)", error);
    return identity;
}

static plugind_process *start(plugind_identity *identity, plugind_interruption_handler handler, void *context) {
    plugind_error *error = NULL;
    plugind_process *process = plugind_process_create(identity, handler, context, &error);
    if (process == NULL) fail("plugind_process_create", error);
    return process;
}

/* The first plugin of `point`, started; the monitor and the identity are released. */
static plugind_process *start_first(const char *point, plugind_interruption_handler handler, void *context) {
    plugind_monitor *monitor = monitor_for(point);
    plugind_identity *identity = first_identity(monitor);
    plugind_monitor_release(monitor);
    plugind_process *process = start(identity, handler, context);
    plugind_identity_release(identity);
    return process;
}

static int discover(const char *point) {
    plugind_monitor *monitor = monitor_for(point);
    int64_t count = plugind_monitor_count(monitor);
    printf("count %lld\n", (long long)count);
    printf("unapproved %lld\n", (long long)plugind_monitor_unapproved_count(monitor));
    printf("disabled %lld\n", (long long)plugind_monitor_disabled_count(monitor));
    for (int64_t index = 0; index < count; index++) {
        plugind_error *error = NULL;
        plugind_identity *identity = plugind_monitor_identity_at(monitor, index, &error);
        if (identity == NULL) fail("plugind_monitor_identity_at", error);
        printf("identity %s %s %s\n", plugind_identity_bundle_identifier(identity), plugind_identity_extension_point(identity),
               plugind_identity_name(identity));
        size_t capabilities = plugind_identity_capability_count(identity);
        for (size_t capability = 0; capability < capabilities; capability++) {
            printf("capability %s\n", plugind_identity_capability(identity, capability));
        }
        expect(plugind_identity_capability(identity, capabilities) == NULL, "no capability past the last");
        plugind_identity_release(identity);
    }
    plugind_monitor_release(monitor);
    return 0;
}

/* Waits on the monitor's descriptor until an update shows `wanted` plugins. */
static void await_count(plugind_monitor *monitor, int64_t wanted) {
    time_t give_up = time(NULL) + DEADLINE_SECONDS;
    while (plugind_monitor_count(monitor) != wanted) {
        expect(time(NULL) < give_up, "the monitor's count to change before the deadline");
        struct pollfd watched = {.fd = plugind_monitor_fd(monitor), .events = POLLIN};
        int ready = poll(&watched, 1, 1000);
        expect(ready >= 0 || errno == EINTR, "poll on the monitor's descriptor to work");
        if (ready > 0) expect(plugind_monitor_update(monitor) >= 0, "plugind_monitor_update to succeed");
    }
}

static int updates(const char *point, const char *bundle, const char *aside) {
    plugind_monitor *monitor = monitor_for(point);
    expect(plugind_monitor_fd(monitor) >= 0, "a descriptor");
    printf("count %lld\n", (long long)plugind_monitor_count(monitor));
    expect(plugind_monitor_update(monitor) == 0, "no change before anything changed");
    expect(rename(bundle, aside) == 0, "the bundle to move aside");
    await_count(monitor, 0);
    printf("count %lld\n", (long long)plugind_monitor_count(monitor));
    expect(rename(aside, bundle) == 0, "the bundle to move back");
    await_count(monitor, 1);
    printf("count %lld\n", (long long)plugind_monitor_count(monitor));
    plugind_monitor_release(monitor);
    return 0;
}

struct completion_state {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int finished;
    char reply[256];
    plugind_error_code code;
};

static void on_sent(void *context, const uint8_t *reply, size_t length, plugind_error *error) {
    struct completion_state *state = context;
    pthread_mutex_lock(&state->lock);
    if (error != NULL) {
        state->code = plugind_error_code_of(error);
        snprintf(state->reply, sizeof state->reply, "error %s", plugind_error_message(error));
        plugind_error_free(error);
    } else {
        snprintf(state->reply, sizeof state->reply, "%.*s", (int)length, (const char *)reply);
    }
    state->finished = 1;
    pthread_cond_signal(&state->done);
    pthread_mutex_unlock(&state->lock);
}

static void await_completion(struct completion_state *state) {
    struct timespec when = deadline();
    pthread_mutex_lock(&state->lock);
    while (!state->finished) {
        expect(pthread_cond_timedwait(&state->done, &state->lock, &when) == 0, "the completion before the deadline");
    }
    pthread_mutex_unlock(&state->lock);
}

/* Opens a connection without an ask handler, sends `text` with the blocking call and prints the
 * reply; the reply is the caller's to free. */
static uint8_t *connect_and_send(plugind_process *process, const char *text, plugind_connection **connection) {
    plugind_error *error = NULL;
    *connection = plugind_connection_open(process, NULL, NULL, &error);
    if (*connection == NULL) fail("plugind_connection_open", error);
    uint8_t *reply = NULL;
    size_t length = 0;
    if (plugind_connection_send(*connection, (const uint8_t *)text, strlen(text), 0, &reply, &length, &error) != 0) {
        fail("plugind_connection_send", error);
    }
    printf("reply %.*s\n", (int)length, (const char *)reply);
    return reply;
}

static int send_scenario(const char *point) {
    plugind_process *process = start_first(point, NULL, NULL);
    plugind_error *error = NULL;
    plugind_connection *connection = NULL;
    plugind_bytes_free(connect_and_send(process, "hello", &connection));
    uint8_t *reply = NULL;
    size_t length = 0;

    struct completion_state state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    if (plugind_connection_send_async(connection, (const uint8_t *)"later", 5, 0, on_sent, &state, &error) != 0) {
        fail("plugind_connection_send_async", error);
    }
    await_completion(&state);
    printf("async %s\n", state.reply);

    plugind_connection_close(connection);
    /* A closed connection is a released handle: an error, not a crash. */
    expect(plugind_connection_send(connection, (const uint8_t *)"x", 1, 0, &reply, &length, &error) == -1, "send on a closed connection to fail");
    printf("closed %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    plugind_process_release(process);
    return 0;
}

/* The host out of descriptors: every number below a lowered RLIMIT_NOFILE taken. A launch fails
 * with an error that names the limit; the worker already running keeps answering; once the
 * descriptors are given back, a launch works again. */
static int descriptors_scenario(const char *point) {
    plugind_monitor *monitor = monitor_for(point);
    plugind_identity *identity = first_identity(monitor);
    /* The second plugin, launched while descriptors are out: not the one primed after the first
     * launch (a primed worker holds its pipes already and needs none). */
    plugind_error *error = NULL;
    plugind_identity *other = plugind_monitor_identity_at(monitor, 1, &error);
    if (other == NULL) fail("plugind_monitor_identity_at(1)", error);
    plugind_monitor_release(monitor);
    plugind_process *running = start(identity, NULL, NULL);
    plugind_connection *connection = NULL;
    plugind_bytes_free(connect_and_send(running, "before", &connection));

    struct rlimit saved;
    expect(getrlimit(RLIMIT_NOFILE, &saved) == 0, "getrlimit to work");
    enum { LOWERED = 512 };
    struct rlimit lowered = {.rlim_cur = LOWERED, .rlim_max = saved.rlim_max};
    expect(setrlimit(RLIMIT_NOFILE, &lowered) == 0, "setrlimit to lower the limit");
    static int held[LOWERED];
    int count = 0;
    while (count < LOWERED) {
        int descriptor = dup(STDERR_FILENO);
        if (descriptor < 0) break;
        held[count++] = descriptor;
    }
    expect(count < LOWERED && errno == EMFILE, "the descriptors to run out");

    plugind_process *refused = plugind_process_create(other, NULL, NULL, &error);
    expect(refused == NULL, "a launch without descriptors to fail");
    const char *message = plugind_error_message(error);
    int names_limit = strstr(message, "RLIMIT_NOFILE") != NULL;
    printf("launch %d %s\n", plugind_error_code_of(error), names_limit ? "names the limit" : message);
    plugind_error_free(error);
    error = NULL;

    uint8_t *reply = NULL;
    size_t length = 0;
    if (plugind_connection_send(connection, (const uint8_t *)"during", 6, 0, &reply, &length, &error) != 0) {
        fail("plugind_connection_send while out of descriptors", error);
    }
    printf("reply %.*s\n", (int)length, (const char *)reply);
    plugind_bytes_free(reply);

    for (int index = 0; index < count; index++) close(held[index]);
    expect(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit to restore the limit");
    plugind_process *again = start(other, NULL, NULL);
    plugind_connection *second = NULL;
    plugind_bytes_free(connect_and_send(again, "after", &second));
    plugind_connection_close(second);
    plugind_process_release(again);
    plugind_connection_close(connection);
    plugind_process_release(running);
    plugind_identity_release(other);
    plugind_identity_release(identity);
    return 0;
}

/* A reply the host never frees, on purpose: the leak check must report it (naming
 * plugind_connection_send), or it would pass leaking hosts too. */
static int leak_scenario(const char *point) {
    plugind_process *process = start_first(point, NULL, NULL);
    plugind_connection *connection = NULL;
    (void)connect_and_send(process, "kept", &connection);
    plugind_connection_close(connection);
    plugind_process_release(process);
    return 0;
}

/* The greeter's ask, answered from another thread after the handler returned. */
struct pending_ask {
    pthread_mutex_t lock;
    pthread_cond_t arrived;
    plugind_ask *ask;
    char question[64];
};

static void on_ask(void *context, plugind_ask *ask, const uint8_t *bytes, size_t length) {
    struct pending_ask *pending = context;
    pthread_mutex_lock(&pending->lock);
    snprintf(pending->question, sizeof pending->question, "%.*s", (int)length, (const char *)bytes);
    pending->ask = ask;
    pthread_cond_signal(&pending->arrived);
    pthread_mutex_unlock(&pending->lock);
}

static void *answer_later(void *context) {
    struct pending_ask *pending = context;
    struct timespec when = deadline();
    pthread_mutex_lock(&pending->lock);
    while (pending->ask == NULL) {
        if (pthread_cond_timedwait(&pending->arrived, &pending->lock, &when) != 0) break;
    }
    plugind_ask *ask = pending->ask;
    pthread_mutex_unlock(&pending->lock);
    if (ask != NULL) {
        expect(plugind_ask_respond(ask, (const uint8_t *)"Ada", 3) == 0, "the answer to be taken");
        expect(plugind_ask_respond(ask, (const uint8_t *)"Bob", 3) == -1, "a second answer to be refused");
    }
    return NULL;
}

static int ask_scenario(const char *point) {
    plugind_process *process = start_first(point, NULL, NULL);
    struct pending_ask pending = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, {0}};
    plugind_error *error = NULL;
    plugind_connection *connection = plugind_connection_open(process, on_ask, &pending, &error);
    if (connection == NULL) fail("plugind_connection_open", error);
    pthread_t answerer;
    expect(pthread_create(&answerer, NULL, answer_later, &pending) == 0, "a thread");
    uint8_t *reply = NULL;
    size_t length = 0;
    if (plugind_connection_send(connection, (const uint8_t *)"good morning", 12, 0, &reply, &length, &error) != 0) {
        fail("plugind_connection_send", error);
    }
    pthread_join(answerer, NULL);
    printf("question %s\n", pending.question);
    printf("reply %.*s\n", (int)length, (const char *)reply);
    plugind_bytes_free(reply);
    plugind_connection_close(connection);
    plugind_process_release(process);
    return 0;
}

/* A connection's context, freed as soon as plugind_connection_close returns: a handler or a
 * completion that touches it later is a use after free, which AddressSanitizer reports. */
struct asked_context {
    long calls;
    long completions;
};

static void on_counted_ask(void *context, plugind_ask *ask, const uint8_t *bytes, size_t length) {
    (void)bytes;
    (void)length;
    struct asked_context *asked = context;
    __atomic_fetch_add(&asked->calls, 1, __ATOMIC_SEQ_CST);
    plugind_ask_respond(ask, (const uint8_t *)"ok", 2);
}

static void on_counted_completion(void *context, const uint8_t *reply, size_t length, plugind_error *error) {
    (void)reply;
    (void)length;
    struct asked_context *asked = context;
    __atomic_fetch_add(&asked->completions, 1, __ATOMIC_SEQ_CST);
    plugind_error_free(error);
}

static int close_while_asked(const char *point, int rounds) {
    plugind_process *process = start_first(point, NULL, NULL);
    long handled = 0;
    for (int round = 0; round < rounds; round++) {
        struct asked_context *asked = calloc(1, sizeof *asked);
        expect(asked != NULL, "memory for a context");
        plugind_error *error = NULL;
        plugind_connection *connection = plugind_connection_open(process, on_counted_ask, asked, &error);
        if (connection == NULL) fail("plugind_connection_open", error);
        uint8_t *reply = NULL;
        size_t length = 0;
        const char *storm = "ask-storm -";
        if (plugind_connection_send(connection, (const uint8_t *)storm, strlen(storm), 0, &reply, &length, &error) != 0) {
            fail("plugind_connection_send", error);
        }
        plugind_bytes_free(reply);
        /* Close while the asks pour in: after some have been answered (an event counted by the
         * handler; the deadline is only a backstop), with an asynchronous send still running. */
        struct timespec until = deadline();
        while (__atomic_load_n(&asked->calls, __ATOMIC_SEQ_CST) < 20) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            expect(now.tv_sec < until.tv_sec, "the plugin's asks to reach the handler");
            sched_yield();
        }
        if (plugind_connection_send_async(connection, (const uint8_t *)storm, strlen(storm), 0, on_counted_completion, asked,
                                          &error) != 0) {
            fail("plugind_connection_send_async", error);
        }
        plugind_connection_close(connection);
        expect(__atomic_load_n(&asked->completions, __ATOMIC_SEQ_CST) == 1, "the completion to have run before close returned");
        handled += __atomic_load_n(&asked->calls, __ATOMIC_SEQ_CST);
        free(asked);
    }
    plugind_process_release(process);
    printf("rounds %d\n", rounds);
    printf("handled %s\n", handled >= 20L * rounds ? "enough" : "too few");
    return 0;
}

static plugind_value integer(plugind_type type, int64_t value) {
    plugind_value result = {.type = type};
    result.payload.integer = value;
    return result;
}

static plugind_value string(const char *text) {
    plugind_value result = {.type = PLUGIND_TYPE_STRING};
    result.payload.data.bytes = (const uint8_t *)text;
    result.payload.data.length = strlen(text);
    return result;
}

static int call_scenario(const char *point) {
    plugind_process *process = start_first(point, NULL, NULL);
    plugind_error *error = NULL;
    plugind_value result;

    plugind_value sum[] = {integer(PLUGIND_TYPE_INT64, 40), integer(PLUGIND_TYPE_INT64, 2)};
    if (plugind_process_call(process, "add_int64", sum, 2, 0, &result, &error) != 0) fail("add_int64", error);
    printf("add_int64 %lld\n", (long long)result.payload.integer);

    plugind_value word[] = {string("plugind")};
    if (plugind_process_call(process, "reverse_string", word, 1, 0, &result, &error) != 0) fail("reverse_string", error);
    printf("reverse_string %.*s\n", (int)result.payload.data.length, (const char *)result.payload.data.bytes);
    plugind_bytes_free((void *)result.payload.data.bytes);

    plugind_value wrong[] = {string("not a number"), integer(PLUGIND_TYPE_INT64, 2)};
    expect(plugind_process_call(process, "add_int64", wrong, 2, 0, &result, &error) == -1, "a wrong argument type to fail");
    printf("wrong-type %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    error = NULL;
    plugind_value seven[] = {integer(PLUGIND_TYPE_INT64, 7)};
    if (plugind_process_call(process, "identity_uint16", seven, 1, 0, &result, &error) != 0) fail("identity_uint16", error);
    printf("converted %d %llu\n", result.type, (unsigned long long)result.payload.unsigned_integer);
    plugind_value too_big[] = {integer(PLUGIND_TYPE_INT64, 300)};
    expect(plugind_process_call(process, "identity_int8", too_big, 1, 0, &result, &error) == -1, "an int8 of 300 to fail");
    printf("out-of-range %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    error = NULL;
    expect(plugind_process_call(process, "no_such_function", NULL, 0, 0, &result, &error) == -1, "an unknown function to fail");
    printf("unknown %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    plugind_process_release(process);
    return 0;
}

/* The comparator of the confined qsort: the two elements the library passes, counted. */
static int ascending_int64(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
    if (count != 2 || arguments[0].payload.data.length != 8 || arguments[1].payload.data.length != 8) {
        *message = strdup("not two int64s");
        return 1;
    }
    ++*(size_t *)context;
    int64_t a, b;
    memcpy(&a, arguments[0].payload.data.bytes, 8);
    memcpy(&b, arguments[1].payload.data.bytes, 8);
    result->type = PLUGIND_TYPE_INT32;
    result->payload.integer = a < b ? -1 : a > b;
    return 0;
}

/* The same order, for libc's qsort in this process. */
static int compare_int64(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

static int qsort_scenario(const char *point, size_t count) {
    plugind_process *process = start_first(point, NULL, NULL);
    int64_t *values = malloc(count * sizeof *values), *expected = malloc(count * sizeof *values);
    expect(values != NULL && expected != NULL, "memory for the values");
    /* splitmix64 from the time: other values every run, the whole int64 range. */
    uint64_t state = (uint64_t)time(NULL);
    for (size_t index = 0; index < count; index++) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        values[index] = (int64_t)(z ^ (z >> 31));
    }
    memcpy(expected, values, count * sizeof *values);
    qsort(expected, count, sizeof *expected, compare_int64);

    plugind_value arguments[2];
    memset(arguments, 0, sizeof arguments);
    arguments[0].type = PLUGIND_TYPE_BYTES;
    arguments[0].payload.data.bytes = (const uint8_t *)values;
    arguments[0].payload.data.length = count * sizeof *values;
    arguments[1] = integer(PLUGIND_TYPE_UINT64, sizeof *values);
    size_t comparisons = 0;
    plugind_callback comparator = {"compar", ascending_int64, &comparisons};
    plugind_call_result result;
    plugind_error *error = NULL;
    /* At most half an hour: each comparison is a round trip to this host. */
    if (plugind_process_call_callbacks(process, "qsort", arguments, 2, &comparator, 1, 1800000, &result, &error) != 0) {
        fail("qsort", error);
    }
    expect(result.output_count == 1 && strcmp(result.outputs[0].name, "base") == 0
               && result.outputs[0].value.payload.data.length == count * sizeof *values,
           "qsort's one output, base, of every element");
    int same = memcmp(result.outputs[0].value.payload.data.bytes, expected, count * sizeof *values) == 0;
    plugind_call_result_free(&result);
    plugind_process_release(process);
    free(values);
    free(expected);
    /* A comparison sort of n distinct values needs at least log2(n!) comparisons, more than the
       sum of floor(log2 k) for k up to n: 1.4 million for 100,000. */
    size_t needed = 0;
    for (size_t n = 2; n <= count; n++) needed += (size_t)(63 - __builtin_clzll((unsigned long long)n));
    printf("qsort %zu int64s: %s; %zu comparisons, %s\n", count, same ? "the order libc's qsort gives in process" : "NOT the order libc's qsort gives",
           comparisons, comparisons >= needed ? "each the host's" : "FEWER than a sort needs");
    return same && comparisons >= needed ? 0 : 1;
}

struct interruption_state {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int interrupted;
};

static void on_interruption(void *context) {
    struct interruption_state *state = context;
    pthread_mutex_lock(&state->lock);
    state->interrupted = 1;
    pthread_cond_signal(&state->done);
    pthread_mutex_unlock(&state->lock);
}

/* A request that must fail (a crash, a hang past its deadline, a limit): prints the error's code
 * and message, then waits for the interruption handler when the worker ended. */
static int fail_scenario(const char *point, uint32_t timeout_ms, int interrupts) {
    struct interruption_state state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    plugind_process *process = start_first(point, on_interruption, &state);
    plugind_error *error = NULL;
    plugind_connection *connection = plugind_connection_open(process, NULL, NULL, &error);
    if (connection == NULL) fail("plugind_connection_open", error);
    uint8_t *reply = NULL;
    size_t length = 0;
    expect(plugind_connection_send(connection, (const uint8_t *)"boom", 4, timeout_ms, &reply, &length, &error) == -1,
           "the request to fail");
    printf("failed %d %s\n", plugind_error_code_of(error), plugind_error_message(error));
    /* Where the plugin was: the innermost frames, and the index past the end refused. */
    size_t frames = plugind_error_frame_count(error);
    for (size_t index = 0; index < frames && index < 3; index++) printf("frame %s\n", plugind_error_frame(error, index));
    expect(plugind_error_frame(error, frames) == NULL, "no frame past the last");
    expect(plugind_error_frame_count(NULL) == 0 && plugind_error_frame(NULL, 0) == NULL, "no frames of a NULL error");
    plugind_error_free(error);
    struct timespec when = deadline();
    pthread_mutex_lock(&state.lock);
    while (interrupts && !state.interrupted) {
        expect(pthread_cond_timedwait(&state.done, &state.lock, &when) == 0, "the interruption handler before the deadline");
    }
    pthread_mutex_unlock(&state.lock);
    printf("interrupted %d\n", state.interrupted);
    plugind_connection_close(connection);
    plugind_process_release(process);
    return 0;
}

static int misuse(void) {
    plugind_error *error = NULL;
    expect(plugind_monitor_create(NULL, PLUGIND_SCOPE_NONE, &error) == NULL, "a NULL point to fail");
    printf("null-point %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    plugind_error_free(error); /* a second free is ignored */
    error = NULL;
    expect(plugind_monitor_create("org.example.x", (plugind_scope)7, &error) == NULL, "an unknown scope to fail");
    plugind_error_free(error);
    error = NULL;
    expect(plugind_monitor_count(NULL) == -1, "the count of NULL to be -1");
    expect(plugind_monitor_fd(NULL) == -1, "the descriptor of NULL to be -1");
    expect(plugind_monitor_update((plugind_monitor *)0x1234) == -1, "a made-up handle to be refused");
    plugind_monitor *monitor = monitor_for("org.plugind.tests.nothing-here");
    expect(plugind_monitor_identity_at(monitor, 5, &error) == NULL, "an index out of range to fail");
    printf("out-of-range %d %s\n", plugind_error_code_of(error), plugind_error_message(error));
    plugind_error_free(error);
    error = NULL;
    plugind_monitor_release(monitor);
    plugind_monitor_release(monitor); /* a second release is ignored */
    expect(plugind_monitor_count(monitor) == -1, "a released monitor to be refused");
    expect(plugind_identity_name(NULL) == NULL, "the name of NULL to be NULL");
    expect(plugind_identity_capability_count(NULL) == 0, "NULL to have no capabilities");
    expect(plugind_identity_capability(NULL, 0) == NULL, "the capability of NULL to be NULL");
    expect(plugind_process_create(NULL, NULL, NULL, &error) == NULL, "a process of NULL to fail");
    printf("null-identity %d\n", plugind_error_code_of(error));
    plugind_error_free(error);
    expect(plugind_error_code_of(NULL) == PLUGIND_ERROR_INVALID_ARGUMENT, "the code of NULL");
    expect(plugind_error_message(NULL) != NULL, "a message for NULL");
    expect(plugind_ask_respond(NULL, NULL, 0) == -1, "an answer to NULL to be refused");
    plugind_bytes_free(NULL);
    printf("misuse ok\n");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "misuse") == 0) return misuse();
    if (argc < 3) {
        fprintf(stderr, "usage: host_test discover|send|ask|call|leak POINT | updates POINT BUNDLE ASIDE | fail POINT TIMEOUT_MS INTERRUPTS | qsort POINT COUNT | misuse\n");
        return 2;
    }
    const char *scenario = argv[1], *point = argv[2];
    if (strcmp(scenario, "discover") == 0) return discover(point);
    if (strcmp(scenario, "updates") == 0 && argc == 5) return updates(point, argv[3], argv[4]);
    if (strcmp(scenario, "send") == 0) return send_scenario(point);
    if (strcmp(scenario, "leak") == 0) return leak_scenario(point);
    if (strcmp(scenario, "descriptors") == 0) return descriptors_scenario(point);
    if (strcmp(scenario, "ask") == 0) return ask_scenario(point);
    if (strcmp(scenario, "close-while-asked") == 0 && argc == 4) return close_while_asked(point, atoi(argv[3]));
    if (strcmp(scenario, "call") == 0) return call_scenario(point);
    if (strcmp(scenario, "fail") == 0 && argc == 5) return fail_scenario(point, (uint32_t)atoi(argv[3]), atoi(argv[4]));
    if (strcmp(scenario, "qsort") == 0 && argc == 4 && atol(argv[3]) > 0) return qsort_scenario(point, (size_t)atol(argv[3]));
    fprintf(stderr, "host_test: unknown scenario %s\n", scenario);
    return 2;
}
