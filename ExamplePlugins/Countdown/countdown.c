// Countdown: a long-running plugin. The request is a number of steps (decimal text, default 20);
// each step takes 50 ms and is reported to the host as progress. Stops early when cancelled.
#include <plugind_plugin.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const plugind_host *host;

static int32_t countdown_init(const plugind_host *host_interface, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    host = host_interface;
    return PLUGIND_PLUGIN_OK;
}

static uint64_t parse_steps(const plugind_plugin_request *request) {
    uint64_t steps = 0;
    size_t index = 0;
    for (; index < request->length && request->bytes[index] >= '0' && request->bytes[index] <= '9'; index++) {
        steps = steps * 10 + (uint64_t)(request->bytes[index] - '0');
        if (steps > 100000) return 100000;
    }
    return index == 0 ? 20 : steps;
}

static int32_t countdown_handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    uint64_t steps = parse_steps(request);
    const struct timespec step_time = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
    for (uint64_t step = 0; step < steps; step++) {
        if (host->is_cancelled(host->context, request->identifier)) return PLUGIND_PLUGIN_OK;
        host->report_progress(host->context, request->identifier, step, steps);
        nanosleep(&step_time, NULL);
    }
    host->report_progress(host->context, request->identifier, steps, steps);
    char text[64];
    int length = snprintf(text, sizeof text, "counted down %llu steps\n", (unsigned long long)steps);
    host->append(response, (const uint8_t *)text, (size_t)length);
    return PLUGIND_PLUGIN_OK;
}

static const plugind_plugin descriptor = {
    .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
    .size = sizeof(plugind_plugin),
    .name = "Countdown",
    .version = "1.0.0",
    .init = countdown_init,
    .handle = countdown_handle,
};

PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
