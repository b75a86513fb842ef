/* The C side of the Go kit: the descriptor and the calls into the worker's host table, which
 * Go cannot call through function pointers itself. */
#ifndef PLUGIND_GO_KIT_H
#define PLUGIND_GO_KIT_H

#include <stdint.h>
#include <stdlib.h>
#include <plugind_plugin.h>

int32_t plugind_go_append(const plugind_host *host, plugind_plugin_response *response, const void *bytes, size_t length);
void plugind_go_set_error(const plugind_host *host, plugind_plugin_response *response, const char *message);
void plugind_go_log(const plugind_host *host, int32_t level, const char *message);
int32_t plugind_go_ask(const plugind_host *host, uint32_t connection, const void *bytes, size_t length, uint32_t timeout_milliseconds,
                       plugind_plugin_answer *answer);
void plugind_go_release_answer(const plugind_host *host, plugind_plugin_answer *answer);
_Bool plugind_go_is_cancelled(const plugind_host *host, uint64_t request);
void plugind_go_report_progress(const plugind_host *host, uint64_t request, uint64_t completed, uint64_t total);

#endif
