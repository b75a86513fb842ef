/*
 * Shared boilerplate of the faulty example plugins: each one misbehaves in exactly one way so that
 * a test can check how plugind contains it. Never install these.
 */
#ifndef FAULTY_PLUGIN_H
#define FAULTY_PLUGIN_H

#include <plugind_plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const plugind_host *faulty_host;

static inline int32_t faulty_init(const plugind_host *host, void **state, plugind_plugin_response *error) {
    (void)state;
    (void)error;
    faulty_host = host;
    return PLUGIND_PLUGIN_OK;
}

/// Copies the request into a NUL-terminated string (truncated to `capacity - 1` bytes).
static inline void faulty_request_text(const plugind_plugin_request *request, char *text, size_t capacity) {
    size_t length = request->length < capacity - 1 ? request->length : capacity - 1;
    memcpy(text, request->bytes, length);
    text[length] = '\0';
}

static inline int32_t faulty_reply(plugind_plugin_response *response, const char *text) {
    faulty_host->append(response, (const uint8_t *)text, strlen(text));
    return PLUGIND_PLUGIN_OK;
}

static inline int32_t faulty_fail(plugind_plugin_response *response, const char *message) {
    faulty_host->set_error(response, message);
    return 1;
}

/// A plugin whose `init` is `init_function` (which calls `faulty_init` first).
#define FAULTY_PLUGIN_WITH_INIT(display_name, init_function, handle_function)                     \
    static const plugind_plugin faulty_descriptor = {                                            \
        .abi_version = PLUGIND_PLUGIN_ABI_VERSION,                                               \
        .size = sizeof(plugind_plugin),                                                          \
        .name = display_name,                                                                    \
        .version = "1.0.0",                                                                      \
        .init = init_function,                                                                   \
        .handle = handle_function,                                                               \
    };                                                                                           \
    PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &faulty_descriptor; }

#define FAULTY_PLUGIN(display_name, handle_function) FAULTY_PLUGIN_WITH_INIT(display_name, faulty_init, handle_function)

#endif
