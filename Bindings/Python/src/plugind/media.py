"""LADSPA audio effects and frei0r video filters, unchanged, in their confined workers.

A process of a LADSPA plugin (`plugind scan` lists them as ladspa.<library>.<label>) becomes an
`AudioEffect`, effects in a row an `AudioEffectChain`; one of a frei0r plugin (frei0r.<library>) a
`VideoFilter`. Samples and frames are
memoryviews straight over the memory the worker shares with this process (no copy): write the
inputs, `run` or `update`, read the outputs. One effect or filter per process, used by one thread
at a time.

The memory stays mapped while any view of it lives, even after `close()`: a view handed out is
released by `close()` (using it then raises ValueError), and one the caller derived from it (a
memoryview of it, a numpy array) keeps the memory, never a dangling pointer.
"""

from __future__ import annotations

import ctypes
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _errors
from ._errors import CallError, InvalidArgumentError
from ._native import library

__all__ = ["AudioEffect", "AudioEffectChain", "AudioPort", "AudioTiming", "VideoFilter", "VideoParameter"]

_handle = ctypes.c_void_p
_error_out = ctypes.POINTER(ctypes.c_void_p)


class _AudioPort(ctypes.Structure):
    """plugind_audio_port."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("has_lower_bound", ctypes.c_int),
        ("has_upper_bound", ctypes.c_int),
        ("lower_bound", ctypes.c_float),
        ("upper_bound", ctypes.c_float),
        ("default_value", ctypes.c_float),
    ]


class _AudioTiming(ctypes.Structure):
    """plugind_audio_timing."""

    _fields_ = [
        ("blocks", ctypes.c_uint64),
        ("missed_blocks", ctypes.c_uint64),
        ("longest_run_ns", ctypes.c_uint64),
    ]


def _declare(name: str, result, *arguments) -> None:
    function = getattr(library, name)
    function.restype = result
    function.argtypes = list(arguments)


_declare("plugind_audio_effect_create", _handle, _handle, ctypes.c_uint32, ctypes.c_uint32, _error_out)
_declare("plugind_audio_effect_port_count", ctypes.c_size_t, _handle)
_declare("plugind_audio_effect_port", ctypes.c_int, _handle, ctypes.c_size_t, ctypes.POINTER(_AudioPort))
_declare("plugind_audio_effect_samples", ctypes.c_void_p, _handle, ctypes.c_size_t)
_declare("plugind_audio_effect_set_control", ctypes.c_int, _handle, ctypes.c_size_t, ctypes.c_float, _error_out)
_declare("plugind_audio_effect_control", ctypes.c_int, _handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_float))
_declare("plugind_audio_effect_run", ctypes.c_int, _handle, ctypes.c_uint32, ctypes.c_uint32, _error_out)
_declare("plugind_audio_effect_timing", ctypes.c_int, _handle, ctypes.POINTER(_AudioTiming))
_declare("plugind_audio_effect_release", None, _handle)

_declare("plugind_audio_chain_create", _handle, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, _error_out)
_declare("plugind_audio_chain_input_count", ctypes.c_size_t, _handle)
_declare("plugind_audio_chain_output_count", ctypes.c_size_t, _handle)
_declare("plugind_audio_chain_input", ctypes.c_void_p, _handle, ctypes.c_size_t)
_declare("plugind_audio_chain_output", ctypes.c_void_p, _handle, ctypes.c_size_t)
_declare("plugind_audio_chain_run", ctypes.c_int, _handle, ctypes.c_uint32, ctypes.c_uint32, _error_out)
_declare("plugind_audio_chain_timing", ctypes.c_int, _handle, ctypes.POINTER(_AudioTiming))
_declare("plugind_audio_chain_release", None, _handle)

_declare("plugind_video_filter_create", _handle, _handle, ctypes.c_uint32, ctypes.c_uint32, _error_out)
_declare("plugind_video_filter_input_count", ctypes.c_size_t, _handle)
_declare("plugind_video_filter_input", ctypes.c_void_p, _handle, ctypes.c_size_t)
_declare("plugind_video_filter_output", ctypes.c_void_p, _handle)
_declare("plugind_video_filter_parameter_count", ctypes.c_size_t, _handle)
_declare(
    "plugind_video_filter_parameter",
    ctypes.c_int,
    _handle,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_char_p),
    ctypes.POINTER(ctypes.c_int),
)
_declare(
    "plugind_video_filter_set_parameter",
    ctypes.c_int,
    _handle,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_double),
    ctypes.c_size_t,
    ctypes.c_char_p,
    _error_out,
)
_declare("plugind_video_filter_update", ctypes.c_int, _handle, ctypes.c_double, ctypes.c_uint32, _error_out)
_declare("plugind_video_filter_release", None, _handle)

# plugind_port_kind and plugind_parameter_type, by name.
_PORT_KINDS = ("audio_input", "audio_output", "control_input", "control_output")
_PARAMETER_TYPES = ("bool", "double", "color", "position", "string")


class AudioPort(NamedTuple):
    """One port of an AudioEffect. `kind` is "audio_input", "audio_output", "control_input" or
    "control_output"; the bounds are the plugin's (None when it declares none), scaled by the
    sample rate where it says so; `default` is a control input's starting value (None for the
    other ports)."""

    index: int
    name: str
    kind: str
    lower_bound: Optional[float]
    upper_bound: Optional[float]
    default: Optional[float]


class AudioTiming(NamedTuple):
    """How the runs of an AudioEffect or AudioEffectChain went against their blocks' real-time
    period (frames / sample rate): `blocks` runs completed, `missed_blocks` of them took longer
    than their block lasts, the longest `longest_run` seconds from the request to its answer. A
    real-time host reads these rather than waiting longer; `run`'s timeout bounds how long it can
    wait at all."""

    blocks: int
    missed_blocks: int
    longest_run: float


def _timing(function, handle: ctypes.c_void_p) -> AudioTiming:
    """plugind_audio_effect_timing or plugind_audio_chain_timing of `handle`."""
    figures = _AudioTiming()
    if function(handle, ctypes.byref(figures)) != 0:
        raise InvalidArgumentError("no timing for a closed effect or chain")
    return AudioTiming(figures.blocks, figures.missed_blocks, figures.longest_run_ns / 1e9)


class VideoParameter(NamedTuple):
    """One parameter of a VideoFilter. `type` is "bool", "double", "color", "position" or
    "string" (None for a type frei0r does not define, which cannot be set)."""

    index: int
    name: str
    type: Optional[str]


class _Owner:
    """The C handle of an effect or filter. The memory its views show lives as long as the handle:
    every buffer a view is made over refers to this object, so the handle is released when it has
    been closed and the last view made from it is gone, never while one can still be read."""

    __slots__ = ("handle", "release", "__weakref__")

    def __init__(self, handle: int, release):
        self.handle = ctypes.c_void_p(handle)
        self.release = release

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None and handle.value:
            self.release(handle)
            self.handle = ctypes.c_void_p()


def _milliseconds(timeout: Optional[float]) -> int:
    if timeout is None:
        return 0
    if not timeout > 0:
        raise InvalidArgumentError("timeout must be positive, or None for the plugin's own deadline")
    return max(1, min(int(timeout * 1000), 2**32 - 1))


def _size(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise InvalidArgumentError("%s must be an int from 0 to 2**32 - 1, not %r" % (what, value))
    return value


class _Shared:
    """What AudioEffect and VideoFilter share: the owner of the handle, the views handed out, and
    closing."""

    def _start(self, handle: int, release) -> None:
        self._owner: Optional[_Owner] = _Owner(handle, release)
        # One view per port or frame, handed out again while it is not released: a host that asks
        # for its buffers every block makes no new objects.
        self._views: Dict[Tuple[str, int], memoryview] = {}

    @property
    def _handle(self) -> ctypes.c_void_p:
        if self._owner is None:
            raise InvalidArgumentError("the %s was closed" % type(self).__name__)
        return self._owner.handle

    def _view(self, key: Tuple[str, int], address: int, count: int, item: str, readonly: bool = False) -> memoryview:
        """The memoryview of `count` items (format `item`, "B" or "f") at `address`, keeping the
        handle alive; `key` names it among the views handed out."""
        view = self._views.get(key)
        if view is not None:
            try:
                view.nbytes  # raises ValueError once the caller released it
                return view
            except ValueError:
                pass
        buffer = (ctypes.c_uint8 * (count * (4 if item == "f" else 1))).from_address(address)
        buffer._plugind_owner = self._owner  # the memory is the handle's: it must outlive the view
        view = memoryview(buffer).cast("B")
        if item != "B":
            view = view.cast(item)
        if readonly:
            view = view.toreadonly()
        self._views[key] = view
        return view

    def close(self) -> None:
        """Releases the effect or filter (the process stays: close it too). The views it handed
        out are released; the memory is unmapped once no view derived from them is left."""
        if self._owner is None:
            return
        for view in self._views.values():
            try:
                view.release()
            except BufferError:  # exported further (a numpy array): that keeps the memory
                pass
        self._views = {}
        self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exception) -> None:
        self.close()


def _create(function, process, first: int, second: int) -> int:
    """plugind_audio_effect_create or plugind_video_filter_create on `process`'s handle."""
    handle = getattr(process, "_handle", None)
    if not isinstance(handle, ctypes.c_void_p) or not handle.value:
        raise InvalidArgumentError("%r is not an open plugind.Process" % (process,))
    error = ctypes.c_void_p()
    made = function(handle, first, second, ctypes.byref(error))
    if not made:
        _errors.raise_if(error)
    return made


class AudioEffect(_Shared):
    """A LADSPA plugin's instance in `process` (a `plugind.Process` of a LADSPA plugin), at
    `sample_rate` Hz with ports of `maximum_frames` samples (1 to 8192); every control input
    starts at its default. Blocking; `CallError` (unsupported) when the process is not a LADSPA
    plugin's, `CallError` (invalidArguments) for a rate or size out of range.

        with plugind.Process(identity) as process, plugind.AudioEffect(process, 48000, 256) as amp:
            gain = next(port for port in amp.ports if port.name == "Gain")
            amp.set_control(gain.index, 0.5)
            amp.samples(1)[:] = array.array("f", block)   # an audio input
            amp.run(len(block))
            amp.samples(2)[:len(block)]                     # its output
    """

    def __init__(self, process, sample_rate: int, maximum_frames: int = 1024):
        self._start(
            _create(
                library.plugind_audio_effect_create,
                process,
                _size(sample_rate, "sample_rate"),
                _size(maximum_frames, "maximum_frames"),
            ),
            library.plugind_audio_effect_release,
        )
        self.sample_rate = sample_rate
        self.maximum_frames = maximum_frames
        ports = []
        described = _AudioPort()
        for index in range(library.plugind_audio_effect_port_count(self._handle)):
            if library.plugind_audio_effect_port(self._handle, index, ctypes.byref(described)) != 0:
                raise InvalidArgumentError("port %d vanished" % index)
            kind = _PORT_KINDS[described.kind]
            ports.append(
                AudioPort(
                    index,
                    described.name.decode("utf-8", "replace"),
                    kind,
                    described.lower_bound if described.has_lower_bound else None,
                    described.upper_bound if described.has_upper_bound else None,
                    described.default_value if kind == "control_input" else None,
                )
            )
        #: The ports, in the plugin's order: a port's `index` is its position here.
        self.ports: List[AudioPort] = ports

    def samples(self, port: int) -> memoryview:
        """Audio port `port`'s `maximum_frames` float32 samples, writable, in the memory the plugin
        reads (inputs) and writes (outputs): no copy. Do not touch them while `run` runs.
        InvalidArgumentError for a port that is not an audio port."""
        address = library.plugind_audio_effect_samples(self._handle, _size(port, "port"))
        if not address:
            raise InvalidArgumentError(
                "port %d is not an audio port (those are: %s)"
                % (port, ", ".join("%d %s" % (p.index, p.name) for p in self.ports if p.kind.startswith("audio")))
            )
        return self._view(("samples", port), address, self.maximum_frames, "f")

    def set_control(self, port: int, value: float) -> None:
        """Sets control input `port`; a value outside its bounds (or a port that is not a control
        input) raises CallError (invalidArguments), naming the port and the bounds."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError("control %d: %r is not a number" % (port, value))
        error = ctypes.c_void_p()
        if library.plugind_audio_effect_set_control(self._handle, _size(port, "port"), float(value), ctypes.byref(error)) != 0:
            _errors.raise_if(error)

    def control(self, port: int) -> float:
        """Control port `port`'s value now (an output's as the last run left it)."""
        value = ctypes.c_float()
        if library.plugind_audio_effect_control(self._handle, _size(port, "port"), ctypes.byref(value)) != 0:
            raise InvalidArgumentError(
                "port %d is not a control port (those are: %s)"
                % (port, ", ".join("%d %s" % (p.index, p.name) for p in self.ports if p.kind.startswith("control")))
            )
        return value.value

    def run(self, frames: int, timeout: Optional[float] = None) -> None:
        """Runs the plugin over the first `frames` samples of its ports, within `timeout` seconds
        (None: the plugin's request timeout). Blocking, on this thread alone, without the GIL: the
        worker is rung through the shared memory. A plugin that crashes raises CrashedError, one
        that misses the deadline TimedOutError; either ends its worker."""
        error = ctypes.c_void_p()
        if library.plugind_audio_effect_run(
            self._handle, _size(frames, "frames"), _milliseconds(timeout), ctypes.byref(error)
        ) != 0:
            _errors.raise_if(error)

    @property
    def timing(self) -> AudioTiming:
        """The runs so far against their blocks' real-time period, a chain's runs of it included."""
        return _timing(library.plugind_audio_effect_timing, self._handle)

    def __repr__(self) -> str:
        return "AudioEffect(%d ports, %d Hz, %d frames)" % (len(self.ports), self.sample_rate, self.maximum_frames)


class AudioEffectChain(_Shared):
    """`effects` (AudioEffects of one sample rate and block size) run one after another on each
    block, each in its own worker: effect k's audio outputs feed effect k + 1's audio inputs, in
    port order, moved between their shared ports by libplugind. The chain's inputs are the first
    effect's audio inputs, its outputs the last effect's audio outputs. The chain borrows the
    effects: they stay the caller's, to set controls on between runs and to close after the chain
    (closing the chain leaves them open; once one is closed first, `run` raises
    InvalidArgumentError). Refused: no effects or one effect twice (InvalidArgumentError);
    different rates or sizes, or a link whose outputs and inputs differ in number (CallError,
    invalidArguments, naming the link).

        with plugind.AudioEffectChain([amp, lowpass]) as chain:
            chain.input(0)[:len(block)] = array.array("f", block)
            chain.run(len(block))
            chain.output(0)[:len(block)]                    # amp, then lowpass
    """

    def __init__(self, effects: Sequence[AudioEffect]):
        effects = tuple(effects)
        for effect in effects:
            if not isinstance(effect, AudioEffect):
                raise InvalidArgumentError("%r is not a plugind.AudioEffect" % (effect,))
        handles = (ctypes.c_void_p * max(1, len(effects)))(*[effect._handle.value for effect in effects])
        error = ctypes.c_void_p()
        made = library.plugind_audio_chain_create(handles, len(effects), ctypes.byref(error))
        if not made:
            _errors.raise_if(error)
        self._start(made, library.plugind_audio_chain_release)
        #: The effects, in order; the chain keeps them from being collected.
        self.effects: Tuple[AudioEffect, ...] = effects
        self.maximum_frames: int = effects[0].maximum_frames
        #: The numbers of input and output channels.
        self.input_count: int = library.plugind_audio_chain_input_count(self._handle)
        self.output_count: int = library.plugind_audio_chain_output_count(self._handle)

    def input(self, channel: int) -> memoryview:
        """Input `channel`'s `maximum_frames` float32 samples, writable: the first effect's audio
        input in that place (no copy). InvalidArgumentError for a channel out of range."""
        address = library.plugind_audio_chain_input(self._handle, _size(channel, "channel"))
        if not address:
            raise InvalidArgumentError("the chain has %d input channels, not %d" % (self.input_count, channel + 1))
        return self._view(("input", channel), address, self.maximum_frames, "f")

    def output(self, channel: int) -> memoryview:
        """Output `channel`'s samples, read-only, as the last run left them: the last effect's audio
        output in that place (no copy). InvalidArgumentError for a channel out of range."""
        address = library.plugind_audio_chain_output(self._handle, _size(channel, "channel"))
        if not address:
            raise InvalidArgumentError("the chain has %d output channels, not %d" % (self.output_count, channel + 1))
        return self._view(("output", channel), address, self.maximum_frames, "f", readonly=True)

    def run(self, frames: int, timeout: Optional[float] = None) -> None:
        """Runs every effect over the first `frames` samples, in order, each within `timeout`
        seconds (None: its plugin's request timeout). Blocking, on this thread alone, without the
        GIL. Raises the first effect's error
        (CrashedError, TimedOutError: that effect's worker ends, the others are unharmed), or
        InvalidArgumentError when an effect of the chain was closed."""
        error = ctypes.c_void_p()
        if library.plugind_audio_chain_run(
            self._handle, _size(frames, "frames"), _milliseconds(timeout), ctypes.byref(error)
        ) != 0:
            _errors.raise_if(error)

    @property
    def timing(self) -> AudioTiming:
        """The chain's runs so far: a block the whole chain took longer than it lasts missed it."""
        return _timing(library.plugind_audio_chain_timing, self._handle)

    def __repr__(self) -> str:
        return "AudioEffectChain(%d effects, %d in, %d out)" % (len(self.effects), self.input_count, self.output_count)


Value = Union[bool, float, Tuple[float, float, float], Tuple[float, float], str]


def _numbers(value, count: int) -> Optional[List[float]]:
    """`value` as `count` floats, when it is a sequence of that many real numbers (never bools)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != count:
        return None
    if not all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
        return None
    return [float(item) for item in value]


class VideoFilter(_Shared):
    """A frei0r plugin's instance in `process` (a `plugind.Process` of a frei0r plugin) for frames
    of `width` x `height` pixels (multiples of 8 from 8 to 2048): 4 bytes a pixel in the plugin's
    colour model, top line first. Blocking; `CallError` (unsupported) when the process is not a
    frei0r plugin's.

        with plugind.Process(identity) as process, plugind.VideoFilter(process, 64, 48) as invert:
            invert.input(0)[:] = frame
            invert.update(0.0)
            bytes(invert.output())
    """

    def __init__(self, process, width: int, height: int):
        self._start(
            _create(library.plugind_video_filter_create, process, _size(width, "width"), _size(height, "height")),
            library.plugind_video_filter_release,
        )
        self.width = width
        self.height = height
        #: How many input frames an update reads: 0 (a source), 1 (a filter), 2 or 3 (mixers).
        self.input_count: int = library.plugind_video_filter_input_count(self._handle)
        parameters = []
        for index in range(library.plugind_video_filter_parameter_count(self._handle)):
            name = ctypes.c_char_p()
            number = ctypes.c_int(-1)
            known = library.plugind_video_filter_parameter(self._handle, index, ctypes.byref(name), ctypes.byref(number)) == 0
            parameters.append(
                VideoParameter(
                    index,
                    (name.value or b"").decode("utf-8", "replace"),
                    _PARAMETER_TYPES[number.value] if known else None,
                )
            )
        #: The parameters, in the plugin's order.
        self.parameters: List[VideoParameter] = parameters

    @property
    def _frame_bytes(self) -> int:
        return self.width * self.height * 4

    def input(self, index: int) -> memoryview:
        """Input frame `index`: width * height * 4 bytes, writable, in the memory the plugin reads
        (no copy). InvalidArgumentError for an index out of range."""
        address = library.plugind_video_filter_input(self._handle, _size(index, "index"))
        if not address:
            raise InvalidArgumentError("input %d: the plugin takes %d" % (index, self.input_count))
        return self._view(("input", index), address, self._frame_bytes, "B")

    def output(self) -> memoryview:
        """The output frame, read-only, as the last update left it (no copy)."""
        address = library.plugind_video_filter_output(self._handle)
        if not address:
            raise InvalidArgumentError("the filter has no output frame")
        return self._view(("output", 0), address, self._frame_bytes, "B", readonly=True)

    def set_parameter(self, index: int, value: Value) -> None:
        """Sets parameter `index`: a bool for "bool", a number from 0 to 1 for "double", (r, g, b)
        from 0 to 1 for "color", (x, y) for "position", a str for "string". A value of another
        type than the parameter's, or out of its range, raises CallError (invalidArguments).
        Blocking."""
        _size(index, "index")
        if index >= len(self.parameters):
            raise CallError(
                "no parameter %d: the plugin has %d" % (index, len(self.parameters)), "invalidArguments", 20
            )
        parameter = self.parameters[index]
        numbers: Optional[List[float]] = None
        text: Optional[bytes] = None
        if parameter.type == "bool" and isinstance(value, bool):
            numbers = [1.0 if value else 0.0]
        elif parameter.type == "double" and isinstance(value, (int, float)) and not isinstance(value, bool):
            numbers = [float(value)]
        elif parameter.type == "color":
            numbers = _numbers(value, 3)
        elif parameter.type == "position":
            numbers = _numbers(value, 2)
        elif parameter.type == "string" and isinstance(value, str):
            text = value.encode()
            if b"\0" in text:
                raise CallError("parameter %d (%s): the text holds a NUL" % (index, parameter.name), "invalidArguments", 20)
        if numbers is None and text is None:
            raise CallError(
                "parameter %d (%s) of type %s takes %s, not %r"
                % (index, parameter.name, parameter.type, _TAKES.get(parameter.type, "no value"), value),
                "invalidArguments",
                20,
            )
        if numbers is not None and not all(math.isfinite(number) for number in numbers):
            raise CallError("parameter %d (%s): %r is not finite" % (index, parameter.name, value), "invalidArguments", 20)
        values = (ctypes.c_double * max(1, len(numbers or ())))(*(numbers or ()))
        error = ctypes.c_void_p()
        if library.plugind_video_filter_set_parameter(
            self._handle, index, values, len(numbers or ()), text, ctypes.byref(error)
        ) != 0:
            _errors.raise_if(error)

    def update(self, time: float, timeout: Optional[float] = None) -> None:
        """Renders one frame at `time` seconds from the inputs into the output, within `timeout`
        seconds (None: the plugin's request timeout). Blocking."""
        error = ctypes.c_void_p()
        if library.plugind_video_filter_update(self._handle, float(time), _milliseconds(timeout), ctypes.byref(error)) != 0:
            _errors.raise_if(error)

    def __repr__(self) -> str:
        return "VideoFilter(%dx%d, %d inputs, %d parameters)" % (
            self.width, self.height, self.input_count, len(self.parameters)
        )


_TAKES = {
    "bool": "a bool",
    "double": "a number from 0 to 1",
    "color": "(r, g, b) from 0 to 1",
    "position": "(x, y)",
    "string": "a str",
}
