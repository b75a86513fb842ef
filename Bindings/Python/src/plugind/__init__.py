"""Host plugind plugins from Python.

plugind runs each plugin (a shared library in a bundle the machine's owner approved) in its own
confined worker process; a plugin that crashes, hangs or misbehaves raises an exception here and
never takes the Python process down. This package is libplugind's C API through ctypes.

    monitor = plugind.Monitor("org.example.editor.text-filters", scope="none")
    for identity in monitor.identities:
        with plugind.Process(identity) as process:
            print(identity.name, process.connect().send(b"hello"))

Threads: every call may be made from any thread. Callbacks (`ask`, `on_interruption`) run on
plugind's threads, holding the GIL while they run; they must not call the blocking methods
(`Monitor()`, `Process()`, `connect`, `send`, `call`) — answer an ask by returning, or later
through `Ask.respond` from any thread. A typed call's `callbacks` are the exception: they run on
the thread that made the call, while it waits, and may call the same process (see `Process.call`;
not the same `FunctionSession`, whose calls run one at a time).
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import threading
import weakref
from typing import AsyncIterator, Callable, Dict, List, Optional, Union

from . import _errors
from ._errors import *  # noqa: F401,F403  (the exception classes are part of the API)
from ._native import (
    ASK_HANDLER,
    CALLBACK_HANDLER,
    INTERRUPTION_HANDLER,
    SEND_COMPLETION,
    TYPES,
    Callback,
    CallResult,
    Value,
    libc,
    library,
)
from .media import AudioEffect, AudioEffectChain, AudioPort, AudioTiming, VideoFilter, VideoParameter

__all__ = [
    "Monitor", "Identity", "Process", "Connection", "Ask", "CallOutputs", "Handle", "FunctionSession",
    "AudioEffect", "AudioEffectChain", "AudioPort", "AudioTiming", "VideoFilter", "VideoParameter",
] + _errors.__all__

_SCOPES = {"application": 0, "none": 1}

# The C callbacks are three module-level thunks that live as long as the module, each finding
# its Python callable by the context number plugind hands back. A thunk per call would be freed
# by the garbage collector while plugind may still call it (or while it is returning from the
# very call that dropped the last reference): a crash, not an exception.
_callbacks_lock = threading.Lock()
_callbacks = {}
_next_key = itertools.count(1)


def _register(callable_: Callable) -> int:
    key = next(_next_key)
    with _callbacks_lock:
        _callbacks[key] = callable_
    return key


def _lookup(key: Optional[int], remove: bool = False) -> Optional[Callable]:
    with _callbacks_lock:
        return _callbacks.pop(key, None) if remove else _callbacks.get(key)


def _unregister(key: int) -> None:
    _lookup(key, remove=True)


@ASK_HANDLER
def _on_ask(context, handle, data, length):
    handler = _lookup(context)
    if handler is None:
        library.plugind_ask_fail(handle, 1, b"the connection was closed")
        return
    handler(handle, ctypes.string_at(data, length) if length else b"")


@INTERRUPTION_HANDLER
def _on_interruption(context):
    handler = _lookup(context)
    if handler is not None:
        handler()


@SEND_COMPLETION
def _on_sent(context, reply, length, error):
    handler = _lookup(context, remove=True)
    if handler is None:
        if error:
            library.plugind_error_free(error)
        return
    handler(reply, length, error)


@CALLBACK_HANDLER
def _on_callback(context, arguments, count, result, message):
    handler = _lookup(context)
    if handler is None:  # never expected: the call unregisters its handlers only once it returned
        message[0] = libc.strdup(b"the handler is gone")
        return 1
    return handler(arguments, count, result, message)


def _buffer(data: bytes):
    return (ctypes.c_uint8 * len(data)).from_buffer_copy(data) if data else None


def _milliseconds(timeout: Optional[float]) -> int:
    if timeout is None:
        return 0
    if timeout <= 0:
        raise InvalidArgumentError("timeout must be positive, or None for the plugin's own deadline")  # noqa: F405
    return max(1, int(timeout * 1000))


def _values(arguments):
    """The plugind_values of a call's Python arguments, and the buffers they point into (keep
    them alive until the call returns)."""
    values = (Value * max(1, len(arguments)))()
    keep = []
    for index, argument in enumerate(arguments):
        value = values[index]
        if isinstance(argument, bool):
            value.type, value.payload.integer = TYPES["bool"], int(argument)
        elif isinstance(argument, int):
            if argument > 2**63 - 1:
                value.type, value.payload.unsigned_integer = TYPES["uint64"], argument
            else:
                value.type, value.payload.integer = TYPES["int64"], argument
        elif isinstance(argument, float):
            value.type, value.payload.real = TYPES["double"], argument
        elif isinstance(argument, Handle):
            kind = argument.kind.encode()
            keep.append(kind)
            value.type = TYPES["handle"]
            value.payload.handle.kind = kind
            value.payload.handle.id = argument.id
        elif isinstance(argument, (str, bytes)):
            data = argument.encode() if isinstance(argument, str) else argument
            buffer = _buffer(data)
            keep.append(buffer)
            value.type = TYPES["string"] if isinstance(argument, str) else TYPES["bytes"]
            value.payload.data.bytes = ctypes.cast(buffer, ctypes.POINTER(ctypes.c_uint8))
            value.payload.data.length = len(data)
        else:
            raise InvalidArgumentError(  # noqa: F405
                "argument %d: %r is not a bool, int, float, str, bytes or Handle" % (index, argument)
            )
    return values, keep


def _python_value(value: Value, process: Optional["Process"] = None):
    """A plugind_value as a Python value (None for void and a NULL handle); strings and bytes are
    copied, not freed; a handle is `process`'s `Handle` for its number."""
    kind = value.type
    if kind == TYPES["void"]:
        return None
    if kind == TYPES["handle"]:
        if value.payload.handle.id == 0 or process is None:
            return None
        return process._handle_for(value.payload.handle.kind.decode(), value.payload.handle.id)
    if kind == TYPES["bool"]:
        return bool(value.payload.integer)
    if kind in (TYPES["uint8"], TYPES["uint16"], TYPES["uint32"], TYPES["uint64"]):
        return value.payload.unsigned_integer
    if kind in (TYPES["int8"], TYPES["int16"], TYPES["int32"], TYPES["int64"]):
        return value.payload.integer
    if kind in (TYPES["float"], TYPES["double"]):
        return value.payload.real
    data = ctypes.string_at(value.payload.data.bytes, value.payload.data.length) if value.payload.data.length else b""
    return data.decode() if kind == TYPES["string"] else data


def _invoke(function, handle, name: str, arguments, timeout: Optional[float], result) -> None:
    """Calls `function` (a plugind_*_call or _call_outputs) with `arguments` converted to C values,
    filling `result`; raises the call's error."""
    values, keep = _values(arguments)
    error = ctypes.c_void_p()
    status = function(
        handle, name.encode(), values, len(arguments), _milliseconds(timeout), ctypes.byref(result), ctypes.byref(error)
    )
    del keep
    if status != 0:
        _errors.raise_if(error)


def _call(function, handle, owner, name: str, arguments, timeout: Optional[float]):
    """One call through `function` (plugind_process_call or the session's): its value as a Python
    value, handles `owner`'s."""
    result = Value()
    _invoke(function, handle, name, arguments, timeout, result)
    converted = _python_value(result, owner)
    if result.type in (TYPES["string"], TYPES["bytes"]):
        library.plugind_bytes_free(result.payload.data.bytes)
    return converted


def _call_with_outputs(function, handle, owner, name: str, arguments, timeout: Optional[float]) -> "CallOutputs":
    """One call through `function` (plugind_process_call_outputs or the session's): its value,
    each output by argument name, and errno where declared."""
    result = CallResult()
    _invoke(function, handle, name, arguments, timeout, result)
    return _outputs(result, owner)


def _store_return(returned, value: Value) -> None:
    """A callback handler's Python result as the plugind_value libplugind converts to the declared
    return type (None for void)."""
    if returned is None:
        value.type = TYPES["void"]
    elif isinstance(returned, bool):
        value.type, value.payload.integer = TYPES["bool"], int(returned)
    elif isinstance(returned, int):
        if not -(2**63) <= returned < 2**64:
            raise OverflowError("the handler returned %d, beyond 64 bits" % returned)
        if returned > 2**63 - 1:
            value.type, value.payload.unsigned_integer = TYPES["uint64"], returned
        else:
            value.type, value.payload.integer = TYPES["int64"], returned
    elif isinstance(returned, float):
        value.type, value.payload.real = TYPES["double"], returned
    else:
        raise TypeError("the handler returned %r; a callback returns None, a bool, an int or a float" % (returned,))


def _callback_handler(function: Callable, failures: list):
    """What _on_callback calls for one of a call's callbacks: `function` with the callback's
    arguments as Python values, its result stored for libplugind. An exception fails the call with
    its text; it is kept in `failures`, for the call to raise from."""

    def answer(arguments, count, result, message) -> int:
        try:
            values = [_python_value(arguments[index]) for index in range(count)]
            _store_return(function(*values), result[0])
            return 0
        except BaseException as failure:  # noqa: B036 (even KeyboardInterrupt must not unwind into C)
            failures.append(failure)
            text = "%s: %s" % (type(failure).__name__, failure) if str(failure) else type(failure).__name__
            message[0] = libc.strdup(text.encode("utf-8", "replace"))
            return 1

    return answer


def _call_callbacks(
    function, handle, owner, name: str, arguments, callbacks, timeout: Optional[float]
) -> "CallOutputs":
    """One call through `function` (plugind_process_call_callbacks or the session's): `callbacks`
    (name → callable) answer the library's calls of the function's callbacks, on this thread, while
    the call waits."""
    if not isinstance(callbacks, dict) or not all(
        isinstance(key, str) and callable(value) for key, value in callbacks.items()
    ):
        raise InvalidArgumentError("callbacks must be a dict of callback names to callables")  # noqa: F405
    values, keep = _values(arguments)
    failures: list = []
    keys = [_register(_callback_handler(function, failures)) for function in callbacks.values()]
    table = (Callback * max(1, len(callbacks)))()
    for index, (callback_name, key) in enumerate(zip(callbacks, keys)):
        encoded = callback_name.encode()
        keep.append(encoded)
        table[index].name = encoded
        table[index].handler = _on_callback
        table[index].context = key
    result = CallResult()
    error = ctypes.c_void_p()
    try:
        status = function(
            handle, name.encode(), values, len(arguments), table, len(callbacks), _milliseconds(timeout),
            ctypes.byref(result), ctypes.byref(error)
        )
    finally:
        for key in keys:
            _unregister(key)
    del keep
    if status != 0:
        if not error.value:
            raise Error("libplugind reported a failure without an error")  # noqa: F405
        failure = _errors.from_handle(error)
        raised = failures[0] if failures else None
        if raised is not None and not isinstance(raised, Exception):
            raise raised  # KeyboardInterrupt, SystemExit: the handler's, once the call is over
        raise failure from raised
    return _outputs(result, owner)


def _outputs(result: "CallResult", owner) -> "CallOutputs":
    """A call's result as CallOutputs; the C result is freed."""
    try:
        outputs = {
            result.outputs[index].name.decode(): _python_value(result.outputs[index].value, owner)
            for index in range(result.output_count)
        }
        return CallOutputs(_python_value(result.value, owner), outputs, result.error_number if result.has_errno else None)
    finally:
        library.plugind_call_result_free(ctypes.byref(result))


class Handle:
    """An opaque pointer a library gave out (a `sqlite3 *`), of a `kind` the manifest's "handles"
    declares, held by its number (`id`) in the worker's table: pass it to later calls of the same
    process. `release()` calls the kind's release function; dropping the last reference releases
    it too, in the background. Passing it to the release function yourself consumes it. A handle
    lives only as long as its process; the library never sees a number it did not give out."""

    __slots__ = ("kind", "id", "_process", "_released", "__weakref__")

    def __init__(self, process: "Process", kind: str, id: int):
        self.kind = kind
        self.id = id
        self._process = process
        self._released = False

    def _value(self) -> Value:
        value = Value()
        value.type = TYPES["handle"]
        value.payload.handle.kind = None
        value.payload.handle.id = self.id
        return value

    def release(self) -> None:
        """Calls the kind's release function, once (later calls do nothing). Raises the call's
        error; blocking."""
        if self._released or not self._process._handle.value:
            return
        self._released = True
        error = ctypes.c_void_p()
        if library.plugind_handle_release(self._process._handle, ctypes.byref(self._value()), ctypes.byref(error)) != 0:
            _errors.raise_if(error)

    def __del__(self) -> None:
        process = getattr(self, "_process", None)
        if process is None or getattr(self, "_released", True) or not process._handle.value:
            return
        self._released = True
        library.plugind_handle_drop(process._handle, ctypes.byref(self._value()))

    def __repr__(self) -> str:
        return "Handle('%s#%d')" % (self.kind, self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and (other.kind, other.id) == (self.kind, self.id)

    def __hash__(self) -> int:
        return hash((self.kind, self.id))


class CallOutputs:
    """What `Process.call_with_outputs` returns: `value` (the function's), `outputs` (each out or
    inout argument's value by name) and `errno` (None unless declared)."""

    __slots__ = ("value", "outputs", "errno")

    def __init__(self, value, outputs, errno):
        self.value = value
        self.outputs = outputs
        self.errno = errno

    def __repr__(self) -> str:
        return "CallOutputs(value=%r, outputs=%r, errno=%r)" % (self.value, self.outputs, self.errno)


class Identity:
    """One plugin as a Monitor lists it: `bundle_identifier`, `name`, `extension_point`, and
    `capabilities` (what it implements within its point, e.g. media types, read without running it)."""

    def __init__(self, handle: int):
        self._handle = ctypes.c_void_p(handle)
        self.bundle_identifier: str = library.plugind_identity_bundle_identifier(self._handle).decode()
        self.name: str = library.plugind_identity_name(self._handle).decode()
        self.extension_point: str = library.plugind_identity_extension_point(self._handle).decode()
        self.capabilities: tuple[str, ...] = tuple(
            library.plugind_identity_capability(self._handle, index).decode()
            for index in range(library.plugind_identity_capability_count(self._handle))
        )

    def __repr__(self) -> str:
        return "Identity(%r, name=%r)" % (self.bundle_identifier, self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.bundle_identifier == self.bundle_identifier

    def __hash__(self) -> int:
        return hash(self.bundle_identifier)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            library.plugind_identity_release(handle)


class Monitor:
    """The usable plugins of one extension point (its full identifier), kept current.

    `scope="none"` admits the plugins the owner installed and approved; `"application"` only
    those shipped with the host. `identities`, `disabled_count` and `unapproved_count` are the
    state taken by the last `update()` (made by the constructor and by `updates()`).
    """

    def __init__(self, point: str, scope: str = "none"):
        if scope not in _SCOPES:
            raise InvalidArgumentError("scope must be 'none' or 'application', not %r" % (scope,))  # noqa: F405
        error = ctypes.c_void_p()
        handle = library.plugind_monitor_create(point.encode(), _SCOPES[scope], ctypes.byref(error))
        if not handle:
            _errors.raise_if(error)
        self._handle = ctypes.c_void_p(handle)
        self._take()

    def _take(self) -> None:
        count = library.plugind_monitor_count(self._handle)
        if count < 0:
            raise InvalidArgumentError("the monitor was closed")  # noqa: F405
        identities = []
        for index in range(count):
            error = ctypes.c_void_p()
            handle = library.plugind_monitor_identity_at(self._handle, index, ctypes.byref(error))
            if not handle:
                _errors.raise_if(error)
            identities.append(Identity(handle))
        self.identities: List[Identity] = identities
        self.disabled_count: int = library.plugind_monitor_disabled_count(self._handle)
        self.unapproved_count: int = library.plugind_monitor_unapproved_count(self._handle)

    def fileno(self) -> int:
        """A descriptor that becomes readable when the state changed: for select, poll or a loop."""
        return library.plugind_monitor_fd(self._handle)

    def update(self) -> bool:
        """Takes the latest state; True when it changed. Never blocks."""
        changed = library.plugind_monitor_update(self._handle)
        if changed < 0:
            raise InvalidArgumentError("the monitor was closed")  # noqa: F405
        if changed:
            self._take()
        return bool(changed)

    async def updates(self) -> AsyncIterator[List[Identity]]:
        """Yields the identities now, then each time they or the counts change."""
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(self.fileno(), readable.set)
        try:
            yield self.identities
            while True:
                await readable.wait()
                readable.clear()
                if self.update():
                    yield self.identities
        finally:
            loop.remove_reader(self.fileno())

    def close(self) -> None:
        """Stops watching."""
        if self._handle.value:
            library.plugind_monitor_release(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exception) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()


class Ask:
    """A question the plugin asked; `data` is its bytes. Answer it once with `respond` or `fail`,
    from any thread, now or later."""

    def __init__(self, handle: int, data: bytes):
        self._handle = ctypes.c_void_p(handle)
        self.data = data

    def respond(self, data: bytes) -> bool:
        """Answers; False when it was answered already or the connection closed meanwhile."""
        return library.plugind_ask_respond(self._handle, _buffer(data), len(data)) == 0

    def fail(self, message: str, code: int = 1) -> bool:
        """Makes the plugin's ask fail with `code` and `message`."""
        return library.plugind_ask_fail(self._handle, code, message.encode()) == 0


AskHandler = Callable[[bytes], Union[bytes, None]]


class Connection:
    """A connection to a plugin. `send` waits for the reply; `send_async` awaits it."""

    def __init__(self, process: "Process", ask: Optional[Callable[[Ask], Optional[bytes]]]):
        def on_ask(handle, data):
            question = Ask(handle, data)
            try:
                answer = ask(question)
            except Exception as failure:  # a raising handler fails the ask, never the host
                question.fail("%s: %s" % (type(failure).__name__, failure))
                return
            if answer is not None:
                question.respond(bytes(answer))

        self._ask_key = _register(on_ask) if ask is not None else None
        handler = _on_ask if ask is not None else ctypes.cast(None, ASK_HANDLER)
        error = ctypes.c_void_p()
        handle = library.plugind_connection_open(process._handle, handler, self._ask_key, ctypes.byref(error))
        if not handle:
            if self._ask_key is not None:
                _unregister(self._ask_key)
            _errors.raise_if(error)
        self._handle = ctypes.c_void_p(handle)

    def send(self, data: bytes, timeout: Optional[float] = None) -> bytes:
        """Sends `data` and returns the plugin's reply; `timeout` in seconds (None: the plugin's)."""
        reply = ctypes.POINTER(ctypes.c_uint8)()
        length = ctypes.c_size_t()
        error = ctypes.c_void_p()
        status = library.plugind_connection_send(
            self._handle, _buffer(data), len(data), _milliseconds(timeout), ctypes.byref(reply), ctypes.byref(length),
            ctypes.byref(error)
        )
        if status != 0:
            _errors.raise_if(error)
        try:
            return ctypes.string_at(reply, length.value)
        finally:
            library.plugind_bytes_free(reply)

    async def send_async(self, data: bytes, timeout: Optional[float] = None) -> bytes:
        """Sends `data` without blocking the event loop and returns the reply."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result):
            if not future.done():
                if isinstance(result, Exception):
                    future.set_exception(result)
                else:
                    future.set_result(result)

        def completed(reply, length, error):
            result = _errors.from_handle(ctypes.c_void_p(error)) if error else ctypes.string_at(reply, length)
            try:
                loop.call_soon_threadsafe(settle, result)
            except RuntimeError:  # the event loop closed before the reply came
                pass

        key = _register(completed)
        error = ctypes.c_void_p()
        if library.plugind_connection_send_async(
            self._handle, _buffer(data), len(data), _milliseconds(timeout), _on_sent, key, ctypes.byref(error)
        ) != 0:
            _unregister(key)
            _errors.raise_if(error)
        return await future

    def close(self) -> None:
        """Closes the connection: waiting requests fail with ConnectionClosedError."""
        if self._handle.value:
            library.plugind_connection_close(self._handle)
            self._handle = ctypes.c_void_p()
        if self._ask_key is not None:
            _unregister(self._ask_key)
            self._ask_key = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exception) -> None:
        self.close()


class Process:
    """A plugin running in its confined worker process. Use it in a `with` block: leaving it ends
    the process. `on_interruption` is called (on a plugind thread) if the process ends first."""

    def __init__(self, identity: Identity, on_interruption: Optional[Callable[[], None]] = None):
        def interrupted():
            if on_interruption is not None:
                try:
                    on_interruption()
                except Exception:  # the host's callback must not unwind into plugind
                    pass

        self._interruption_key = _register(interrupted)
        error = ctypes.c_void_p()
        handle = library.plugind_process_create(identity._handle, _on_interruption, self._interruption_key, ctypes.byref(error))
        if not handle:
            _unregister(self._interruption_key)
            _errors.raise_if(error)
        self._handle = ctypes.c_void_p(handle)
        # One Handle per number while any is alive: dropping one of two copies must not release
        # what the other still names.
        self._handles: "weakref.WeakValueDictionary[int, Handle]" = weakref.WeakValueDictionary()
        self._handles_lock = threading.Lock()

    def _handle_for(self, kind: str, id: int) -> Handle:
        with self._handles_lock:
            handle = self._handles.get(id)
            if handle is None or handle.kind != kind or handle._released:
                handle = Handle(self, kind, id)
                self._handles[id] = handle
            return handle

    @property
    def pid(self) -> int:
        """The worker's process ID."""
        return library.plugind_process_pid(self._handle)

    def connect(self, ask: Optional[Callable[[Ask], Optional[bytes]]] = None) -> Connection:
        """Opens a connection. `ask(question)` answers the plugin's questions: return the bytes,
        or return None and call `question.respond(...)` later from any thread; raising fails the
        plugin's ask with the exception's text."""
        return Connection(self, ask)

    def call(
        self,
        name: str,
        *arguments: Union[bool, int, float, str, bytes],
        timeout: Optional[float] = None,
        callbacks: Optional[Dict[str, Callable]] = None,
    ):
        """Calls a function the plugin's manifest declares; arguments are converted to the declared
        types (an int out of the declared range raises CallError). Returns the result as a Python
        value (None for void).

        `callbacks` holds a callable for each callback argument the function declares, by the
        argument's name (`{"compar": lambda a, b: ...}`; a missing or unknown name raises CallError
        before anything is sent). The library's calls of a callback call it with the callback's
        arguments (int, float, bool; str for a string; bytes for a buffer) on this thread, while the
        call waits; it returns the callback's value (an int, float or bool; None for void). It may
        call this process (`call`, `call_with_outputs`): those calls run while the library waits.
        When it raises, the call raises CallbackError with the exception's text, the exception as
        its cause, and the library gets 0 from its callbacks until the call returns."""
        if callbacks is not None:
            return _call_callbacks(
                library.plugind_process_call_callbacks, self._handle, self, name, arguments, callbacks, timeout
            ).value
        return _call(library.plugind_process_call, self._handle, self, name, arguments, timeout)

    def call_with_outputs(
        self,
        name: str,
        *arguments: Union[bool, int, float, str, bytes],
        timeout: Optional[float] = None,
        callbacks: Optional[Dict[str, Callable]] = None,
    ) -> "CallOutputs":
        """Calls a function whose declaration has out or inout pointers and buffers, or errno.
        `arguments` are the declaration's inputs in order: every argument but NULL, out pointers,
        out buffers and the counts of in buffers (taken from the buffers' lengths); bytes for an in
        or inout buffer, the value for an inout pointer, the capacity for a length ("*len").
        Returns the function's value, each out value by argument name (buffers as bytes, as many
        as the function used) and errno where declared. A library that reports a length beyond the
        capacity it was given raises CrashedError (protocolViolation), naming the function and the
        argument; its worker is stopped. `callbacks` as for `call`."""
        if callbacks is not None:
            return _call_callbacks(
                library.plugind_process_call_callbacks, self._handle, self, name, arguments, callbacks, timeout
            )
        return _call_with_outputs(library.plugind_process_call_outputs, self._handle, self, name, arguments, timeout)

    def close(self) -> None:
        """Ends the process."""
        if self._handle.value:
            library.plugind_process_release(self._handle)  # no interruption after this returns
            self._handle = ctypes.c_void_p()
            _unregister(self._interruption_key)

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exception) -> None:
        self.close()


class _SessionHandle(Handle):
    """A Handle a FunctionSession's call returned: released through the session."""

    __slots__ = ()

    def release(self) -> None:
        if self._released or not self._process._handle.value:
            return
        self._released = True
        error = ctypes.c_void_p()
        if library.plugind_function_session_handle_release(
            self._process._handle, ctypes.byref(self._value()), ctypes.byref(error)
        ) != 0:
            _errors.raise_if(error)

    def __del__(self) -> None:
        session = getattr(self, "_process", None)
        if session is None or getattr(self, "_released", True) or not session._handle.value:
            return
        self._released = True
        library.plugind_function_session_handle_drop(session._handle, ctypes.byref(self._value()))


class FunctionSession:
    """Typed calls of one plugin's declared functions that survive the library's crashes (Sandboxed
    API's Transaction), for decoders of hostile input.

    The session starts a worker when first needed and runs the `set_up` calls on it in order
    (each a tuple: the function's name, then its arguments; values, never handles). When the worker
    ends during a call (a crash, a resource limit), that call raises one error naming the function
    and the cause (CrashedError, LimitExceededError); the next call starts a new worker and replays
    the set-up calls first. `fresh_worker_every=N` recycles the worker after N calls.

    Handles live in the worker that gave them out: `set_up_results` are the set-up calls' results
    on the current worker (read them again after a crash); passing a handle of an earlier worker
    raises CallError naming the function and the argument. A call a crash interrupted is lost, not
    retried; set-up calls run again on every new worker, side effects included. Calls from several
    threads run one at a time, in the order they reach the session."""

    def __init__(self, identity: Identity, fresh_worker_every: Optional[int] = None, set_up=()):
        if fresh_worker_every is not None and fresh_worker_every < 1:
            raise InvalidArgumentError("fresh_worker_every must be at least 1, or None")  # noqa: F405
        error = ctypes.c_void_p()
        handle = library.plugind_function_session_create(identity._handle, fresh_worker_every or 0, ctypes.byref(error))
        if not handle:
            _errors.raise_if(error)
        self._handle = ctypes.c_void_p(handle)
        self._handles: "weakref.WeakValueDictionary[int, Handle]" = weakref.WeakValueDictionary()
        self._handles_lock = threading.Lock()
        for call in set_up:
            self.add_set_up(call[0], *call[1:])

    def _handle_for(self, kind: str, id: int) -> Handle:
        with self._handles_lock:
            handle = self._handles.get(id)
            if handle is None or handle.kind != kind or handle._released:
                handle = _SessionHandle(self, kind, id)
                self._handles[id] = handle
            return handle

    def add_set_up(self, name: str, *arguments: Union[bool, int, float, str, bytes]) -> None:
        """Adds a set-up call after the others: it runs on every new worker, and on the running one
        before the next call. Starts the worker when none runs (to learn the declared types)."""
        values, keep = _values(arguments)
        error = ctypes.c_void_p()
        if library.plugind_function_session_add_set_up(
            self._handle, name.encode(), values, len(arguments), ctypes.byref(error)
        ) != 0:
            _errors.raise_if(error)
        del keep

    @property
    def set_up_results(self) -> List[CallOutputs]:
        """What each set-up call returned on the current worker, starting one and replaying the
        set-up calls when none runs."""
        results = []
        for index in range(library.plugind_function_session_set_up_count(self._handle)):
            result = CallResult()
            error = ctypes.c_void_p()
            if library.plugind_function_session_set_up_result(self._handle, index, ctypes.byref(result), ctypes.byref(error)) != 0:
                _errors.raise_if(error)
            results.append(_outputs(result, self))
        return results

    @property
    def pid(self) -> Optional[int]:
        """The current worker's process ID; None when none runs (after a crash until the next call)."""
        pid = library.plugind_function_session_pid(self._handle)
        return None if pid < 0 else pid

    @property
    def workers_started(self) -> int:
        """How many workers the session has started."""
        return library.plugind_function_session_workers_started(self._handle)

    def call(
        self,
        name: str,
        *arguments: Union[bool, int, float, str, bytes, Handle],
        timeout: Optional[float] = None,
        callbacks: Optional[Dict[str, Callable]] = None,
    ):
        """Process.call on the session's worker, started (and set up) first when none runs.

        `callbacks` as for Process.call: each runs on this thread while the call waits, and an
        exception it raises makes the call raise CallbackError with the exception as its cause; the
        session goes on with the same worker. A callback may call other sessions and processes, but
        not this session, whose calls run one at a time: such a call raises CallError
        (invalidArguments) in the callback."""
        if callbacks is not None:
            return _call_callbacks(
                library.plugind_function_session_call_callbacks, self._handle, self, name, arguments, callbacks, timeout
            ).value
        return _call(library.plugind_function_session_call, self._handle, self, name, arguments, timeout)

    def call_with_outputs(
        self,
        name: str,
        *arguments: Union[bool, int, float, str, bytes, Handle],
        timeout: Optional[float] = None,
        callbacks: Optional[Dict[str, Callable]] = None,
    ) -> CallOutputs:
        """Process.call_with_outputs on the session's worker; `callbacks` as for `call`."""
        if callbacks is not None:
            return _call_callbacks(
                library.plugind_function_session_call_callbacks, self._handle, self, name, arguments, callbacks, timeout
            )
        return _call_with_outputs(
            library.plugind_function_session_call_outputs, self._handle, self, name, arguments, timeout
        )

    def close(self) -> None:
        """Ends the session's worker and waits until every worker it started has exited."""
        if self._handle.value:
            library.plugind_function_session_release(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self) -> "FunctionSession":
        return self

    def __exit__(self, *exception) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()
