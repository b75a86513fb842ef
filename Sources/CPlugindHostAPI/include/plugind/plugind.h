/*
 * plugind.h: hosting plugind plugins from C (and from any language that calls C).
 *
 * libplugind is the Swift host API (ExtensionFoundation) behind a C ABI: discover the plugins
 * the machine's owner approved for an extension point, watch that list change, start a plugin
 * in its confined worker process, and talk to it. A Swift host and a C host get the same
 * guarantees: a plugin that crashes, hangs or misbehaves gives an error value, never a crash
 * of the host.
 *
 * Conventions, for every function below:
 *  - Handles (plugind_monitor, plugind_identity, plugind_process, plugind_connection,
 *    plugind_ask, plugind_error) are opaque. A handle that is NULL, was released, or is not of
 *    the kind a function takes gives PLUGIND_ERROR_INVALID_ARGUMENT; nothing aborts the process.
 *  - A function that can fail takes `plugind_error **error` last. On failure it returns NULL or
 *    -1 and, when `error` is not NULL, stores an error the caller frees with plugind_error_free.
 *    On success *error is left untouched.
 *  - Every string returned is UTF-8, NUL-terminated, and owned by the handle it came from: it
 *    stays valid until that handle is released. Every byte buffer returned through an out
 *    parameter is the caller's, freed with plugind_bytes_free.
 *  - Blocking calls (plugind_monitor_create, plugind_process_create, plugind_connection_open,
 *    plugind_connection_send, plugind_process_call) may be called from any thread of the host,
 *    but not from inside a plugind callback: a callback runs on a thread plugind needs to make
 *    progress. From a callback, use plugind_connection_send_async and plugind_ask_respond.
 *    A typed call's callback handler (plugind_callback_handler) is the exception: it runs on the
 *    host's own thread and may block.
 *  - Callbacks run on plugind's threads, never on the caller's, and may run concurrently with
 *    each other and with the host's threads; but a typed call's callback handlers run on the
 *    thread that made the call, one at a time, while it waits.
 */
#ifndef PLUGIND_H
#define PLUGIND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLUGIND_API_VERSION 1

typedef struct plugind_error plugind_error;
typedef struct plugind_monitor plugind_monitor;
typedef struct plugind_identity plugind_identity;
typedef struct plugind_process plugind_process;
typedef struct plugind_connection plugind_connection;
typedef struct plugind_ask plugind_ask;

/* ---- Errors ------------------------------------------------------------------------------ */

/* The same codes as AppExtensionError.Code, and PLUGIND_ERROR_INVALID_ARGUMENT for misuse of
 * this API (a NULL or released handle, an index out of range, a string that is not UTF-8). */
typedef enum plugind_error_code {
    PLUGIND_ERROR_INVALID_ARGUMENT = 1,
    PLUGIND_ERROR_WORKER_NOT_FOUND = 2,
    PLUGIND_ERROR_SPAWN_FAILED = 3,
    PLUGIND_ERROR_INCOMPATIBLE_PROTOCOL = 4,
    PLUGIND_ERROR_PLUGIN_LOAD_FAILED = 5,
    PLUGIND_ERROR_SYMBOL_MISSING = 6,
    PLUGIND_ERROR_ABI_MISMATCH = 7,
    PLUGIND_ERROR_CONFINEMENT_UNAVAILABLE = 8,
    PLUGIND_ERROR_WORKER_CRASHED = 9,
    PLUGIND_ERROR_WORKER_EXITED = 10,
    PLUGIND_ERROR_LIMIT_EXCEEDED = 11,
    PLUGIND_ERROR_TIMED_OUT = 12,
    PLUGIND_ERROR_CANCELLED = 13,
    PLUGIND_ERROR_PROTOCOL_VIOLATION = 14,
    PLUGIND_ERROR_PLUGIN_ERROR = 15,
    PLUGIND_ERROR_NOT_FOUND = 16,
    PLUGIND_ERROR_NOT_APPROVED = 17,
    PLUGIND_ERROR_QUARANTINED = 18,
    PLUGIND_ERROR_UNKNOWN_FUNCTION = 19,
    PLUGIND_ERROR_INVALID_ARGUMENTS = 20,
    PLUGIND_ERROR_UNSUPPORTED = 21,
    PLUGIND_ERROR_INVALIDATED = 22,
    PLUGIND_ERROR_CONFIGURATION_ERROR = 23,
    PLUGIND_ERROR_BUNDLE_CHANGED = 24,
    PLUGIND_ERROR_CONNECTION_REFUSED = 25,
    PLUGIND_ERROR_CONNECTION_CLOSED = 26,
    PLUGIND_ERROR_DISABLED_BY_OWNER = 27,
    /* Killed from outside (SIGKILL nobody in the host sent and no limit explains): not the
     * plugin's crash, never counted toward a quarantine. */
    PLUGIND_ERROR_WORKER_KILLED = 28,
    /* A typed call's callback handler failed (returned non-zero, or left a result of another
     * type than the callback declares), or the library passed a callback what its declaration
     * rules out. */
    PLUGIND_ERROR_CALLBACK_FAILED = 29,
} plugind_error_code;

/* The code of `error`; PLUGIND_ERROR_INVALID_ARGUMENT for a NULL or freed error. */
plugind_error_code plugind_error_code_of(const plugind_error *error);

/* What went wrong, naming the plugin and the cause, e.g. "org.example.upper crashed with
 * SIGSEGV (a bad memory access)". Owned by `error`. Never NULL. */
const char *plugind_error_message(const plugind_error *error);

/* A plugin's own error code (PLUGIND_ERROR_PLUGIN_ERROR: the code its handler returned), else 0. */
int32_t plugind_error_plugin_code(const plugind_error *error);

/* Where the plugin was, innermost first: the crashed thread's frames (PLUGIND_ERROR_WORKER_CRASHED)
 * or the frames of the thread serving a request whose deadline passed (PLUGIND_ERROR_TIMED_OUT).
 * 0 when the worker could not say, or for a NULL or freed error. */
size_t plugind_error_frame_count(const plugind_error *error);

/* Frame `index` as one line, e.g. "#0 parse_header+0x1c in libparser.so (parser.c:42)": the
 * plugin's strings in it are inert. Owned by `error`; NULL when `index` is out of range. */
const char *plugind_error_frame(const plugind_error *error, size_t index);

/* Frees an error. NULL is ignored; a second free is ignored too. */
void plugind_error_free(plugind_error *error);

/* Frees a buffer plugind handed out (a reply, a string result). NULL is ignored. */
void plugind_bytes_free(void *bytes);

/* ---- Discovery ----------------------------------------------------------------------------- */

/* Which plugins a point admits: only those shipped with the host (no approval needed), or also
 * those the owner installed and approved. */
typedef enum plugind_scope {
    PLUGIND_SCOPE_APPLICATION = 0,
    PLUGIND_SCOPE_NONE = 1,
} plugind_scope;

/* Watches the usable plugins of one extension point, `point_identifier` in full (reverse DNS,
 * e.g. "org.example.editor.text-filters"), as AppExtensionPoint.Monitor does. The first list is
 * there when this returns. Blocking. Release with plugind_monitor_release. */
plugind_monitor *plugind_monitor_create(const char *point_identifier, plugind_scope scope, plugind_error **error);

/* Stops watching and frees the monitor; its descriptor is closed right after (take it out of
 * the host's loop before releasing). NULL is ignored. */
void plugind_monitor_release(plugind_monitor *monitor);

/* A descriptor that becomes readable when the list or the counts changed: add it to a poll, GLib,
 * Qt, libuv or asyncio loop, then call plugind_monitor_update. Owned by the monitor: do not close
 * it or read from it. -1 for an invalid monitor. */
int plugind_monitor_fd(const plugind_monitor *monitor);

/* Takes the latest state into the monitor (what count, identity_at and the counts below read):
 * 1 when it changed since the last update, 0 when not, -1 for an invalid monitor. Until the next
 * update the snapshot stays as it is, whatever happens meanwhile. Non-blocking. */
int plugind_monitor_update(plugind_monitor *monitor);

/* How many usable plugins the snapshot holds; -1 for an invalid monitor. */
int64_t plugind_monitor_count(const plugind_monitor *monitor);

/* The `index`th usable plugin of the snapshot, retained: the caller releases it with
 * plugind_identity_release (it outlives the monitor). NULL and an error for an index out of
 * range. */
plugind_identity *plugind_monitor_identity_at(const plugind_monitor *monitor, int64_t index, plugind_error **error);

/* Plugins of the point the owner disabled, and plugins waiting for the owner's approval: what a
 * host shows as "2 more plugins are waiting for approval". -1 for an invalid monitor. */
int64_t plugind_monitor_disabled_count(const plugind_monitor *monitor);
int64_t plugind_monitor_unapproved_count(const plugind_monitor *monitor);

/* ---- Identities ---------------------------------------------------------------------------- */

/* The plugin's identifier (manifest "identifier"), display name (manifest "name") and the full
 * identifier of its extension point. Owned by the identity; NULL for an invalid identity. */
const char *plugind_identity_bundle_identifier(const plugind_identity *identity);
const char *plugind_identity_name(const plugind_identity *identity);
const char *plugind_identity_extension_point(const plugind_identity *identity);

/* What the plugin implements within its point (manifest "capabilities"; for a Swift extension,
 * its Implementing { ... }), such as the media types it handles, read without running it: the
 * count (0 for an invalid identity), and the one at `index` (NULL past the end), owned by the
 * identity. An editor picks the plugins for a file by these without launching any. */
size_t plugind_identity_capability_count(const plugind_identity *identity);
const char *plugind_identity_capability(const plugind_identity *identity, size_t index);

/* Frees an identity. NULL is ignored. */
void plugind_identity_release(plugind_identity *identity);

/* ---- Processes ----------------------------------------------------------------------------- */

/* Called once, on a plugind thread, when the process ends without plugind_process_release
 * having been called first (a crash, a limit, the owner's decision). May call anything but the
 * blocking functions. */
typedef void (*plugind_interruption_handler)(void *context);

/* Starts the plugin in its confined worker process and waits until it is loaded. Checks the
 * owner's approval as it is now: a plugin no longer approved gives PLUGIND_ERROR_NOT_APPROVED.
 * `on_interruption` may be NULL. Blocking. Release with plugind_process_release. */
plugind_process *plugind_process_create(
    const plugind_identity *identity, plugind_interruption_handler on_interruption, void *context, plugind_error **error);

/* Ends the process (its connections fail with PLUGIND_ERROR_INVALIDATED) and frees the handle;
 * `on_interruption` is not called after this returns. When the process crashed, waits (at most
 * 2 s) until the crash is recorded, so that a host exiting next does not lose it. NULL is
 * ignored. */
void plugind_process_release(plugind_process *process);

/* The worker's process ID, for diagnostics; -1 for an invalid process. */
int32_t plugind_process_pid(const plugind_process *process);

/* ---- Connections --------------------------------------------------------------------------- */

/* A question the plugin asks its host (plugind_plugin.h: host->ask). plugind calls this on one
 * of its threads; the host answers with plugind_ask_respond or plugind_ask_fail, exactly once,
 * now (from inside the handler) or later from any thread. `bytes` is valid only during the call.
 * An ask never answered is failed when its connection closes. */
typedef void (*plugind_ask_handler)(void *context, plugind_ask *ask, const uint8_t *bytes, size_t length);

/* Answers an ask with `length` bytes (copied) and frees the ask handle. 0, or -1 for an ask
 * already answered or released. */
int plugind_ask_respond(plugind_ask *ask, const uint8_t *bytes, size_t length);

/* Fails an ask: the plugin's host->ask returns `code` (non-zero) with `message`. Frees the ask.
 * 0, or -1 for an ask already answered or released. */
int plugind_ask_fail(plugind_ask *ask, int32_t code, const char *message);

/* Opens a connection to the plugin, as the plugin's connection handler accepts or refuses it
 * (PLUGIND_ERROR_CONNECTION_REFUSED with its reason). `ask_handler` may be NULL: the plugin's
 * asks then fail as unsupported. Blocking. Close with plugind_connection_close. */
plugind_connection *plugind_connection_open(
    plugind_process *process, plugind_ask_handler ask_handler, void *context, plugind_error **error);

/* Sends one request and waits for the plugin's reply. `timeout_ms` 0 means the plugin's own
 * deadline (its manifest's, capped by the host). On success *reply (the caller's, freed with
 * plugind_bytes_free; non-NULL even when empty) and *reply_length are set and 0 is returned.
 * Blocking. */
int plugind_connection_send(
    plugind_connection *connection, const uint8_t *bytes, size_t length, uint32_t timeout_ms, uint8_t **reply,
    size_t *reply_length, plugind_error **error);

/* Called once when an asynchronous send completes, on a plugind thread: `reply` and `length`
 * on success (valid only during the call) with `error` NULL, or `error` (the callback's to free)
 * with `reply` NULL. */
typedef void (*plugind_send_completion)(void *context, const uint8_t *reply, size_t length, plugind_error *error);

/* Sends one request and returns at once; `completion` is called when it completes. The request
 * bytes are copied. 0, or -1 (and *error) when it could not be sent at all, in which case
 * `completion` is never called. */
int plugind_connection_send_async(
    plugind_connection *connection, const uint8_t *bytes, size_t length, uint32_t timeout_ms,
    plugind_send_completion completion, void *context, plugind_error **error);

/* Closes the connection: waiting requests fail with PLUGIND_ERROR_CONNECTION_CLOSED, unanswered
 * asks are failed, and the handle is freed. Returns only when no ask handler and no send
 * completion of this connection runs or can start: the completions of sends still waiting are
 * called (with PLUGIND_ERROR_CONNECTION_CLOSED) before it returns, and asks that arrive meanwhile
 * are failed without calling the handler, so the host may free their contexts as soon as it
 * returns. Called from inside one of the connection's own handlers or completions, it waits for
 * all the others. A handler that never returns makes it wait for ever. NULL is ignored. */
void plugind_connection_close(plugind_connection *connection);

/* ---- Typed calls of declared functions ------------------------------------------------------ */

/* The types of a manifest's "functions" (see plugind-manifest(5)). */
typedef enum plugind_type {
    PLUGIND_TYPE_VOID = 0,
    PLUGIND_TYPE_BOOL,
    PLUGIND_TYPE_INT8,
    PLUGIND_TYPE_UINT8,
    PLUGIND_TYPE_INT16,
    PLUGIND_TYPE_UINT16,
    PLUGIND_TYPE_INT32,
    PLUGIND_TYPE_UINT32,
    PLUGIND_TYPE_INT64,
    PLUGIND_TYPE_UINT64,
    PLUGIND_TYPE_FLOAT,
    PLUGIND_TYPE_DOUBLE,
    PLUGIND_TYPE_STRING,
    PLUGIND_TYPE_BYTES,
    /* An opaque pointer of a kind the manifest's "handles" declares, as a number (see
     * plugind_handle_release). */
    PLUGIND_TYPE_HANDLE,
} plugind_type;

/* One argument or result. Integers of every width travel in `payload.integer` (signed) or `unsigned_integer`,
 * bool in `integer` (0 or 1), float and double in `real`; a string is NUL-terminated UTF-8 in
 * `data.bytes` (length without the NUL), bytes are `data.bytes` and `data.length`. A handle is
 * `handle.kind` and `handle.id` (0 for NULL): in a result, `kind` is owned by the process (valid
 * until plugind_process_release); in an argument, `kind` may be NULL (the declared kind). */
typedef struct plugind_value {
    plugind_type type;
    union {
        int64_t integer;
        uint64_t unsigned_integer;
        double real;
        struct {
            const uint8_t *bytes;
            size_t length;
        } data;
        struct {
            const char *kind;
            uint64_t id;
        } handle;
    } payload;
} plugind_value;

/* Calls the function `name` the plugin's manifest declares, with `count` arguments of exactly the
 * declared types (PLUGIND_ERROR_INVALID_ARGUMENTS otherwise, naming the argument), and stores its
 * result in *result. A string result's bytes are the caller's, freed with plugind_bytes_free.
 * `timeout_ms` as for plugind_connection_send. Blocking. */
int plugind_process_call(
    plugind_process *process, const char *name, const plugind_value *arguments, size_t count, uint32_t timeout_ms,
    plugind_value *result, plugind_error **error);

/* A value a call returns through an out or inout argument of its declaration: the argument's name,
 * and the scalar a pointer was left with or the bytes of a buffer (as many as the function used,
 * checked against the capacity given). */
typedef struct plugind_output {
    const char *name;
    plugind_value value;
} plugind_output;

/* What plugind_process_call_outputs returns: the function's value, its outputs in the order of the
 * arguments, and errno as the function left it when the declaration asks for it (has_errno 1). */
typedef struct plugind_call_result {
    plugind_value value;
    size_t output_count;
    plugind_output *outputs;
    int has_errno;
    int error_number;
} plugind_call_result;

/* plugind_process_call for functions with out and inout arguments or errno. `arguments` are the
 * declaration's inputs in order: every argument but NULL, out pointers, out buffers and the counts
 * of in buffers (the host sets those from the buffers' lengths); an in or inout buffer is
 * PLUGIND_TYPE_BYTES, an inout pointer the value it points to, a length ("count": "*len") the
 * capacity. On success fills *result, which the caller frees with plugind_call_result_free. A
 * library that reports a length beyond the capacity it was given fails the call with
 * PLUGIND_ERROR_PROTOCOL_VIOLATION, naming the function and the argument, and its worker is
 * stopped. Blocking. */
int plugind_process_call_outputs(
    plugind_process *process, const char *name, const plugind_value *arguments, size_t count, uint32_t timeout_ms,
    plugind_call_result *result, plugind_error **error);

/* Frees the strings, bytes, names and outputs of *result and zeroes it (a handle stays the
 * process's until plugind_handle_release). NULL is ignored. */
void plugind_call_result_free(plugind_call_result *result);

/* Answers one call of a callback the library makes during a typed call (qsort's comparator; a
 * manifest argument of "type": "callback", see plugind-manifest(5)). `arguments` are the
 * callback's arguments as its declaration gives them, `count` of them: scalars; a string as
 * PLUGIND_TYPE_STRING (NUL-terminated; NULL from the library is ""); a buffer as
 * PLUGIND_TYPE_BYTES (a copy of the elements); the "void *" arguments it declares as ignored are
 * left out. They and their bytes are valid only during this call of the handler.
 *
 * Return 0 with *result set to a value of the declared return type: *result arrives as
 * PLUGIND_TYPE_VOID, which is the answer for a void callback; for a scalar, set `type` and the
 * payload as for an argument (any integer type for an integer, range-checked; PLUGIND_TYPE_BOOL
 * for bool; PLUGIND_TYPE_DOUBLE, or a signed integer type, for float and double). Return non-zero
 * to fail the typed call with PLUGIND_ERROR_CALLBACK_FAILED; the library gets 0 from this and
 * every later call of its callbacks until the call returns. Before returning non-zero the handler may store
 * in *error_message a message from malloc (strdup), which becomes the error's and which libplugind
 * frees (it frees one stored with a 0 return too). A result of another type fails the call with
 * PLUGIND_ERROR_CALLBACK_FAILED, naming the callback, the function and the types.
 *
 * The handler runs on the thread that called plugind_process_call_callbacks (or
 * plugind_function_session_call_callbacks), while that call waits, never on plugind's threads
 * and never after the call returned; the handlers of one call run one at a time, even when the
 * library calls its callback from several threads. Unlike other callbacks it may block and may
 * call the blocking functions (a session's handler not its own session's: see
 * plugind_function_session_call_callbacks): a typed call of the same process it makes on its own
 * thread (plugind_process_call, _call_outputs, _call_callbacks, plugind_handle_release) runs
 * nested in the callback, on the library's thread that waits for the answer. Made from another
 * thread, it is an ordinary call, which waits for a free thread of the worker (one unless the
 * manifest's "concurrency" says more): behind the call that waits for the handler, until a
 * deadline ends one of them. A handler that never returns holds the typed call
 * until its deadline, then the calling thread for ever. */
typedef int (*plugind_callback_handler)(
    void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **error_message);

/* A handler for the callback argument `name` (the argument's name in the manifest). */
typedef struct plugind_callback {
    const char *name;
    plugind_callback_handler handler;
    void *context;
} plugind_callback;

/* plugind_process_call_outputs for a function that takes callbacks: `callback_count` handlers in
 * `callbacks`, one for each callback argument the function declares (the array and the names are
 * read before this returns and need not outlive it). A NULL name or handler, a name given twice,
 * or `callbacks` NULL with a count give PLUGIND_ERROR_INVALID_ARGUMENT; a callback the function
 * declares without a handler here, or a name it does not declare, give
 * PLUGIND_ERROR_INVALID_ARGUMENTS naming them, before anything is sent. A handler that fails, or
 * answers another type, fails the call with PLUGIND_ERROR_CALLBACK_FAILED and the handler's
 * message. On success fills *result, which the caller frees with plugind_call_result_free.
 * Blocking: the handlers run on the calling thread meanwhile (see plugind_callback_handler). */
int plugind_process_call_callbacks(
    plugind_process *process, const char *name, const plugind_value *arguments, size_t count,
    const plugind_callback *callbacks, size_t callback_count, uint32_t timeout_ms, plugind_call_result *result,
    plugind_error **error);

/* Releases a handle a call of `process` returned (PLUGIND_TYPE_HANDLE, as a result or an output):
 * calls the release function its kind declares in the manifest's "handles", and the handle's
 * number is refused by every later call. The process holds each handle its calls return (a
 * number returned twice is one handle) until this is called, the kind's release function is
 * called with it, or the process is released (which releases the rest without waiting). Only
 * `handle->payload.handle.id` is read. 0 for a NULL handle (id 0) and for one a call of its
 * release function consumed; PLUGIND_ERROR_INVALID_ARGUMENT for a number the process does not
 * hold (released already); else the release call's error. 0, or -1 with *error set. Blocking. */
int plugind_handle_release(plugind_process *process, const plugind_value *handle, plugind_error **error);

/* plugind_handle_release without waiting, for destructors and garbage collectors: the process
 * stops holding the handle and its release runs in the background, its errors ignored. Any
 * thread, including plugind's own (an ask handler, a completion). Invalid arguments are ignored. */
void plugind_handle_drop(plugind_process *process, const plugind_value *handle);

/* ---- Function sessions: typed calls that survive the library's crashes --------------------- */

/* Typed calls of one plugin's declared functions in a worker that a crash does not end the
 * session with (AppExtensionFunctionSession; Sandboxed API's Transaction): for decoders of hostile
 * input. The session starts its worker when first needed, runs the set-up calls on it in order,
 * then the host's calls. When the worker ends during a call (a crash, a resource limit, a
 * library breaking its declaration), that call fails with one error naming the function and the
 * cause (PLUGIND_ERROR_WORKER_CRASHED, _LIMIT_EXCEEDED, ...); the next call starts a new worker and
 * replays the set-up calls first. A set-up call fails when it fails or returns or writes a NULL
 * handle; the call that needed the new worker then fails with its reason, and the next one tries
 * again. A call a crash interrupted is lost, not retried; set-up calls run again on every new
 * worker, side effects included; crashes count toward the host's quarantine.
 *
 * Handles in a session's results carry numbers of the session's own, never reused: a handle
 * from an earlier worker (a set-up result read before a crash) is refused with
 * PLUGIND_ERROR_INVALID_ARGUMENTS, naming the function and the argument. Calls of one session
 * from several threads run one at a time, in the order they reach it. */
typedef struct plugind_function_session plugind_function_session;

/* A session for `identity` (which may be released after this returns); `fresh_worker_every` > 0
 * recycles the worker after that many calls (set-up calls not counted), 0 keeps it until it
 * ends. Starts no worker. Release with plugind_function_session_release. */
plugind_function_session *plugind_function_session_create(
    const plugind_identity *identity, uint32_t fresh_worker_every, plugind_error **error);

/* Adds a set-up call after the others: `name` with `count` arguments, values only (no handles),
 * converted as for plugind_process_call. It runs on every new worker, and on the running one
 * before the next call. Starts the worker (and runs the set-up calls so far) when none runs, to
 * learn the declared types. 0, or -1 with *error. Blocking. */
int plugind_function_session_add_set_up(
    plugind_function_session *session, const char *name, const plugind_value *arguments, size_t count, plugind_error **error);

/* How many set-up calls the session has; 0 for an invalid session. */
size_t plugind_function_session_set_up_count(const plugind_function_session *session);

/* What set-up call `index` returned on the current worker, starting one and replaying the set-up
 * calls when none runs; freed with plugind_call_result_free. Its handles are valid until the
 * worker ends: read it again after a call failed with the worker's end. 0, or -1 with *error.
 * Blocking. */
int plugind_function_session_set_up_result(
    plugind_function_session *session, size_t index, plugind_call_result *result, plugind_error **error);

/* plugind_process_call and plugind_process_call_outputs on the session's worker, started first
 * (and set up) when none runs. A handle in *result is the session's until
 * plugind_function_session_handle_release or the session's release; its `kind` is owned by the
 * session. Blocking. */
int plugind_function_session_call(
    plugind_function_session *session, const char *name, const plugind_value *arguments, size_t count, uint32_t timeout_ms,
    plugind_value *result, plugind_error **error);
int plugind_function_session_call_outputs(
    plugind_function_session *session, const char *name, const plugind_value *arguments, size_t count, uint32_t timeout_ms,
    plugind_call_result *result, plugind_error **error);

/* plugind_process_call_callbacks on the session's worker: the same `callbacks` (checked the same
 * way, before anything is sent), the same handlers (plugind_callback_handler), run on the calling
 * thread while the call waits; a handler that fails, or answers another type, fails the call with
 * PLUGIND_ERROR_CALLBACK_FAILED and the handler's message, and the session goes on with the same
 * worker. Since a session's calls run one at a time, a handler may not use its own session: a
 * call of it (plugind_function_session_call, _call_outputs, _call_callbacks, _add_set_up,
 * _set_up_result) made on the handler's thread fails at once with PLUGIND_ERROR_INVALID_ARGUMENTS,
 * which the handler may pass on by failing; made from another thread it waits for the call that
 * runs the handler, so the handler must not wait for it. It may call other sessions and processes,
 * and release the session's handles (plugind_function_session_handle_release), which runs nested
 * in the callback. Blocking. */
int plugind_function_session_call_callbacks(
    plugind_function_session *session, const char *name, const plugind_value *arguments, size_t count,
    const plugind_callback *callbacks, size_t callback_count, uint32_t timeout_ms, plugind_call_result *result,
    plugind_error **error);

/* The current worker's process ID; -1 when none runs (before the first call, and after a crash
 * until the next one) or for an invalid session. */
int32_t plugind_function_session_pid(const plugind_function_session *session);

/* How many workers the session has started, those whose set-up failed included; -1 for an
 * invalid session. */
int64_t plugind_function_session_workers_started(const plugind_function_session *session);

/* plugind_handle_release and plugind_handle_drop for a session's handles. Releasing a handle
 * whose worker has ended does nothing (the worker took its objects with it) and returns 0. */
int plugind_function_session_handle_release(
    plugind_function_session *session, const plugind_value *handle, plugind_error **error);
void plugind_function_session_handle_drop(plugind_function_session *session, const plugind_value *handle);

/* Ends the session's worker, waits until every worker it started has exited, and frees the
 * session; calls waiting in other threads fail with PLUGIND_ERROR_INVALIDATED. Once it returns,
 * no handler of the session's calls runs or can start (it waits for those running on other
 * threads), so their contexts may be freed. NULL is ignored. */
void plugind_function_session_release(plugind_function_session *session);

/* ---- LADSPA audio effects and frei0r video filters ------------------------------------------ */

/* A LADSPA plugin's instance in its process (plugind scan lists them as ladspa.<library>.<label>).
 * Its ports live in memory shared with the worker, at the addresses the plugin was connected to:
 * write the inputs, run, read the outputs; the call carries the frame count only. One instance
 * per process (the process never shares its worker); one thread at a time per effect. */
typedef struct plugind_audio_effect plugind_audio_effect;

typedef enum plugind_port_kind {
    PLUGIND_PORT_AUDIO_INPUT = 0,
    PLUGIND_PORT_AUDIO_OUTPUT = 1,
    PLUGIND_PORT_CONTROL_INPUT = 2,
    PLUGIND_PORT_CONTROL_OUTPUT = 3,
} plugind_port_kind;

/* One port. `name` is valid until plugind_audio_effect_release. Bounds as the plugin declares
 * them, scaled by the sample rate where it says so; `default_value` (control inputs) by LADSPA's
 * hint rules, within the bounds. */
typedef struct plugind_audio_port {
    const char *name;
    plugind_port_kind kind;
    int has_lower_bound;
    int has_upper_bound;
    float lower_bound;
    float upper_bound;
    float default_value;
} plugind_audio_port;

/* Describes the process's plugin and instantiates it at `sample_rate` with ports of
 * `maximum_frames` samples (1 to 8192); every control input starts at its default. Blocking.
 * PLUGIND_ERROR_UNSUPPORTED when the process is not a LADSPA plugin's. */
plugind_audio_effect *plugind_audio_effect_create(
    plugind_process *process, uint32_t sample_rate, uint32_t maximum_frames, plugind_error **error);

/* The number of ports, and port `index` into `*port` (0, or -1 for an index out of range). */
size_t plugind_audio_effect_port_count(const plugind_audio_effect *effect);
int plugind_audio_effect_port(const plugind_audio_effect *effect, size_t index, plugind_audio_port *port);

/* An audio port's `maximum_frames` samples, in the memory the plugin reads (inputs) and writes
 * (outputs); NULL for a port that is not an audio port. Valid until the effect is released; the
 * plugin may write it only during plugind_audio_effect_run. */
float *plugind_audio_effect_samples(plugind_audio_effect *effect, size_t port);

/* Sets a control input, refusing (PLUGIND_ERROR_INVALID_ARGUMENTS) a value outside its bounds;
 * reads a control port's value. Return 0 or -1. */
int plugind_audio_effect_set_control(plugind_audio_effect *effect, size_t port, float value, plugind_error **error);
int plugind_audio_effect_control(const plugind_audio_effect *effect, size_t port, float *value);

/* Runs the plugin over the first `frames` samples of its ports, within `timeout_ms` (0: the
 * plugin's request timeout). Blocking, on the calling thread alone (the worker is rung through
 * the shared memory; no other thread of the host takes part): fit for a real-time audio thread.
 * One thread at a time per effect. 0, or -1 with the error: PLUGIND_ERROR_WORKER_CRASHED,
 * PLUGIND_ERROR_TIMED_OUT (the worker is then ended), PLUGIND_ERROR_INVALID_ARGUMENTS. */
int plugind_audio_effect_run(plugind_audio_effect *effect, uint32_t frames, uint32_t timeout_ms, plugind_error **error);

/* How the runs went against their blocks' real-time period (frames / sample rate): `blocks`
 * runs completed, `missed_blocks` of them took longer than their block lasts, the longest from
 * the request to its answer. A real-time host reads these rather than waiting longer; the
 * run's timeout bounds how long it can wait at all. */
typedef struct plugind_audio_timing {
    uint64_t blocks;
    uint64_t missed_blocks;
    uint64_t longest_run_ns;
} plugind_audio_timing;

/* The effect's runs so far into `*timing`: 0, or -1 for an invalid effect or a NULL `timing`. */
int plugind_audio_effect_timing(const plugind_audio_effect *effect, plugind_audio_timing *timing);

/* Frees the effect (the process stays until plugind_process_release). NULL is ignored. */
void plugind_audio_effect_release(plugind_audio_effect *effect);

/* Effects run one after another on each block, each in its own worker: effect k's audio outputs
 * feed effect k + 1's audio inputs, in port order; the samples move between their shared ports in
 * the host, each call carries the frame count only. The chain's inputs are its first effect's
 * audio inputs, its outputs its last effect's audio outputs. The chain borrows its effects: they
 * stay the caller's, to set controls on (between runs) and to release after the chain. One thread
 * at a time per chain, and no effect of it run on its own while the chain runs. */
typedef struct plugind_audio_chain plugind_audio_chain;

/* A chain of `count` effects, in order. PLUGIND_ERROR_INVALID_ARGUMENT for no effects, a NULL or
 * released effect, or one effect twice; PLUGIND_ERROR_INVALID_ARGUMENTS for effects of different
 * sample rates or block sizes, or a link whose numbers of outputs and inputs differ (the message
 * names it). */
plugind_audio_chain *plugind_audio_chain_create(plugind_audio_effect *const *effects, size_t count, plugind_error **error);

/* The number of input and output channels. */
size_t plugind_audio_chain_input_count(const plugind_audio_chain *chain);
size_t plugind_audio_chain_output_count(const plugind_audio_chain *chain);

/* Input and output `channel`'s `maximum_frames` samples (the first effect's audio input, the last
 * effect's audio output, in that place): the ports' own memory, valid until the chain is
 * released; NULL for a channel out of range. */
float *plugind_audio_chain_input(plugind_audio_chain *chain, size_t channel);
const float *plugind_audio_chain_output(const plugind_audio_chain *chain, size_t channel);

/* Runs every effect over the first `frames` samples, in order, each within `timeout_ms` (0: its
 * plugin's request timeout). Blocking, on the calling thread alone, as plugind_audio_effect_run.
 * 0, or -1 with the first error: an effect's own (its worker crashed or timed out; the other
 * effects are unharmed), PLUGIND_ERROR_INVALID_ARGUMENT when an effect of the chain was released. */
int plugind_audio_chain_run(plugind_audio_chain *chain, uint32_t frames, uint32_t timeout_ms, plugind_error **error);

/* The chain's runs so far, as plugind_audio_effect_timing counts an effect's: a block the whole
 * chain took longer than it lasts missed it. 0, or -1 for an invalid chain or a NULL `timing`. */
int plugind_audio_chain_timing(const plugind_audio_chain *chain, plugind_audio_timing *timing);

/* Frees the chain; its effects stay the caller's. NULL is ignored. */
void plugind_audio_chain_release(plugind_audio_chain *chain);

/* A frei0r plugin's instance in its process (frei0r.<library>): frames of width x height pixels of
 * 4 bytes in the plugin's colour model, 16-byte aligned, top line first, in memory shared with the
 * worker. One instance per process; one thread at a time per filter. */
typedef struct plugind_video_filter plugind_video_filter;

typedef enum plugind_parameter_type {
    PLUGIND_PARAMETER_BOOL = 0,
    PLUGIND_PARAMETER_DOUBLE = 1,
    PLUGIND_PARAMETER_COLOR = 2,
    PLUGIND_PARAMETER_POSITION = 3,
    PLUGIND_PARAMETER_STRING = 4,
} plugind_parameter_type;

/* Describes the plugin and constructs it for `width` x `height` (multiples of 8 from 8 to 2048).
 * Blocking. PLUGIND_ERROR_UNSUPPORTED when the process is not a frei0r plugin's. */
plugind_video_filter *plugind_video_filter_create(plugind_process *process, uint32_t width, uint32_t height, plugind_error **error);

/* How many input frames an update reads: 0 (a source), 1 (a filter), 2 or 3 (mixers). */
size_t plugind_video_filter_input_count(const plugind_video_filter *filter);

/* Input `index`'s frame and the output frame: width * height * 4 bytes each, valid until the
 * filter is released; NULL for an index out of range. The plugin writes the output only during
 * plugind_video_filter_update. */
uint8_t *plugind_video_filter_input(plugind_video_filter *filter, size_t index);
const uint8_t *plugind_video_filter_output(const plugind_video_filter *filter);

/* The parameters: their number, and parameter `index`'s name (valid until release) and type
 * (0, or -1 for an index out of range). */
size_t plugind_video_filter_parameter_count(const plugind_video_filter *filter);
int plugind_video_filter_parameter(
    const plugind_video_filter *filter, size_t index, const char **name, plugind_parameter_type *type);

/* Sets parameter `index`; `values` holds 1 number for BOOL (0 or 1) and DOUBLE (0 to 1), 3 for
 * COLOR (r, g, b from 0 to 1), 2 for POSITION (x, y); `text` is used for STRING (else NULL). A
 * value of the wrong type or out of range: PLUGIND_ERROR_INVALID_ARGUMENTS. Blocking. 0 or -1. */
int plugind_video_filter_set_parameter(
    plugind_video_filter *filter, size_t index, const double *values, size_t count, const char *text, plugind_error **error);

/* Renders one frame at `time` seconds, within `timeout_ms` (0: the plugin's request timeout).
 * Blocking. 0, or -1 with the error. */
int plugind_video_filter_update(plugind_video_filter *filter, double time, uint32_t timeout_ms, plugind_error **error);

/* Frees the filter (the process stays until plugind_process_release). NULL is ignored. */
void plugind_video_filter_release(plugind_video_filter *filter);

#ifdef __cplusplus
}
#endif

#endif
