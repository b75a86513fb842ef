#include "kit.h"
#include "_cgo_export.h"

/* The descriptor. Its name, version and concurrency come from the plugin's kit.Register, read
 * on the first call of the entry point: an exported Go function waits until the Go runtime and
 * the plugin's init functions have run (in c-shared mode they run on a thread of their own when
 * the library is loaded). */
static plugind_plugin descriptor;

static int32_t kit_init(const plugind_host *host, void **state, plugind_plugin_response *error) {
    uintptr_t handle = 0;
    int32_t status = plugindGoInit((plugind_host *)host, error, &handle);
    *state = (void *)handle;
    return status;
}

static int32_t kit_handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    return plugindGoHandle((uintptr_t)state, (plugind_plugin_request *)request, response);
}

static void kit_deinit(void *state) { plugindGoDeinit((uintptr_t)state); }

static int32_t kit_accept(void *state, const plugind_plugin_connection *connection, void **connection_state,
                          plugind_plugin_response *refusal) {
    uintptr_t handle = 0;
    int32_t status = plugindGoAccept((uintptr_t)state, connection->identifier, (char *)connection->host_identifier, refusal, &handle);
    *connection_state = (void *)handle;
    return status;
}

static void kit_close(void *state, const plugind_plugin_connection *connection, void *connection_state) {
    plugindGoClose((uintptr_t)state, connection->identifier, (uintptr_t)connection_state);
}

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) {
    if (descriptor.handle == NULL) {
        descriptor.abi_version = PLUGIND_PLUGIN_ABI_VERSION;
        descriptor.size = sizeof(plugind_plugin);
        descriptor.name = plugindGoName();
        descriptor.version = plugindGoVersion();
        descriptor.concurrency = (uint32_t)plugindGoConcurrency();
        descriptor.init = kit_init;
        descriptor.deinit = kit_deinit;
        descriptor.accept = kit_accept;
        descriptor.close = kit_close;
        descriptor.handle = kit_handle;
    }
    return &descriptor;
}

int32_t plugind_go_append(const plugind_host *host, plugind_plugin_response *response, const void *bytes, size_t length) {
    return host->append(response, (const uint8_t *)bytes, length);
}

void plugind_go_set_error(const plugind_host *host, plugind_plugin_response *response, const char *message) {
    host->set_error(response, message);
}

void plugind_go_log(const plugind_host *host, int32_t level, const char *message) {
    host->log(host->context, (plugind_plugin_log_level)level, message);
}

int32_t plugind_go_ask(const plugind_host *host, uint32_t connection, const void *bytes, size_t length, uint32_t timeout_milliseconds,
                       plugind_plugin_answer *answer) {
    if (host->abi_version < 2 || host->ask == NULL) return 95; /* ENOTSUP */
    return host->ask(host->context, connection, (const uint8_t *)bytes, length, timeout_milliseconds, answer);
}

void plugind_go_release_answer(const plugind_host *host, plugind_plugin_answer *answer) {
    if (host->release_answer != NULL) host->release_answer(host->context, answer);
}

_Bool plugind_go_is_cancelled(const plugind_host *host, uint64_t request) { return host->is_cancelled(host->context, request); }

void plugind_go_report_progress(const plugind_host *host, uint64_t request, uint64_t completed, uint64_t total) {
    host->report_progress(host->context, request, completed, total);
}
