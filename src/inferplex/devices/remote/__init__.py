"""A device program served from a worker process of its own, for any virtual device.

Why: a device whose requests run Python in the calling process (the GPU device
walks a torch graph, stages copies and replays CUDA graphs per request) holds
the GIL for part of every request.  Two such devices driven from one process
serialise on that lock, whether MULTI spreads requests over them or a HETERO /
PIPELINE_PARALLEL chain passes each request through both.  In its own process
each device keeps its own interpreter (bench/RESULTS.md has the figures).

How: :func:`compile_in_worker_process` starts ``python -m
inferplex.devices.remote.child``, which compiles the model with the same
plugin class and config, and returns a :class:`WorkerProcessProgram`, an
ordinary :class:`~inferplex.devices.base.DeviceProgram` for the caller, with
two request slots per device worker (one runs while the next waits beside the
device, see ``child.py``).  Each slot has a connection of its own
(``multiprocessing.connection.Connection`` over a socket pair) and a
shared-memory buffer (``memfd``): the caller writes a request's arrays into
the buffer and sends their names, types, shapes and offsets; the worker
process runs them and answers the same way with the outputs.  The buffer grows
when a request does not fit.  The worker process page-locks its mappings for
the device (``DeviceProgram.pin_host_memory``, ``cudaHostRegister`` on CUDA),
so inputs go from the shared buffer to the GPU with no staging copy, and
outputs come back into it (``DeviceProgram.run_into``) with none either.
Errors come back as the same :mod:`inferplex.errors` class; a worker process
that dies ends every request sent to it with an InferenceError.

Which devices (:func:`wants_own_process`, the ``WORKER_PROCESSES`` key of
HETERO, MULTI and AUTO, alias ``MULTI_WORKER_PROCESSES``): ``AUTO`` (default)
serves a device from a worker process when its plugin reports ``GIL_BOUND``
and the virtual device drives at least ``min_bound`` such devices (MULTI: one,
since even one GPU serves more beside no other Python; HETERO and
PIPELINE_PARALLEL: two, since one GPU in a chain keeps its tensors on the
device between its subgraphs in the calling process); ``YES`` every device but
the host; ``NO`` none.  POSIX only: elsewhere every device compiles in the
calling process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from inferplex.devices.remote.parent import WorkerProcessProgram, compile_in_worker_process, supported

if TYPE_CHECKING:
    from inferplex.devices.registry import DeviceRegistry

__all__ = ["WorkerProcessProgram", "compile_in_worker_process", "supported", "wants_own_process"]


def wants_own_process(registry: DeviceRegistry, devices: Sequence[str], setting: str,
                      min_bound: int = 1) -> dict[str, bool]:
    """Which of ``devices`` (full names) a virtual device serves from worker processes."""
    if setting == "NO" or not supported():
        return dict.fromkeys(devices, False)
    not_host = {device: _device_type(registry, device) != "host" for device in devices}
    if setting == "YES":
        return not_host
    bound = {device: not_host[device] and _gil_bound(registry, device) for device in devices}
    enough = sum(bound.values()) >= min_bound
    return {device: enough and bound[device] for device in devices}


def _device_type(registry: DeviceRegistry, device: str) -> str:
    try:
        return str(registry.device_property(device, "DEVICE_TYPE")).lower()
    except Exception:  # noqa: BLE001 - a device that does not say is not the host
        return ""


def _gil_bound(registry: DeviceRegistry, device: str) -> bool:
    try:
        return bool(registry.device_property(device, "GIL_BOUND"))
    except Exception:  # noqa: BLE001 - a device that does not say runs in this process
        return False
