"""Moving tensors between the host and a GPU program: staging, outputs into callers' arrays, pinning.

Host inputs that are not page-locked are copied into a worker's reusable pinned
staging buffer before their asynchronous copy to the device; outputs go to the
host through pinned memory, or straight into arrays a caller gives
(``run_into``); :func:`to_host` and :func:`to_device` move tensors between
programs (HETERO); :func:`register_host_memory` page-locks a caller's buffer
so that inputs there need no staging copy at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.support import host_tensor, pinned_empty
from inferplex.devices.gpu.tensors import numpy_to_torch, torch_to_numpy
from inferplex.devices.gpu.workers import WorkerState
from inferplex.errors import InferenceError, InputError

__all__ = ["given_output", "host_arrays", "host_copy", "register_host_memory", "stage", "to_device",
           "to_host"]

_log = logging.getLogger(__name__)

_THREADED_STAGING_BYTES = 16 << 20
"""Host inputs at least this large are staged with torch's multi-threaded copy."""

_NUMPY_COPYABLE = frozenset({torch.float32, torch.float16, torch.float64, torch.int64, torch.int32,
                             torch.int16, torch.int8, torch.uint8, torch.bool})

_HOST_REGISTER_PORTABLE = 1
"""``cudaHostRegisterPortable``: the memory counts as pinned for every CUDA context."""


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch_to_numpy(torch.empty(0, dtype=dtype)).dtype


_HOST_DTYPES = {dtype: _numpy_dtype(dtype) for dtype in _NUMPY_COPYABLE}


def stage(worker: WorkerState, index: int, value: torch.Tensor) -> torch.Tensor:
    """A pinned copy of a host tensor in the worker's reusable staging buffer for input ``index``."""
    if worker.staged is not None:
        worker.staged.synchronize()  # the previous run's copies out of the buffer are done
        worker.staged = None
    nbytes = value.numel() * value.element_size()
    buffer = worker.staging.get(index)
    if buffer is None or buffer.numel() < nbytes:
        buffer = pinned_empty(max(nbytes, 1), torch.uint8)
        worker.staging[index] = buffer
    pinned = buffer[:nbytes].view(value.dtype).view(value.shape)
    if nbytes < _THREADED_STAGING_BYTES and value.dtype in _NUMPY_COPYABLE:
        # A plain memcpy that releases the GIL.  torch's threaded copy, called from
        # several request threads at once, oversubscribes its thread pool: MULTI
        # over two GPUs served no more than one GPU did.
        np.copyto(pinned.numpy(), value.numpy(), casting="no")
    else:
        pinned.copy_(value)  # torch's intra-op threads: worth it for large tensors
    return pinned


def host_arrays(result: dict[str, Any], pending: list[str], arrays: dict[str, np.ndarray]) -> None:
    """The copied-back outputs as numpy arrays, once their copies are done."""
    for name in pending:  # a view: the array keeps the pinned tensor alive, no host memcpy
        result[name] = arrays[name] if name in arrays else torch_to_numpy(result[name])


def given_output(host_outputs: Callable[[str, Any, tuple[int, ...]], Any] | None, name: str,
                 tensor: torch.Tensor) -> np.ndarray | None:
    """The caller's array for output ``name`` (``run_into``), or None: then the program makes one."""
    dtype = _HOST_DTYPES.get(tensor.dtype)
    if host_outputs is None or dtype is None:
        return None
    shape = tuple(tensor.shape)
    given = host_outputs(name, dtype, shape)
    if given is None:
        return None
    if not isinstance(given, np.ndarray) or given.shape != shape or given.dtype != dtype \
            or not given.flags.writeable:
        raise InferenceError(f"{name}: run_into's host_outputs gave {type(given).__name__} "
                             f"{getattr(given, 'dtype', '')} {getattr(given, 'shape', '')}; "
                             f"expected a writable {dtype} array of shape {shape}")
    return given


def host_copy(value: Any) -> Any:
    """A sequence output (a list) as numpy arrays the caller owns, an absent optional (None) as is.

    On CUDA each copy waits for the current stream (the worker's): it follows the run's kernels.
    """
    if isinstance(value, list):
        return [torch_to_numpy(tensor).copy() for tensor in value]
    return None if value is None else torch_to_numpy(value).copy()


def to_host(value: Any) -> np.ndarray:
    """``value`` as a numpy array: a device tensor through pinned memory, with no further host copy.

    The copy runs on the current stream of the tensor's device (the stream a
    ``keep_on_device`` output was handed to) and is waited for.
    """
    if isinstance(value, np.ndarray):
        return value
    if not isinstance(value, torch.Tensor):
        return np.asarray(value)
    if value.device.type != "cuda":
        return torch_to_numpy(value)
    host = pinned_empty(value.shape, value.dtype)
    with torch.cuda.device(value.device):
        host.copy_(value, non_blocking=True)
        torch.cuda.current_stream(value.device).synchronize()
    return torch_to_numpy(host)


def to_device(value: Any, torch_device: torch.device, device: str) -> torch.Tensor:
    """``value`` on ``torch_device`` (named ``device``): host data via pinned memory, another GPU's
    device to device.

    The copy is queued on the device's current stream, which a run waits on
    before it reads its inputs, so the result can be fed at once.
    """
    cuda = torch_device.type == "cuda"
    if isinstance(value, np.ndarray):
        value = host_tensor(value) if cuda else numpy_to_torch(value)
    if not isinstance(value, torch.Tensor):
        raise InputError(f"{device} takes numpy arrays or torch tensors, got {type(value).__name__}")
    if value.device == torch_device:
        return value
    if cuda and value.device.type == "cpu" and not value.is_pinned():
        value = pinned_empty(value.shape, value.dtype).copy_(value)
    return value.to(torch_device, non_blocking=cuda)


def register_host_memory(address: int, size: int, torch_device: torch.device,
                         device: str) -> Callable[[], None] | None:
    """Page-lock ``size`` bytes at ``address`` for CUDA; returns the function that undoes it, or
    None when the driver refused (inputs there are then staged as any others)."""
    cudart = torch.cuda.cudart()
    codes: list[Any] = []

    def register() -> None:
        # In a thread of its own: a failure sets the CUDA runtime's per-thread last error,
        # which the next kernel launch on that thread would report as its own.
        with torch.cuda.device(torch_device):
            codes.append(cudart.cudaHostRegister(address, size, _HOST_REGISTER_PORTABLE))

    thread = threading.Thread(target=register, name="inferplex-pin")
    thread.start()
    thread.join()
    if not codes or int(codes[0]) != 0:
        _log.debug("%s: cudaHostRegister of %d bytes failed (%s): inputs there are staged",
                   device, size, codes[0] if codes else "no answer")
        return None
    return lambda: cudart.cudaHostUnregister(address)
