"""libplugind through ctypes: the library, its prototypes, and the C types of plugind.h.

Every prototype is declared here, once, so that ctypes converts arguments and results instead of
guessing (a pointer returned as a C int would be cut to 32 bits).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = [
    "library",
    "libc",
    "Value",
    "CallResult",
    "Callback",
    "ASK_HANDLER",
    "INTERRUPTION_HANDLER",
    "SEND_COMPLETION",
    "CALLBACK_HANDLER",
    "TYPES",
]


def _load() -> ctypes.CDLL:
    explicit = os.environ.get("PLUGIND_LIBRARY")
    candidates = [explicit] if explicit else []
    candidates += ["libplugind.so.0", ctypes.util.find_library("plugind")]
    tried = []
    for candidate in candidates:
        if not candidate:
            continue
        tried.append(candidate)
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    raise ImportError(
        "libplugind not found (tried %s): install the libplugind0 package, or set PLUGIND_LIBRARY "
        "to the path of libplugind.so" % ", ".join(tried or ["nothing"])
    )


library = _load()

# The process's C library: a callback handler's error message is a string from its malloc (strdup),
# which libplugind frees.
libc = ctypes.CDLL(None)
libc.strdup.restype = ctypes.c_void_p
libc.strdup.argtypes = [ctypes.c_char_p]

_handle = ctypes.c_void_p
_error_out = ctypes.POINTER(ctypes.c_void_p)

ASK_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t)
INTERRUPTION_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
SEND_COMPLETION = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.c_void_p
)


class _Data(ctypes.Structure):
    _fields_ = [("bytes", ctypes.POINTER(ctypes.c_uint8)), ("length", ctypes.c_size_t)]


class _Handle(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char_p), ("id", ctypes.c_uint64)]


class _Payload(ctypes.Union):
    _fields_ = [
        ("integer", ctypes.c_int64),
        ("unsigned_integer", ctypes.c_uint64),
        ("real", ctypes.c_double),
        ("data", _Data),
        ("handle", _Handle),
    ]


class Value(ctypes.Structure):
    """plugind_value: one argument or result of a typed call."""

    _fields_ = [("type", ctypes.c_int), ("payload", _Payload)]


# plugind_callback_handler: (context, arguments, count, result, error_message) -> int.
CALLBACK_HANDLER = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.POINTER(Value),
    ctypes.POINTER(ctypes.c_void_p),
)


class Callback(ctypes.Structure):
    """plugind_callback: a handler for one callback argument, by its name."""

    _fields_ = [("name", ctypes.c_char_p), ("handler", CALLBACK_HANDLER), ("context", ctypes.c_void_p)]


class Output(ctypes.Structure):
    """plugind_output: a value a call returns through an out or inout argument."""

    _fields_ = [("name", ctypes.c_char_p), ("value", Value)]


class CallResult(ctypes.Structure):
    """plugind_call_result: what plugind_process_call_outputs returns."""

    _fields_ = [
        ("value", Value),
        ("output_count", ctypes.c_size_t),
        ("outputs", ctypes.POINTER(Output)),
        ("has_errno", ctypes.c_int),
        ("error_number", ctypes.c_int),
    ]


# plugind_type, by name.
TYPES = {
    name: number
    for number, name in enumerate(
        ["void", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float", "double",
         "string", "bytes", "handle"]
    )
}


def _declare(name: str, result, *arguments) -> None:
    function = getattr(library, name)
    function.restype = result
    function.argtypes = list(arguments)


_declare("plugind_error_code_of", ctypes.c_int, _handle)
_declare("plugind_error_message", ctypes.c_char_p, _handle)
_declare("plugind_error_plugin_code", ctypes.c_int32, _handle)
_declare("plugind_error_frame_count", ctypes.c_size_t, _handle)
_declare("plugind_error_frame", ctypes.c_char_p, _handle, ctypes.c_size_t)
_declare("plugind_error_free", None, _handle)
_declare("plugind_bytes_free", None, ctypes.c_void_p)

_declare("plugind_monitor_create", _handle, ctypes.c_char_p, ctypes.c_int, _error_out)
_declare("plugind_monitor_release", None, _handle)
_declare("plugind_monitor_fd", ctypes.c_int, _handle)
_declare("plugind_monitor_update", ctypes.c_int, _handle)
_declare("plugind_monitor_count", ctypes.c_int64, _handle)
_declare("plugind_monitor_identity_at", _handle, _handle, ctypes.c_int64, _error_out)
_declare("plugind_monitor_disabled_count", ctypes.c_int64, _handle)
_declare("plugind_monitor_unapproved_count", ctypes.c_int64, _handle)

_declare("plugind_identity_bundle_identifier", ctypes.c_char_p, _handle)
_declare("plugind_identity_name", ctypes.c_char_p, _handle)
_declare("plugind_identity_extension_point", ctypes.c_char_p, _handle)
_declare("plugind_identity_capability_count", ctypes.c_size_t, _handle)
_declare("plugind_identity_capability", ctypes.c_char_p, _handle, ctypes.c_size_t)
_declare("plugind_identity_release", None, _handle)

_declare("plugind_process_create", _handle, _handle, INTERRUPTION_HANDLER, ctypes.c_void_p, _error_out)
_declare("plugind_process_release", None, _handle)
_declare("plugind_process_pid", ctypes.c_int32, _handle)

_declare("plugind_ask_respond", ctypes.c_int, _handle, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t)
_declare("plugind_ask_fail", ctypes.c_int, _handle, ctypes.c_int32, ctypes.c_char_p)
_declare("plugind_connection_open", _handle, _handle, ASK_HANDLER, ctypes.c_void_p, _error_out)
_declare(
    "plugind_connection_send",
    ctypes.c_int,
    _handle,
    ctypes.POINTER(ctypes.c_uint8),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)),
    ctypes.POINTER(ctypes.c_size_t),
    _error_out,
)
_declare(
    "plugind_connection_send_async",
    ctypes.c_int,
    _handle,
    ctypes.POINTER(ctypes.c_uint8),
    ctypes.c_size_t,
    ctypes.c_uint32,
    SEND_COMPLETION,
    ctypes.c_void_p,
    _error_out,
)
_declare("plugind_connection_close", None, _handle)
_declare(
    "plugind_process_call",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(Value),
    _error_out,
)
_declare(
    "plugind_process_call_outputs",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(CallResult),
    _error_out,
)
_declare(
    "plugind_process_call_callbacks",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.POINTER(Callback),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(CallResult),
    _error_out,
)
_declare("plugind_call_result_free", None, ctypes.POINTER(CallResult))
_declare("plugind_handle_release", ctypes.c_int, _handle, ctypes.POINTER(Value), _error_out)
_declare("plugind_handle_drop", None, _handle, ctypes.POINTER(Value))

_declare("plugind_function_session_create", _handle, _handle, ctypes.c_uint32, _error_out)
_declare(
    "plugind_function_session_add_set_up",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    _error_out,
)
_declare("plugind_function_session_set_up_count", ctypes.c_size_t, _handle)
_declare(
    "plugind_function_session_set_up_result", ctypes.c_int, _handle, ctypes.c_size_t, ctypes.POINTER(CallResult), _error_out
)
_declare(
    "plugind_function_session_call",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(Value),
    _error_out,
)
_declare(
    "plugind_function_session_call_outputs",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(CallResult),
    _error_out,
)
_declare(
    "plugind_function_session_call_callbacks",
    ctypes.c_int,
    _handle,
    ctypes.c_char_p,
    ctypes.POINTER(Value),
    ctypes.c_size_t,
    ctypes.POINTER(Callback),
    ctypes.c_size_t,
    ctypes.c_uint32,
    ctypes.POINTER(CallResult),
    _error_out,
)
_declare("plugind_function_session_pid", ctypes.c_int32, _handle)
_declare("plugind_function_session_workers_started", ctypes.c_int64, _handle)
_declare("plugind_function_session_handle_release", ctypes.c_int, _handle, ctypes.POINTER(Value), _error_out)
_declare("plugind_function_session_handle_drop", None, _handle, ctypes.POINTER(Value))
_declare("plugind_function_session_release", None, _handle)
