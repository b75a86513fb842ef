/*
 * plugind_plugin.h — the plugind plugin ABI.
 *
 * A plugin is a shared library that exports one symbol, `plugind_plugin_entry`, returning a
 * pointer to a `plugind_plugin` descriptor. plugind loads it inside a separate worker process,
 * never inside the host application, so a crash or hang in the plugin cannot take the host down.
 *
 * Rules that hold for every function in this file:
 *  - All strings are NUL-terminated UTF-8.
 *  - The worker calls `init` and `deinit` once each. It calls `handle` (and `accept` and `close`)
 *    from as many threads at once as the plugin's concurrency (`plugind_plugin.concurrency`, or
 *    the manifest's `concurrency`; 1 by default: one call at a time).
 *  - While a plugin waits in `ask`, the host may send a request on the same connection that the
 *    host's answer depends on: the worker runs it on the waiting thread, calling `handle` again
 *    (re-entered) before `ask` returns. A plugin that holds a lock across `ask` must allow that.
 *  - The host callbacks in `plugind_host` may be called from any thread the plugin creates.
 *  - Nothing crosses this boundary but C types and byte buffers; the owner of every buffer is
 *    written beside its field.
 *  - stdin is /dev/null, stdout and stderr go to the host's diagnostics; printing never disturbs
 *    the protocol. Descriptors 3 and 4 carry the protocol and are close-on-exec: do not touch them.
 *
 * Self-contained C11: includes only <stdint.h> and <stddef.h>.
 */
#ifndef PLUGIND_PLUGIN_H
#define PLUGIND_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(__clang__) && !defined(_Nonnull)
#define _Nonnull
#define _Nullable
#endif

/// C's _Bool, spelt so that C++ (the C++ kit, plugind_plugin.hpp) reads the header too: the two
/// have the same size and representation.
#ifdef __cplusplus
#define PLUGIND_PLUGIN_BOOL bool
#else
#define PLUGIND_PLUGIN_BOOL _Bool
#endif

/// The ABI version this header describes. Bumped on any change to the layout of a struct below.
/// The worker loads plugins built for version 1 (requests only, one connection) and 2
/// (connections, asks, concurrency); it refuses any other version.
#define PLUGIND_PLUGIN_ABI_VERSION 2

/// The name of the one symbol a plugin exports.
#define PLUGIND_PLUGIN_ENTRY_SYMBOL "plugind_plugin_entry"

/// Return value of `init` and `handle` on success. Any positive value is a plugin-defined error
/// code; the host receives it with the message set through `plugind_host.set_error`.
/// Negative values are reserved for plugind.
#define PLUGIND_PLUGIN_OK 0

/// Severity of a log line sent through `plugind_host.log`.
typedef enum plugind_plugin_log_level {
    PLUGIND_PLUGIN_LOG_DEBUG = 0,
    PLUGIND_PLUGIN_LOG_INFO = 1,
    PLUGIND_PLUGIN_LOG_WARNING = 2,
    PLUGIND_PLUGIN_LOG_ERROR = 3,
} plugind_plugin_log_level;

/// The response being built for one request (or the error report of `init`).
/// Opaque: owned by the worker, valid only until the call it was passed to returns.
typedef struct plugind_plugin_response plugind_plugin_response;

/// A connection a host opened to the plugin (ABI 2). Owned by the worker; valid until `close`
/// returns for it.
typedef struct plugind_plugin_connection {
    /// Unique among the connections of one worker; pass it to `ask`.
    uint32_t identifier;
    /// The identifier of the host application that opened it (`AppExtensionHost.identifier`).
    const char *_Nonnull host_identifier;
} plugind_plugin_connection;

/// One request from the host.
typedef struct plugind_plugin_request {
    /// Unique among the requests of one worker; pass it to `post_message` and `is_cancelled`.
    uint64_t identifier;
    /// The request bytes. Owned by the worker; valid until `handle` returns; never NULL
    /// (points to an empty buffer when `length` is 0).
    const uint8_t *_Nonnull bytes;
    size_t length;
    /// ABI 2: the connection the request came on (0 for none), to `ask` on; and the state the
    /// plugin's `accept` stored for it (NULL without `accept`).
    uint32_t connection;
    void *_Nullable connection_state;
} plugind_plugin_request;

/// The host's answer to an `ask` (ABI 2). Owned by the worker until `release_answer`.
typedef struct plugind_plugin_answer {
    /// The answer bytes when `ask` returned 0; never NULL then.
    const uint8_t *_Nullable bytes;
    size_t length;
    /// When `ask` returned EREMOTEIO: the code and message the host's handler failed with.
    int32_t code;
    const char *_Nullable message;
} plugind_plugin_answer;

/// What the worker offers the plugin. Passed to `init`; the pointer and everything it points to
/// stays valid until `deinit` returns, so a plugin may keep it in its state.
typedef struct plugind_host {
    /// `PLUGIND_PLUGIN_ABI_VERSION` of the worker.
    uint32_t abi_version;
    /// `sizeof(plugind_host)` as the worker was built; fields beyond it are absent.
    uint32_t size;
    /// Passed back as the first argument of every callback below. Owned by the worker.
    void *_Nullable context;

    /// Sends one log line to the host. `message` is copied before the call returns.
    /// Thread-safe.
    void (*_Nonnull log)(void *_Nullable context, plugind_plugin_log_level level,
                         const char *_Nonnull message);

    /// Sends bytes to the host unprompted (an event). `request_identifier` ties it to a request
    /// in progress, or is 0. `bytes` is copied before the call returns. Returns 0, or an errno
    /// value when the host is gone. Thread-safe.
    int32_t (*_Nonnull post_message)(void *_Nullable context, uint64_t request_identifier,
                                     const uint8_t *_Nullable bytes, size_t length);

    /// Reports progress of a request: `completed` out of `total` units (total 0 = unknown).
    /// Returns 0, or an errno value when the host is gone. Thread-safe.
    int32_t (*_Nonnull report_progress)(void *_Nullable context, uint64_t request_identifier,
                                        uint64_t completed, uint64_t total);

    /// True once the host has cancelled the request or given up waiting for it. A long-running
    /// `handle` should poll it and return early; what it returns then is discarded.
    /// Call it only from the thread running `handle`.
    PLUGIND_PLUGIN_BOOL (*_Nonnull is_cancelled)(void *_Nullable context, uint64_t request_identifier);

    /// Appends `length` bytes to `response`. The bytes are copied before the call returns.
    /// Returns 0, or ENOMEM / EMSGSIZE when the response would exceed the worker's limits.
    int32_t (*_Nonnull append)(plugind_plugin_response *_Nonnull response,
                               const uint8_t *_Nullable bytes, size_t length);

    /// Makes room for `length` more bytes at the end of `response` and returns where to write
    /// them, so large responses need not be copied. The memory is owned by the worker and valid
    /// until the next call on `response` or until `handle` returns. NULL when out of memory or
    /// over the message limit.
    uint8_t *_Nullable (*_Nonnull reserve)(plugind_plugin_response *_Nonnull response,
                                           size_t length);

    /// Sets the human-readable message that accompanies a non-zero return from `init`, `handle`
    /// or `accept`. `message` is copied before the call returns.
    void (*_Nonnull set_error)(plugind_plugin_response *_Nonnull response,
                               const char *_Nonnull message);

    /// ABI 2 (present when `size` covers it). Asks the host on `connection` and blocks the
    /// calling thread until the answer, an error, or `timeout_milliseconds` (0: the request
    /// timeout of the plugin's limits). Callable from any thread, also while handling a request.
    /// Returns 0 with the answer in `*answer` (release it with `release_answer`), or:
    ///  - ENOTSUP: the host gave this connection no request handler;
    ///  - EREMOTEIO: the host's handler failed; `answer->code` and `answer->message` say how
    ///    (release the answer too);
    ///  - ETIMEDOUT: no answer in time;
    ///  - ECONNRESET: the connection was closed, or the host is going away;
    ///  - EBUSY: too many asks of this connection are waiting already (the host allows 64);
    ///  - EMSGSIZE: `length` is over the message limit;
    ///  - ELOOP: this thread already waits for 16 asks nested in one another (each answered by a
    ///    host handler that sent a request, which asked again): a deeper one would overflow the
    ///    thread's stack;
    ///  - EINVAL: no such connection.
    int32_t (*_Nullable ask)(void *_Nullable context, uint32_t connection,
                             const uint8_t *_Nullable bytes, size_t length,
                             uint32_t timeout_milliseconds, plugind_plugin_answer *_Nonnull answer);

    /// ABI 2. Frees what `ask` put in `*answer`.
    void (*_Nullable release_answer)(void *_Nullable context, plugind_plugin_answer *_Nonnull answer);
} plugind_host;

/// The descriptor a plugin's entry symbol returns. It must stay valid (usually `static const`)
/// for as long as the library is loaded.
typedef struct plugind_plugin {
    /// Set to `PLUGIND_PLUGIN_ABI_VERSION`.
    uint32_t abi_version;
    /// Set to `sizeof(plugind_plugin)`.
    uint32_t size;
    /// Display name and version; static strings owned by the plugin. May be NULL.
    const char *_Nullable name;
    const char *_Nullable version;

    /// Optional. Called once, before the first request. Store per-instance state in `*state`
    /// (owned by the plugin, released in `deinit`). Return PLUGIND_PLUGIN_OK, or an error code
    /// with a message set on `error`; the worker then reports a load failure and exits.
    int32_t (*_Nullable init)(const plugind_host *_Nonnull host, void *_Nullable *_Nonnull state,
                              plugind_plugin_response *_Nonnull error);

    /// Required. Answers one request by appending the response bytes to `response`.
    /// Return PLUGIND_PLUGIN_OK, or a positive error code with a message set through
    /// `host->set_error(response, …)`; the bytes appended so far are then discarded.
    int32_t (*_Nonnull handle)(void *_Nullable state,
                               const plugind_plugin_request *_Nonnull request,
                               plugind_plugin_response *_Nonnull response);

    /// Optional. Called once when the host ends the process in an orderly way; releases
    /// `state`. Not called when the worker is killed.
    void (*_Nullable deinit)(void *_Nullable state);

    // ABI 2 (read only when `abi_version` is 2).

    /// How many requests `handle` may run at once, on as many threads; 0 or 1: one at a time.
    /// The manifest's `concurrency` may lower it. Every request's deadline counts the time it
    /// waits for a free thread.
    uint32_t concurrency;
    uint32_t reserved;

    /// Optional. A host opened `connection`: return PLUGIND_PLUGIN_OK to accept it, storing any
    /// state of its own in `*connection_state` (passed back in each request and to `close`),
    /// or a positive code with a reason set through `host->set_error(refusal, …)`: the host's
    /// `makeConnection` then throws `connectionRefused` with that reason. Without it every
    /// connection is accepted.
    int32_t (*_Nullable accept)(void *_Nullable state, const plugind_plugin_connection *_Nonnull connection,
                                void *_Nullable *_Nonnull connection_state,
                                plugind_plugin_response *_Nonnull refusal);

    /// Optional. The host closed `connection` (or dropped it, or the process is ending in an
    /// orderly way): release its state. No request of it runs any more.
    void (*_Nullable close)(void *_Nullable state, const plugind_plugin_connection *_Nonnull connection,
                            void *_Nullable connection_state);
} plugind_plugin;

/// `sizeof(plugind_plugin)` of ABI 1, which ended with `deinit`.
#define PLUGIND_PLUGIN_ABI1_SIZE (offsetof(plugind_plugin, concurrency))

/// Marks the entry point (and any function declared in a manifest) as exported from the library.
#define PLUGIND_PLUGIN_EXPORT __attribute__((visibility("default")))

/// The ABI version, recorded in the library where `plugind verify` reads it without running any
/// code: an ELF note ("plugind", type 1) in section .note.plugind. Every file that includes this
/// header adds one (they are identical); define PLUGIND_PLUGIN_NO_ABI_NOTE to leave it out.
#define PLUGIND_PLUGIN_NOTE_TYPE_ABI 1

/// The layout of that note.
typedef struct plugind_plugin_abi_note {
    uint32_t name_size;
    uint32_t description_size;
    uint32_t type;
    char name[8];
    uint32_t abi_version;
} plugind_plugin_abi_note;

/// The extension point the plugin's code binds to, recorded beside the ABI note ("plugind", type
/// 2; contents "extensionPoint=<identifier>", no NUL) so that `plugind verify` can compare it
/// with the manifest without running code. Swift plugins get it from `plugind bind` (the
/// scaffolded Makefile runs it); a C plugin states it once at file scope:
///
///     PLUGIND_PLUGIN_BINDING("com.example.editor.text-filters");
#define PLUGIND_PLUGIN_NOTE_TYPE_BINDING 2

#if !defined(__swift__)
#define PLUGIND_PLUGIN_BINDING(extension_point)                                                                \
    __attribute__((used, section(".note.plugind"), aligned(4))) static const struct {                           \
        uint32_t name_size;                                                                                      \
        uint32_t description_size;                                                                               \
        uint32_t type;                                                                                           \
        char name[8];                                                                                            \
        char description[sizeof("extensionPoint=" extension_point) - 1];                                        \
    } plugind_plugin_binding_record = {8, sizeof("extensionPoint=" extension_point) - 1,                        \
                                       PLUGIND_PLUGIN_NOTE_TYPE_BINDING, "plugind", "extensionPoint=" extension_point}
#endif

#if !defined(__swift__) && !defined(PLUGIND_PLUGIN_NO_ABI_NOTE)
__attribute__((used, section(".note.plugind"), aligned(4))) static const plugind_plugin_abi_note plugind_plugin_abi_note_record = {
    8, 4, PLUGIND_PLUGIN_NOTE_TYPE_ABI, "plugind", PLUGIND_PLUGIN_ABI_VERSION};
#endif

#if !defined(__swift__)
/// The one symbol a plugin exports. Returns its descriptor; called once, by the worker.
/// A library without it can still expose plain C functions declared in its manifest.
/// (Hidden from Swift, where PluginKit's `@c(plugind_plugin_entry)` function provides it.)
PLUGIND_PLUGIN_EXPORT const plugind_plugin *_Nonnull plugind_plugin_entry(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* PLUGIND_PLUGIN_H */
