"""The process-wide torch settings the GPU device runs under, set only while it runs.

torch keeps its numerics switches process-wide: whether float32 matmuls and
convolutions may round through TF32 (or bf16 on oneDNN), and whether cuDNN
autotunes (``cudnn.benchmark``).  The GPU device wants f32 to mean f32 and
autotuned convolutions, but the user's own torch code in the same process must
keep seeing the values it set.  :data:`TORCH_SETTINGS` sets inferplex's values
while inferplex lowers, captures or runs eagerly, and puts the user's back
after.

The switches are process-wide, not per thread, so every inferplex run takes the
same values: the first run to enter saves the user's values and sets ours, the
last to leave restores them, and runs in between (on other threads) share the
scope.  A switch the user changed while inside is left as the user set it.
While a scope is open, torch code on other threads sees inferplex's values:
torch offers nothing narrower.  Replays of captured CUDA graphs need no scope:
their kernels were chosen at capture.

On torch 2.9 and later the ``fp32_precision`` switches (the API torch asks not
to mix with the legacy one) are saved and set; earlier versions have only the
legacy ``allow_tf32`` flags and ``set_float32_matmul_precision``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["TORCH_SETTINGS", "TorchSettingsScope"]

_PRECISE = "ieee"
_NEW_API_SWITCHES = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
"""``torch.backends.<path>.fp32_precision`` switches set to ``"ieee"`` (no TF32, no bf16)."""


def _backend(path: str) -> Any:
    target: Any = torch.backends
    for part in path.split("."):
        target = getattr(target, part)
    return target


def _new_api() -> bool:
    return hasattr(getattr(torch.backends.cuda, "matmul", None), "fp32_precision")


class _Switch:
    """One process-wide torch switch: how to read it, and how to write it."""

    __slots__ = ("name", "ours", "read", "write")

    def __init__(self, name: str, read: Any, write: Any, ours: Any) -> None:
        self.name = name
        self.read = read
        self.write = write
        self.ours = ours


def _precision_switch(path: str) -> _Switch:
    backend = _backend(path)
    get = getattr(torch._C, "_get_fp32_precision_getter", None)
    put = getattr(torch._C, "_set_fp32_precision_setter", None)
    where = (getattr(backend, "backend", None), getattr(backend, "op", None))
    if get is not None and put is not None and None not in where:
        # What ``backend.fp32_precision`` calls, without its Python-level attribute lookups:
        # a run that needs the scope reads every switch twice.
        return _Switch(f"{path}.fp32_precision", functools.partial(get, *where),
                       functools.partial(put, *where), _PRECISE)
    return _Switch(f"{path}.fp32_precision", lambda: backend.fp32_precision,
                   lambda value: setattr(backend, "fp32_precision", value), _PRECISE)


def _benchmark_switch() -> _Switch:
    get = getattr(torch._C, "_get_cudnn_benchmark", None)
    put = getattr(torch._C, "_set_cudnn_benchmark", None)
    if get is not None and put is not None:  # what ``cudnn.benchmark`` reads and writes
        return _Switch("cudnn.benchmark", get, put, True)
    cudnn = torch.backends.cudnn
    return _Switch("cudnn.benchmark", lambda: cudnn.benchmark,
                   lambda value: setattr(cudnn, "benchmark", value), True)


def _switches() -> list[_Switch]:
    cudnn = torch.backends.cudnn
    benchmark = _benchmark_switch()
    if _new_api():
        present = []
        for path in _NEW_API_SWITCHES:
            try:
                present.append(_precision_switch(path))
            except AttributeError:  # a backend this build of torch lacks
                continue
        return [*present, benchmark]
    return [_Switch("float32_matmul_precision", torch.get_float32_matmul_precision,
                    torch.set_float32_matmul_precision, "highest"),
            _Switch("cudnn.allow_tf32", lambda: cudnn.allow_tf32,
                    lambda value: setattr(cudnn, "allow_tf32", value), False),
            benchmark]


class TorchSettingsScope:
    """Process-wide: inferplex's torch settings while at least one scope is open (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: list[tuple[_Switch, Any]] = []
        self._switches: list[_Switch] | None = None

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Within: TF32 and reduced-precision f32 off, cuDNN autotuning on; after: the user's values."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                if self._switches is None:
                    self._switches = _switches()
                self._saved = [(switch, switch.read()) for switch in self._switches]
                for switch, value in self._saved:
                    if value != switch.ours:
                        switch.write(switch.ours)
            self._depth += 1

    def _leave(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth:
                return
            saved, self._saved = self._saved, []
            for switch, value in saved:
                # A switch that no longer holds our value was set by the user meanwhile: theirs stays.
                if value != switch.ours and switch.read() == switch.ours:
                    switch.write(value)

    @property
    def active(self) -> bool:
        """Whether some scope is open now."""
        return self._depth > 0


TORCH_SETTINGS = TorchSettingsScope()
"""The one scope of the process (the switches it sets are process-wide too)."""
