"""The exceptions of plugind: one class per family of error codes, all subclasses of Error."""

from __future__ import annotations

import ctypes

from ._native import library

__all__ = [
    "Error",
    "InvalidArgumentError",
    "NotFoundError",
    "LaunchError",
    "NotApprovedError",
    "CrashedError",
    "TimedOutError",
    "CancelledError",
    "LimitExceededError",
    "PluginError",
    "CallError",
    "CallbackError",
    "ConnectionClosedError",
    "CODES",
]

# plugind_error_code, by the names AppExtensionError.Code uses.
CODES = {
    1: "invalidArgument",
    2: "workerNotFound",
    3: "spawnFailed",
    4: "incompatibleProtocol",
    5: "pluginLoadFailed",
    6: "symbolMissing",
    7: "abiMismatch",
    8: "confinementUnavailable",
    9: "workerCrashed",
    10: "workerExited",
    11: "limitExceeded",
    12: "timedOut",
    13: "cancelled",
    14: "protocolViolation",
    15: "pluginError",
    16: "notFound",
    17: "notApproved",
    18: "quarantined",
    19: "unknownFunction",
    20: "invalidArguments",
    21: "unsupported",
    22: "invalidated",
    23: "configurationError",
    24: "bundleChanged",
    25: "connectionRefused",
    26: "connectionClosed",
    27: "disabledByOwner",
    28: "workerKilled",
    29: "callbackFailed",
}


class Error(Exception):
    """An error of plugind. `code` is the name of its AppExtensionError code (e.g. "workerCrashed"),
    `number` the plugind_error_code, `plugin_code` a plugin's own error code (for PluginError)."""

    def __init__(
        self, message: str, code: str = "invalidArgument", number: int = 1, plugin_code: int = 0, backtrace: tuple = ()
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.number = number
        self.plugin_code = plugin_code
        #: Where the plugin was, innermost frame first, one line each ("#0 parse+0x1c in
        #: libparser.so (parser.c:42)"): a crash's frames, or a timed-out request's.
        self.backtrace = tuple(backtrace)


class InvalidArgumentError(Error, ValueError):
    """Misuse of the API: a closed handle, an index out of range, text that is not UTF-8."""


class NotFoundError(Error):
    """The worker or the plugin is not where it should be (workerNotFound, notFound)."""


class LaunchError(Error):
    """The plugin could not be started or loaded (spawn, protocol, library, ABI, confinement,
    configuration, bundle changed since the approval)."""


class NotApprovedError(Error):
    """The owner has not approved the plugin, disabled it, or it is quarantined."""


class CrashedError(Error):
    """The worker crashed, exited, broke the protocol, or was killed from outside (workerKilled)."""


class TimedOutError(Error, TimeoutError):
    """A request or an ask reached its deadline."""


class CancelledError(Error):
    """The request was cancelled."""


class LimitExceededError(Error):
    """The plugin ran into one of its limits (memory, CPU, open files, message size)."""


class PluginError(Error):
    """The plugin's handler returned an error; `plugin_code` is its code."""


class CallError(Error):
    """A typed call named an unknown function or gave arguments of other types, or the plugin does
    not handle requests."""


class CallbackError(CallError):
    """A typed call's callback handler raised or returned a value of another type than the callback
    declares (callbackFailed); the message says which and why. Raised from the call, with the
    handler's exception as its `__cause__` when there was one."""


class ConnectionClosedError(Error):
    """The connection was refused or closed, or the process ended."""


_FAMILIES = {
    "invalidArgument": InvalidArgumentError,
    "workerNotFound": NotFoundError,
    "notFound": NotFoundError,
    "spawnFailed": LaunchError,
    "incompatibleProtocol": LaunchError,
    "pluginLoadFailed": LaunchError,
    "symbolMissing": LaunchError,
    "abiMismatch": LaunchError,
    "confinementUnavailable": LaunchError,
    "configurationError": LaunchError,
    "bundleChanged": LaunchError,
    "notApproved": NotApprovedError,
    "quarantined": NotApprovedError,
    "disabledByOwner": NotApprovedError,
    "workerCrashed": CrashedError,
    "workerExited": CrashedError,
    "workerKilled": CrashedError,
    "protocolViolation": CrashedError,
    "timedOut": TimedOutError,
    "cancelled": CancelledError,
    "limitExceeded": LimitExceededError,
    "pluginError": PluginError,
    "unknownFunction": CallError,
    "invalidArguments": CallError,
    "unsupported": CallError,
    "callbackFailed": CallbackError,
    "connectionRefused": ConnectionClosedError,
    "connectionClosed": ConnectionClosedError,
    "invalidated": ConnectionClosedError,
}


def from_handle(handle: ctypes.c_void_p) -> Error:
    """The exception for a plugind_error, which is freed."""
    number = library.plugind_error_code_of(handle)
    message = library.plugind_error_message(handle).decode("utf-8", "replace")
    plugin_code = library.plugind_error_plugin_code(handle)
    backtrace = tuple(
        library.plugind_error_frame(handle, index).decode("utf-8", "replace")
        for index in range(library.plugind_error_frame_count(handle))
    )
    library.plugind_error_free(handle)
    code = CODES.get(number, "pluginError")
    return _FAMILIES.get(code, Error)(message, code, number, plugin_code, backtrace)


def raise_if(handle: ctypes.c_void_p) -> None:
    """Raises the error a failed call stored, or a generic one when it stored none."""
    if handle.value:
        raise from_handle(handle)
    raise Error("libplugind reported a failure without an error")
