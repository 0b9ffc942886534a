"""``torch.compile(module, backend="openvino")`` on inferplex's devices (OpenVINO's ``openvino.torch``).

Importing this module registers the torch.compile backend ``"openvino"`` (and ``"inferplex"``, the
same one)::

    import inferplex.torch  # noqa: F401 - registers the backend
    compiled = torch.compile(module, backend="openvino", options={"device": "CPU"})

Each graph TorchDynamo captures is exported to ONNX (TorchScript's exporter) and compiled by
inferplex on ``options["device"]`` (default ``"CPU"``; any device string: ``"GPU"``, ``"AUTO"``,
``"MULTI:GPU,CPU"``), with ``options["config"]`` as its properties (``model_caching`` with
``cache_dir`` sets ``CACHE_DIR``).  A graph is compiled once per input signature it is called
with: its tensors' shapes and types and the values of its integer inputs (the sizes Dynamo makes
dynamic after a shape changes).  The compiled function takes and returns torch tensors, on the
device the inputs came from.  A graph that cannot be exported or compiled, or one called with
inputs that need gradients, runs as Dynamo captured it (torch eager), as OpenVINO's backend falls
back; a warning names why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree

from inferplex.api.convert_torch import onnx_export

__all__ = ["BACKEND_NAMES", "openvino_backend"]

BACKEND_NAMES = ("openvino", "inferplex")
"""The names ``torch.compile(backend=...)`` finds this backend by."""

_OPTIONS = ("device", "config", "model_caching", "cache_dir")


def openvino_backend(graph: torch.fx.GraphModule, example_inputs: Sequence[Any],
                     options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The backend: ``graph`` compiled by inferplex (per input signature), or run as captured
    where it cannot be."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        from inferplex.errors import PropertyError

        raise PropertyError(f"torch.compile backend 'openvino' options {unknown} are not known; accepted: "
                            f"{', '.join(_OPTIONS)}")
    return _GraphRunner(graph, options)


class _GraphRunner:
    """Runs one captured graph: compiled for each signature (tensor shapes and types, and the
    values of integer inputs: Dynamo's dynamic sizes) it is called with; eagerly where that fails."""

    def __init__(self, graph: torch.fx.GraphModule, options: dict[str, Any]) -> None:
        self._graph, self._options = graph, options
        self._programs: dict[tuple[Any, ...], Callable[..., Any] | None] = {}

    def __call__(self, *args: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self._graph(*args)  # training: the captured graph keeps autograd
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", a) for a in args)
        if key not in self._programs:
            self._programs[key] = self._compile(list(args))
        program = self._programs[key]
        return self._graph(*args) if program is None else program(*args)

    def _compile(self, args: list[Any]) -> Callable[..., Any] | None:
        if not all(isinstance(a, (torch.Tensor, int, float, bool)) for a in args):
            return self._eager(f"inputs of type {sorted({type(a).__name__ for a in args})}")
        from inferplex.errors import DeviceNameError, PropertyError

        try:
            return _compiled(self._graph, args, self._options)
        except (DeviceNameError, PropertyError):
            raise  # the options name no device or property there is: eager would hide the mistake
        except Exception as error:  # noqa: BLE001 - any export or compile failure: the graph runs eagerly
            text = str(error).splitlines()[0] if str(error) else ""
            return self._eager(f"{type(error).__name__}: {text}")

    @staticmethod
    def _eager(why: str) -> None:
        warnings.warn(f"torch.compile backend 'openvino': a graph runs in torch eager: {why}", RuntimeWarning,
                      stacklevel=4)
        return None


class _Bound(torch.nn.Module):
    """The graph with its non-tensor inputs (sizes) fixed: what is exported for one signature."""

    def __init__(self, graph: torch.fx.GraphModule, args: list[Any]) -> None:
        super().__init__()
        self.graph, self.args = graph, args
        self.slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def forward(self, *tensors: torch.Tensor) -> Any:
        full = list(self.args)
        for slot, tensor in zip(self.slots, tensors, strict=True):
            full[slot] = tensor
        return self.graph(*full)


def _compiled(graph: torch.fx.GraphModule, args: list[Any], options: dict[str, Any]) -> Callable[..., Any]:
    import inferplex as ov

    bound = _Bound(graph, args)
    tensors = [args[i] for i in bound.slots]
    with torch.no_grad():
        reference = bound(*tensors)
    flat, spec = _pytree.tree_flatten(reference)
    if not all(isinstance(item, torch.Tensor) for item in flat):
        raise TypeError("the graph returns values that are not tensors")
    names = [f"input_{i}" for i in range(len(tensors))]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on the captured graph
        outputs = [f"output_{i}" for i in range(len(flat))]
        proto = onnx_export(torch, bound, names, tuple(tensors), {}, outputs)
    config = dict(options.get("config") or {})
    if options.get("model_caching") and options.get("cache_dir"):
        config.setdefault("CACHE_DIR", str(options["cache_dir"]))
    core = ov.Core()
    device_name = str(options.get("device", "CPU"))
    compiled = core.compile_model(core.read_model(proto), device_name, config)
    kept = [(port.any_name, bound.slots[names.index(port.any_name)]) for port in compiled.inputs]
    # (the exporter drops inputs nothing reads)

    def run(*call_args: Any) -> Any:
        device = next((a.device for a in call_args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        results = compiled({name: _host(call_args[slot]) for name, slot in kept})
        outputs = [torch.from_numpy(np.ascontiguousarray(results[i])).to(device) for i in range(len(flat))]
        return _pytree.tree_unflatten(outputs, spec)

    return run


def _host(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _register() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    for name in BACKEND_NAMES:
        if name not in _BACKENDS:
            register_backend(openvino_backend, name=name)


_register()
