"""A device program served from a worker process of its own.

Why: a device whose requests run Python in the calling process (the GPU device
walks a torch graph, stages copies and replays CUDA graphs per request) holds
the GIL for part of every request.  Two such devices driven from one process
serialise on that lock: two H200s under MULTI, both driven from the calling
process, served 0.59-0.72 of the sum of each alone.  In its own process each
device keeps its own interpreter, and even one GPU serves more there than
beside the caller's own Python (the scheduling and callbacks of every
request): with 4 GPU workers, 1,557-1,611 against 1,274-1,446 requests/s for
ResNet-50 on an H200, and two GPUs 1.97-2.05x one; with 8, 1,800-2,031 against
1,603-1,752, and two GPUs 1.64-1.92x one (bench/multi_auto.py).

How: :func:`compile_in_worker_process` starts ``python -m
inferplex.worker_process.child``, which compiles the model with the same
plugin class and config, and returns a :class:`WorkerProcessProgram`, an
ordinary :class:`~inferplex.devices.base.DeviceProgram` for the caller, with
two request slots per device worker (one runs while the next waits beside the
device, see ``child.py``).  Each slot has a socket of its own and a
shared-memory buffer (``memfd``): the caller writes a request's arrays into
the buffer and sends their names, types, shapes and offsets (one small pickle,
``messages.py``); the worker process runs them and answers the same way
with the outputs.  The buffer grows when a request does not fit.  The worker
process page-locks its mappings for the device
(``DeviceProgram.pin_host_memory``, ``cudaHostRegister`` on CUDA), so inputs go
from the shared buffer to the GPU with no staging copy, and outputs come back
into it (``DeviceProgram.run_into``) with none either.  Errors come back as
the same :mod:`inferplex.errors` class; a worker process that dies ends every
request sent to it with an InferenceError.

Used by MULTI and CUMULATIVE_THROUGHPUT for devices whose plugin reports
``GIL_BOUND`` (see ``MULTI_WORKER_PROCESSES`` in :mod:`inferplex.multi`).
POSIX only: elsewhere the caller compiles in its own process.
"""

from __future__ import annotations

from inferplex.worker_process.parent import WorkerProcessProgram, compile_in_worker_process, supported

__all__ = ["WorkerProcessProgram", "compile_in_worker_process", "supported"]
