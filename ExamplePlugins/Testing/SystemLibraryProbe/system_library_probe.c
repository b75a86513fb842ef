// A plugin for the launch tests that needs a system library the worker itself never loads
// (libarchive): every request is answered with that library's version string, so a test can see
// when the library is loaded into a worker (before the plugin, by a primed worker) and that the
// plugin then uses it.
#include <archive.h>
#include <plugind_plugin.h>
#include <string.h>

static const plugind_host *host;

static int32_t init(const plugind_host *given, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    host = given;
    return PLUGIND_PLUGIN_OK;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    (void)request;
    const char *version = archive_version_string();
    host->append(response, (const uint8_t *)version, strlen(version));
    return PLUGIND_PLUGIN_OK;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "System library probe",
    .version = "1.0.0",
    .init = init,
    .handle = handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
