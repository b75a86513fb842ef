/*
 * The C version of plugind-example-host: runs every available text filter on its input, then
 * lets every available greeter greet it, answering the greeter's question (whom to greet) from
 * the host. Build: make (with plugind-dev installed: pkg-config plugind).
 *
 *   text_host [--name NAME] TEXT...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plugind/plugind.h>

static const char *filters = "org.plugind.examples.text-filters";
static const char *greeters = "org.plugind.examples.greeters";

/* Answers "whom to greet?" at once, from inside the handler. */
static void answer_name(void *context, plugind_ask *ask, const uint8_t *bytes, size_t length) {
    (void)bytes;
    (void)length;
    const char *name = context;
    plugind_ask_respond(ask, (const uint8_t *)name, strlen(name));
}

/* Runs every usable plugin of `point` on `text`, each in its own confined process. */
static int run_all(const char *point, const char *text, plugind_ask_handler ask, void *context) {
    plugind_error *error = NULL;
    plugind_monitor *monitor = plugind_monitor_create(point, PLUGIND_SCOPE_NONE, &error);
    if (monitor == NULL) {
        fprintf(stderr, "text_host: %s\n", plugind_error_message(error));
        plugind_error_free(error);
        return 1;
    }
    int failures = 0;
    for (int64_t index = 0; index < plugind_monitor_count(monitor); index++) {
        plugind_identity *identity = plugind_monitor_identity_at(monitor, index, NULL);
        const char *name = plugind_identity_name(identity);
        plugind_process *process = plugind_process_create(identity, NULL, NULL, &error);
        plugind_connection *connection = process != NULL ? plugind_connection_open(process, ask, context, &error) : NULL;
        uint8_t *reply = NULL;
        size_t length = 0;
        if (connection != NULL &&
            plugind_connection_send(connection, (const uint8_t *)text, strlen(text), 0, &reply, &length, &error) == 0) {
            printf("%s: %.*s\n", name, (int)length, (const char *)reply);
            plugind_bytes_free(reply);
        } else {
            fprintf(stderr, "text_host: %s: %s\n", name, plugind_error_message(error));
            plugind_error_free(error);
            error = NULL;
            failures++;
        }
        plugind_connection_close(connection);
        plugind_process_release(process);
        plugind_identity_release(identity);
    }
    int64_t waiting = plugind_monitor_unapproved_count(monitor);
    if (waiting > 0) fprintf(stderr, "note: %lld more plugin(s) of %s wait for approval\n", (long long)waiting, point);
    plugind_monitor_release(monitor);
    return failures;
}

int main(int argc, char **argv) {
    const char *name = "world";
    char text[4096] = "";
    for (int index = 1; index < argc; index++) {
        if (strcmp(argv[index], "--name") == 0 && index + 1 < argc) {
            name = argv[++index];
        } else {
            if (text[0] != '\0') strncat(text, " ", sizeof text - strlen(text) - 1);
            strncat(text, argv[index], sizeof text - strlen(text) - 1);
        }
    }
    int failures = run_all(filters, text, NULL, NULL);
    failures += run_all(greeters, text, answer_name, (void *)name);
    return failures == 0 ? 0 : 1;
}
