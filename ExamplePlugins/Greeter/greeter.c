// Greets whoever its host names: for every request it asks the host, on the connection the request
// came on, whom to greet, and answers "Hello, <the host's answer>: <the request>".
#include <plugind_plugin.h>
#include <stdio.h>
#include <string.h>

static const plugind_host *host;

static int32_t init(const plugind_host *given, void **state, plugind_plugin_response *error) {
    (void)state;
    if (given->size < offsetof(plugind_host, release_answer) + sizeof given->release_answer || given->ask == NULL) {
        given->set_error(error, "this worker cannot ask its host (it predates plugin ABI 2)");
        return 1;
    }
    host = given;
    return PLUGIND_PLUGIN_OK;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    static const char question[] = "name?";
    plugind_plugin_answer answer;
    int32_t status = host->ask(host->context, request->connection, (const uint8_t *)question, sizeof question - 1, 0, &answer);
    if (status != 0) {
        char message[512];
        snprintf(message, sizeof message, "could not ask the host whom to greet: %s%s%s", strerror(status),
                 answer.message != NULL ? ": " : "", answer.message != NULL ? answer.message : "");
        host->release_answer(host->context, &answer);
        host->set_error(response, message);
        return 1;
    }
    static const char hello[] = "Hello, ";
    static const char separator[] = ": ";
    int32_t appended = host->append(response, (const uint8_t *)hello, sizeof hello - 1);
    if (appended == 0) appended = host->append(response, answer.bytes, answer.length);
    if (appended == 0) appended = host->append(response, (const uint8_t *)separator, sizeof separator - 1);
    if (appended == 0) appended = host->append(response, request->bytes, request->length);
    host->release_answer(host->context, &answer);
    if (appended != 0) {
        host->set_error(response, "the greeting is over the message limit");
        return 1;
    }
    return PLUGIND_PLUGIN_OK;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "Greeter",
    .version = "1.0.0",
    .init = init,
    .handle = handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) {
    return &descriptor;
}
