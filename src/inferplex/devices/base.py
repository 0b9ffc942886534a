"""The device plugin contract.

A device plugin is a small object that answers four questions about the devices
of one family (``CPU``, ``GPU``): which devices exist, which ops of a model a
device runs (``supported_nodes``), how to compile a model for a device
(``compile`` -> :class:`DeviceProgram`), and what the device's properties and
memory are.  Virtual devices (HETERO, MULTI, AUTO) are built only on this
contract, so a third-party device plugs in without touching them: register it
with ``Core.register_plugin`` or the ``inferplex.devices`` entry-point group.

A :class:`DeviceProgram` runs one compiled model on one device with
``num_workers`` independent workers (ONNX Runtime sessions, CUDA streams, ...).
The runtime guarantees that one worker index is used by one thread at a time;
different workers run concurrently.

Tensors: ``run`` takes numpy arrays, and also whatever its own ``tensor_kind``
produces (e.g. torch tensors for the GPU device) or other programs' native
tensors, converting as needed.  Outputs come back as numpy arrays, except the
names in ``keep_on_device``, which come back in the program's native kind so that
the next subgraph on a like device takes them without a host round trip.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inferplex.errors import InferenceError

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["CallOnce", "DevicePlugin", "DeviceProgram", "MemoryInfo", "ProfilingInfo", "ProfilingRecord"]


@dataclass(frozen=True)
class MemoryInfo:
    """Memory of one device, in bytes."""

    total_bytes: int
    """All memory of the device."""
    free_bytes: int
    """Memory free for new allocations now."""


class _ProfilingStatus(enum.StrEnum):
    """Whether an op ran in the last inference (OpenVINO's ``ProfilingInfo.Status``).

    A string enum: ``status == "EXECUTED"`` holds as well as
    ``status == ProfilingInfo.Status.EXECUTED``.
    """

    NOT_RUN = "NOT_RUN"
    """The op did not run (e.g. folded into a constant at compile time)."""
    OPTIMIZED_OUT = "OPTIMIZED_OUT"
    """The op was fused into another or removed by an optimisation."""
    EXECUTED = "EXECUTED"
    """The op ran."""


@dataclass(frozen=True)
class ProfilingInfo:
    """One performance counter of the last inference (OpenVINO's ``ov.ProfilingInfo``).

    ``request.get_profiling_info()`` returns a list of these when the model was
    compiled with ``ENABLE_PROFILING`` (alias ``PERF_COUNT``).  ``status`` may be
    given as a string (``"EXECUTED"``); it is stored as a :attr:`Status` member.
    """

    Status = _ProfilingStatus
    """The status enum: ``ProfilingInfo.Status.EXECUTED``, ``NOT_RUN``, ``OPTIMIZED_OUT``."""

    node_name: str = ""
    """Op friendly name, or a label such as ``"transfer GPU.0->CPU"``."""
    node_type: str = ""
    """ONNX op type, or ``"Transfer"``."""
    exec_type: str = ""
    """Kernel or engine that ran it, e.g. ``"CPUExecutionProvider"``."""
    real_time: datetime.timedelta = datetime.timedelta(0)
    """Wall time of the op in the last inference."""
    cpu_time: datetime.timedelta = datetime.timedelta(0)
    """Host time of the op (equals real_time where the engine does not tell them apart)."""
    status: _ProfilingStatus | str = _ProfilingStatus.EXECUTED
    """:attr:`Status` ``EXECUTED``, ``NOT_RUN`` or ``OPTIMIZED_OUT`` (a name is stored as the member)."""
    bytes: int = 0
    """Bytes moved, for transfer records; 0 otherwise (inferplex's own field)."""

    def __post_init__(self) -> None:
        if not isinstance(self.status, _ProfilingStatus):
            try:
                status = _ProfilingStatus(str(self.status).upper().removeprefix("STATUS."))
            except ValueError:
                raise ValueError(f"ProfilingInfo status {self.status!r} is not one of "
                                 f"{', '.join(s.value for s in _ProfilingStatus)}") from None
            object.__setattr__(self, "status", status)

    def with_prefix(self, prefix: str) -> ProfilingInfo:
        """The same record with ``prefix`` before its node name (``"subgraph1: "``)."""
        return dataclasses.replace(self, node_name=prefix + self.node_name)


_ProfilingStatus.__name__ = "Status"
_ProfilingStatus.__qualname__ = "ProfilingInfo.Status"

ProfilingRecord = ProfilingInfo
"""The name device plugins use for :class:`ProfilingInfo` (the same class)."""


class CallOnce:
    """Calls ``callback`` (when there is one) the first time it is called; ``run_into``'s ``queued``."""

    __slots__ = ("_callback", "done")

    def __init__(self, callback: Callable[[], None] | None) -> None:
        self._callback = callback
        self.done = False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            if self._callback is not None:
                self._callback()


class DeviceProgram(ABC):
    """A model compiled for one device."""

    device: str
    """Full device name, e.g. ``"GPU.0"``."""
    tensor_kind: str = "numpy"
    """What outputs in ``keep_on_device`` are: ``"numpy"`` or ``"torch"``."""
    num_workers: int = 1
    """Workers that may run at once (the device's optimal number of requests)."""
    to_host: Callable[[Any], Any] | None = None
    """Optional hook: ``to_host(value)`` turns one of this program's native outputs into a
    numpy array (e.g. through pinned memory), finished when it returns.  None: callers
    convert with ``np.asarray`` or let the reader's ``run`` do it."""
    to_native: Callable[[Any], Any] | None = None
    """Optional hook: ``to_native(value)`` puts a numpy array or another program's native
    tensor on this program's device, ordered so that it can be passed to ``run`` at once.
    None: ``run`` converts its inputs itself."""

    @abstractmethod
    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        """Run one inference on ``worker``; return every model output by name."""

    def check_runnable(self, worker: int, closed: bool) -> None:
        """Raise InferenceError when the program is ``closed`` or ``worker`` is out of range."""
        if closed:
            raise InferenceError(f"the program on {self.device} was closed")
        if not 0 <= worker < self.num_workers:
            raise InferenceError(f"worker {worker} does not exist on {self.device}; "
                                 f"workers are 0..{self.num_workers - 1}")

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        """Per-op counters of the last run on ``worker`` (empty unless ENABLE_PROFILING)."""
        return []

    trace_stages: bool = False
    """Set by the engine when the compiled model records a timeline (``ENABLE_TRACE``): runs
    then note their own stages for :meth:`stage_times`, at whatever cost that takes (an
    accelerator waits for each stage to end, so that the times are the stage's own)."""

    def stage_times(self, worker: int = 0) -> list[tuple[str, float, float]]:
        """The stages of the last run on ``worker`` as ``(name, begin, end)`` in ``time.perf_counter``
        seconds (``host-to-device copy``, ``compute``, ``device-to-host copy``); empty where the
        program does not tell them apart or ``trace_stages`` is off."""
        return []

    def run_into(self, inputs: Mapping[str, Any], worker: int,
                 host_outputs: Callable[[str, Any, tuple[int, ...]], Any],
                 queued: Callable[[], None] | None = None) -> dict[str, Any]:
        """``run``, writing each output into ``host_outputs(name, dtype, shape)`` where it can.

        ``host_outputs`` returns a writable numpy array of that dtype and shape
        (memory given to :meth:`pin_host_memory`, say), or None; an output written
        there is returned as that array, the others as ``run`` returns them.  A
        worker process thus gets its outputs in its shared buffer with no copy
        of its own.  The default runs ``run`` and writes nothing there.

        ``queued``, when given, is called exactly once, by this thread: as soon as
        ``worker`` may start its next run while this one ends (a device that
        queues runs in order, such as a GPU stream), and at the latest when this
        run has ended, before it returns or raises.  The default calls it then.
        """
        try:
            return self.run(inputs, worker)
        finally:
            if queued is not None:
                queued()

    def pin_host_memory(self, address: int, size: int) -> Callable[[], None] | None:
        """Let the device read and write ``size`` bytes of host memory at ``address`` directly.

        For buffers that many runs reuse (a worker process's shared buffers):
        inputs there then need no staging copy.  Returns the function that undoes
        it (called before the memory is unmapped), or None where the device has
        nothing to gain or cannot (the default).
        """
        return None

    def get_property(self, key: str) -> Any:
        """A property of the compiled program; raise PropertyError (or KeyError) for unknown keys."""
        from inferplex.errors import PropertyError

        raise PropertyError(f"{type(self).__name__} has no property {key!r}")

    def property_names(self) -> tuple[str, ...]:
        """The keys :meth:`get_property` answers (listed in the compiled model's SUPPORTED_PROPERTIES)."""
        return ()

    def presented_property(self, key: str, value: Any) -> Any:
        """``value`` of ``key`` (already typed as OpenVINO's ``get_property`` types it) as the
        compiled model returns it: where a device's compiled models answer a key in another form
        than the device does (OpenVINO's CPU: some hints as text)."""
        return value

    def close(self) -> None:  # noqa: B027 - optional: most programs hold nothing to release
        """Release device resources.  Idempotent."""


class DevicePlugin(ABC):
    """One family of devices (``CPU``, ``GPU``, ...)."""

    family: str = ""
    """Device-name prefix: ``"CPU"`` or ``"GPU"`` (devices are ``GPU.0`` ...)."""

    @abstractmethod
    def devices(self) -> list[str]:
        """Full names of the devices present, e.g. ``["GPU.0", "GPU.1"]``; may be empty."""

    @abstractmethod
    def supported_properties(self) -> tuple[str, ...]:
        """Writable property keys this family accepts in set_property / compile configs."""

    def property_parsers(self) -> Mapping[str, Callable[[Any], Any]]:
        """Value parsers of this family's own keys (those not in :mod:`inferplex.config.schema`).

        Each takes a string or a Python value and returns the canonical value, or
        raises :class:`inferplex.config.values.Reject` saying what is accepted
        (build them from :mod:`inferplex.config.values`).  Keys without a parser
        reach ``compile`` as given.
        """
        return {}

    @abstractmethod
    def device_property(self, device: str, key: str) -> Any:
        """A read-only device property (``FULL_DEVICE_NAME``, ``DEVICE_TOTAL_MEM_SIZE``, ...).

        ``DEVICE_TYPE`` orders AUTO's candidates: ``"discrete"``, ``"integrated"``,
        ``"accelerator"``, then ``"host"`` (the device that serves while others compile).

        Raise ``KeyError`` for keys the device does not know.
        """

    @abstractmethod
    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        """Names of the nodes of ``model``'s main graph that ``device`` can run."""

    @abstractmethod
    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        """Compile ``model`` for ``device`` with a validated ``config``."""

    @abstractmethod
    def memory(self, device: str) -> MemoryInfo:
        """Total and free memory of ``device``."""

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        """Requests worth keeping in flight on ``device`` under ``config`` (before compiling)."""
        return 1

    # --- optional: model caching (CACHE_DIR, export_model / import_model) --------------

    def cache_fingerprint(self, device: str, config: Mapping[str, Any]) -> str | None:
        """What a program compiled for ``device`` under ``config`` depends on besides the model and
        the config: engine versions, the hardware.  A cached program is used only where this is
        equal.  None (the default): programs of this plugin are not cached."""
        return None

    def export_program(self, program: DeviceProgram) -> bytes | None:
        """The bytes :meth:`import_program` turns back into ``program``; None: this one is not
        cacheable (the default)."""
        return None

    def import_program(self, blob: bytes, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        """A program from :meth:`export_program`'s bytes, for ``device`` under ``config``.

        Called only with bytes whose key and checksum matched; raise on anything
        else wrong with them (the entry is then compiled again).
        """
        from inferplex.errors import CompileError

        raise CompileError(f"{type(self).__name__} does not import compiled programs")
