"""The GPU device family: ONNX models lowered to torch, on NVIDIA GPUs through CUDA.

Devices are ``GPU.0`` .. ``GPU.N-1``, one per CUDA device torch sees.  With the
environment variable ``INFERPLEX_EMULATED_GPUS=N`` (N >= 1) the plugin exposes
``GPU.0..N-1`` backed by torch's CPU device instead, so HETERO, MULTI and
pipeline code runs for real on machines without CUDA (like JAX's
``xla_force_host_platform_device_count``).  Without torch installed the family
has no devices.  torch is imported only when a device is first used.

Properties (compile config): ``PERFORMANCE_HINT`` (LATENCY: 1 worker;
THROUGHPUT / CUMULATIVE_THROUGHPUT: 8 workers on CUDA, 2 emulated),
``PERFORMANCE_HINT_NUM_REQUESTS`` (caps the hinted number), ``NUM_STREAMS``
(explicit worker count), ``INFERENCE_PRECISION_HINT`` (f32 default and exact:
no TF32; f16/bf16 convert floating weights and
inputs, outputs keep the model's types unless the compile's ``OUTPUT_PRECISION`` is
INFERENCE, see :mod:`inferplex.config.output_precision`; torch's process-wide TF32 switches are
set only while inferplex runs, see ``settings``), ``ENABLE_PROFILING``, ``TORCH_COMPILE``
(AUTO default: torch.compile in the background for large batches under the throughput
hints on CUDA; YES/NO force it) and ``TORCH_COMPILE_MODE`` (see ``tiers``), ``CUDA_GRAPHS`` (default
on; a model whose input shapes are all static captures every worker's graph while
it compiles), ``GPU_CHANNELS_LAST`` (``AUTO``: 4-D convolutions in NHWC memory order for
f16/bf16 on CUDA, where tensor-core kernels want it; ``YES``/``NO`` force it;
results are the same either way, see ``optimize``), ``SHAPE_SPECIALIZATION``
(default on: models with dynamic input dims whose shape arithmetic would run on
the host are lowered once per input signature with those dims fixed, see
``specialize``), ``MEMORY_LIMIT``, ``GPU_QUEUE_THROTTLE`` (OpenVINO's name and
values: MEDIUM, the default, and HIGH spin a host core while a worker waits for
the device; LOW sleeps on a blocking CUDA event instead; no effect on emulated
GPUs).  LOW frees most of the calling process's CPU time per request for a
few percent of throughput (``python bench/multi_diagnostics.py --throttle``);
beside a CPU serving in CUMULATIVE_THROUGHPUT the sum stayed below MEDIUM's
once the CPU was held back, so MULTI and AUTO keep MEDIUM.

``EXECUTION_MODE_HINT`` and ``MODEL_PRIORITY`` mean what :mod:`inferplex.config.schema`
says.  Read-only facts: ``DEVICE_ID`` (the index), ``DEVICE_TYPE``,
``OPTIMIZATION_CAPABILITIES`` (FP32, FP16, BF16 where the device computes it),
``RANGE_FOR_STREAMS`` and ``RANGE_FOR_ASYNC_INFER_REQUESTS`` (one worker up to the
throughput hints' count).

Model cache (``CACHE_DIR``) and ``export_model``: a program's cached form is
data (:mod:`.cache_form`): the optimised model, the lowering's decisions and,
with ``TORCH_COMPILE``, torch's own artefacts.  A compile for the cache (and
one from it) with ``TORCH_COMPILE`` and static input shapes makes its first
run while compiling, so that torch.compile compiles (from the artefacts, on a
warm start) before ``compile_model`` returns.  A program loaded from the cache
keeps no copy of its form: it does not export again.  The lowerings a program is
made from, and its cached form's optimised model, are in :mod:`._program_lowering`.

Read-only ``GIL_BOUND``: True on CUDA, where each request runs Python in the
calling process (MULTI and CUMULATIVE_THROUGHPUT then serve the device from a
worker process of its own, see :mod:`inferplex.devices.remote`); False
for emulated GPUs, whose work shares the host's cores anyway.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inferplex.config import values
from inferplex.config.values import Parser
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo
from inferplex.devices.gpu._program_lowering import FoldedBefore, form_of, lower_with_form, with_folded
from inferplex.errors import CompileError, DeviceNameError, InferplexError, PropertyError

if TYPE_CHECKING:
    import onnx_ir as ir
    import torch

    from inferplex.devices.gpu.cache_form import CachedForm
    from inferplex.devices.gpu.lower import LoweredGraph
    from inferplex.devices.gpu.program import GpuProgram
    from inferplex.devices.gpu.specialize import Specializer
    from inferplex.devices.gpu.tiers import CompilePlan

__all__ = ["EMULATION_ENV", "GpuPlugin"]

_log = logging.getLogger("inferplex")

EMULATION_ENV = "INFERPLEX_EMULATED_GPUS"
"""Environment variable: number of GPUs to emulate on torch's CPU device."""

_PARSERS: dict[str, Parser] = {
    "TORCH_COMPILE": values.yes_no_auto,
    "TORCH_COMPILE_MODE": values.choice("AUTO", "default", "max-autotune-no-cudagraphs"),
    "CUDA_GRAPHS": values.boolean,
    "SHAPE_SPECIALIZATION": values.boolean,
    "GPU_CHANNELS_LAST": values.yes_no_auto,
    "GPU_QUEUE_THROTTLE": values.choice("LOW", "MEDIUM", "HIGH"),
}
"""The GPU's own keys (see the module docstring)."""

_WRITABLE = ("PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS", "NUM_STREAMS", "INFERENCE_PRECISION_HINT",
             "ENABLE_PROFILING", "TORCH_COMPILE", "TORCH_COMPILE_MODE", "CUDA_GRAPHS", "GPU_CHANNELS_LAST",
             "SHAPE_SPECIALIZATION", "MEMORY_LIMIT", "GPU_QUEUE_THROTTLE", "EXECUTION_MODE_HINT",
             "MODEL_PRIORITY")
_DEFAULTS: dict[str, Any] = {
    "PERFORMANCE_HINT": "LATENCY", "PERFORMANCE_HINT_NUM_REQUESTS": 0, "NUM_STREAMS": "AUTO",
    "INFERENCE_PRECISION_HINT": "f32", "ENABLE_PROFILING": False, "TORCH_COMPILE": "AUTO",
    "TORCH_COMPILE_MODE": "AUTO",
    "CUDA_GRAPHS": True, "GPU_CHANNELS_LAST": "AUTO", "SHAPE_SPECIALIZATION": True, "MEMORY_LIMIT": 0,
    "GPU_QUEUE_THROTTLE": "MEDIUM", "EXECUTION_MODE_HINT": "PERFORMANCE", "MODEL_PRIORITY": "MEDIUM",
}
_THROUGHPUT_WORKERS = {"cuda": 8, "cpu": 2}
"""Workers (each a CUDA stream with its own graphs) for the throughput hints.  Small
requests leave a GPU partly idle between one stream's kernels, so several streams
overlap them; past 8 the gain turns into a loss (``python bench/multi_diagnostics.py
--streams`` measures it)."""


def _emulated_count() -> int:
    raw = os.environ.get(EMULATION_ENV, "").strip()
    if not raw:
        return 0
    try:
        count = int(raw)
    except ValueError:
        raise PropertyError(f"{EMULATION_ENV}={raw!r} is not a number; accepted: an integer >= 1 "
                            "(or unset for real CUDA devices)") from None
    return max(0, count)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _nvidia_driver_present() -> bool:
    """Whether an NVIDIA driver is loaded (its device nodes or proc entry exist)."""
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia",
                                           "/dev/dxg"))


def _host_memory() -> MemoryInfo:
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError):
        free = total
    return MemoryInfo(total, free)


_OPENVINO_GPU_FACTS = ("GPU_DEVICE_TOTAL_MEM_SIZE", "GPU_DEVICE_MAX_ALLOC_MEM_SIZE", "GPU_UARCH_VERSION",
                       "GPU_EXECUTION_UNITS_COUNT", "GPU_MEMORY_STATISTICS")
"""OpenVINO GPU plugin's read-only facts (``properties.intel_gpu``) the GPU device answers."""

class GpuPlugin(DevicePlugin):
    """NVIDIA GPUs (or emulated GPUs on torch's CPU device); see the module docstring."""

    family = "GPU"

    def devices(self) -> list[str]:
        if not _emulated_count() and not _nvidia_driver_present():
            return []  # no driver: answer without importing torch (seconds on CPU-only hosts)
        torch = _torch()
        if torch is None:
            return []
        count = _emulated_count() or (torch.cuda.device_count() if torch.cuda.is_available() else 0)
        return [f"GPU.{i}" for i in range(count)]

    @property
    def emulated(self) -> bool:
        """Whether the devices are emulated on torch's CPU device."""
        return _emulated_count() > 0

    def torch_device(self, device: str) -> torch.device:
        """The torch device behind ``GPU.i`` (``cpu`` when emulated)."""
        torch = _torch()
        name = "GPU.0" if device == "GPU" else device
        if torch is None or name not in self.devices():
            raise DeviceNameError(f"unknown GPU device {device!r}; available: {self.devices() or 'none'}"
                                  + ("" if torch is not None else " (torch is not installed)"))
        return torch.device("cpu") if self.emulated else torch.device("cuda", int(name.split(".")[1]))

    def supported_properties(self) -> tuple[str, ...]:
        return _WRITABLE

    def property_parsers(self) -> Mapping[str, Parser]:
        return _PARSERS

    def device_property(self, device: str, key: str) -> Any:
        torch_device = self.torch_device(device)
        if key in _DEFAULTS:
            return _DEFAULTS[key]
        if key == "FULL_DEVICE_NAME":
            if torch_device.type == "cpu":
                return "Emulated GPU on CPU (torch)"
            return _torch().cuda.get_device_name(torch_device)
        if key == "DEVICE_TYPE":
            if torch_device.type == "cpu":
                return "emulated"
            integrated = _torch().cuda.get_device_properties(torch_device).is_integrated
            return "integrated" if integrated else "discrete"
        if key == "ENGINE":
            return f"torch {_torch().__version__} ({torch_device.type})"
        if key == "GIL_BOUND":
            return torch_device.type == "cuda"
        if key == "DEVICE_ID":
            return ("GPU.0" if device == "GPU" else device).split(".")[1]
        if key in ("RANGE_FOR_STREAMS", "RANGE_FOR_ASYNC_INFER_REQUESTS"):
            # From one worker (LATENCY) to the count the throughput hints choose.
            most = _THROUGHPUT_WORKERS[torch_device.type]
            return (1, most) if key == "RANGE_FOR_STREAMS" else (1, most, 1)
        if key == "OPTIMIZATION_CAPABILITIES":
            bf16 = torch_device.type == "cpu" or _torch().cuda.is_bf16_supported()
            return ["FP32", "FP16", *(["BF16"] if bf16 else [])]
        if key in ("DEVICE_TOTAL_MEM_SIZE", "GPU_DEVICE_TOTAL_MEM_SIZE", "GPU_DEVICE_MAX_ALLOC_MEM_SIZE"):
            return self.memory(device).total_bytes
        if key in ("GPU_UARCH_VERSION", "GPU_EXECUTION_UNITS_COUNT", "GPU_MEMORY_STATISTICS"):
            return self._hardware_fact(key, torch_device)
        if key == "DEVICE_FREE_MEM_SIZE":
            return self.memory(device).free_bytes
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self.optimal_number_of_infer_requests(device, {})
        if key == "SUPPORTED_PROPERTIES":
            return (*_WRITABLE, "FULL_DEVICE_NAME", "DEVICE_TOTAL_MEM_SIZE", "DEVICE_FREE_MEM_SIZE",
                    "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "GIL_BOUND", *_OPENVINO_GPU_FACTS)
        raise KeyError(key)

    @staticmethod
    def _hardware_fact(key: str, torch_device: Any) -> Any:
        """OpenVINO's intel_gpu facts of a CUDA GPU (an emulated GPU: those of torch's CPU device):
        CUDA's compute capability, the streaming multiprocessors, torch's allocator's bytes."""
        torch = _torch()
        cuda = torch_device.type == "cuda"
        if key == "GPU_UARCH_VERSION":
            return ".".join(map(str, torch.cuda.get_device_capability(torch_device))) if cuda else "emulated"
        if key == "GPU_EXECUTION_UNITS_COUNT":
            return torch.cuda.get_device_properties(torch_device).multi_processor_count if cuda else \
                torch.get_num_threads()
        if not cuda:
            return {}
        return {"allocated": int(torch.cuda.memory_allocated(torch_device)),
                "reserved": int(torch.cuda.memory_reserved(torch_device))}

    def memory(self, device: str) -> MemoryInfo:
        torch_device = self.torch_device(device)
        if torch_device.type == "cpu":
            return _host_memory()
        free, total = _torch().cuda.mem_get_info(torch_device)
        return MemoryInfo(int(total), int(free))

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        streams = config.get("NUM_STREAMS", "AUTO")
        if isinstance(streams, int) and not isinstance(streams, bool):
            return max(1, streams)
        hint = str(config.get("PERFORMANCE_HINT", "LATENCY")).upper()
        if hint == "LATENCY":
            return 1
        kind = "cpu" if self.emulated else "cuda"
        workers = _THROUGHPUT_WORKERS[kind]
        cap = int(config.get("PERFORMANCE_HINT_NUM_REQUESTS", 0) or 0)
        return min(workers, cap) if cap > 0 else workers

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        self.torch_device(device)
        from inferplex.devices.gpu.lower import analyze_model

        return analyze_model(model).supported

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        from inferplex.devices.cache import exporting

        return self._compile(model, device, config, keep_form=exporting())

    def _compile(self, model: ir.Model, device: str, config: Mapping[str, Any], keep_form: bool = False,
                 form: CachedForm | None = None) -> GpuProgram:
        """Lower ``model`` (or ``form``'s optimised model) and make the program.

        ``keep_form``: also build the program's cached form (a compile for the
        model cache).  ``form``: an imported cached form, whose torch.compile
        artefacts go to torch before the warm-up compiles.
        """
        from inferplex.devices.gpu.program import GpuProgram

        torch_device = self.torch_device(device)
        settings = {**_DEFAULTS, **dict(config)}
        precision = str(settings["INFERENCE_PRECISION_HINT"]).lower()
        if precision not in ("f32", "f16", "bf16"):
            raise PropertyError(f"INFERENCE_PRECISION_HINT {precision!r} is not accepted by {device}; "
                                "accepted: f32, f16, bf16")
        channels_last = _channels_last(settings["GPU_CHANNELS_LAST"], precision, torch_device.type, device)
        from inferplex.devices.gpu.settings import TORCH_SETTINGS

        # f32 means f32 (no TF32 rounding), with cuDNN autotuning: set while lowering, capturing
        # and running, and the user's own settings put back after (see settings).
        with TORCH_SETTINGS.scope():
            try:
                lowered, specializer, optimised = lower_with_form(
                    model if form is None else form.model, torch_device, precision, channels_last,
                    bool(settings["SHAPE_SPECIALIZATION"]), keep_form)
            except InferplexError:
                raise
            except Exception as e:
                raise CompileError(f"{device}: lowering the model to torch failed: "
                                   f"{type(e).__name__}: {e}") from e
            if form is not None:  # profiling lists the nodes the cold compile folded, as it did then
                lowered = with_folded(lowered, form.folded_nodes)
                specializer = specializer and FoldedBefore(specializer, form.folded_nodes)
            workers = self.optimal_number_of_infer_requests(device, settings)
            properties = {"INFERENCE_PRECISION_HINT": precision,
                          "PERFORMANCE_HINT": settings["PERFORMANCE_HINT"],
                          "FULL_DEVICE_NAME": self.device_property(device, "FULL_DEVICE_NAME"),
                          "GPU_CHANNELS_LAST": channels_last,
                          "SHAPE_SPECIALIZATION": bool(settings["SHAPE_SPECIALIZATION"]),
                          "GPU_QUEUE_THROTTLE": settings["GPU_QUEUE_THROTTLE"]}
            plan = _compile_plan(settings, device, torch_device, lowered, specializer, keep_form, form)
            program = GpuProgram(lowered, device, torch_device, workers, settings, properties, specializer,
                                 plan)
            artifacts = _warm_up(program, lowered, settings, plan.how == "inline", keep_form, form)
            program.start_compiled_tier()
        if optimised is not None:
            from inferplex.devices.gpu.cache_form import pack

            program.cache_form = pack(optimised, lowered.folded_nodes, lowered.input_names,
                                      lowered.output_names, artifacts)
        if form is None:
            program.rebuild_form = functools.partial(form_of, model, precision, channels_last)
        return program

    # --- model caching (CACHE_DIR, export_model / import_model; see cache_form) -----------

    def cache_fingerprint(self, device: str, config: Mapping[str, Any]) -> str | None:
        """What a cached form depends on besides the model and the config: inferplex (its op
        lowerings folded the constants), the form's version, torch and, on CUDA, the device and
        its CUDA and cuDNN versions (torch.compile's kernels are built for them)."""
        from inferplex import __version__
        from inferplex.devices.gpu.cache_form import FORM_VERSION

        torch = _torch()
        torch_device = self.torch_device(device)
        parts = [f"inferplex {__version__}", f"gpu form {FORM_VERSION}", f"torch {torch.__version__}"]
        if torch_device.type == "cuda":
            capability = ".".join(map(str, torch.cuda.get_device_capability(torch_device)))
            parts += [torch.cuda.get_device_name(torch_device), f"sm {capability}",
                      f"cuda {torch.version.cuda}", f"cudnn {torch.backends.cudnn.version()}"]
        else:
            parts.append("emulated on the host")
        return "; ".join(parts)

    def export_program(self, program: DeviceProgram) -> bytes | None:
        """The program's cached form (:mod:`.cache_form`): made while it compiled for the cache,
        else rebuilt from its model (no torch.compile artefacts then); None for an imported one."""
        from inferplex.devices.gpu.program import GpuProgram

        if not isinstance(program, GpuProgram):
            return None
        packed, program.cache_form = program.cache_form, None  # written once: not kept in memory
        if packed is None and program.rebuild_form is not None:
            packed = program.rebuild_form()
        return packed

    def import_program(self, blob: bytes, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        from inferplex.devices.gpu.cache_form import unpack

        form = unpack(blob)
        program = self._compile(form.model, device, config, form=form)
        lowered_names = (program.input_names, program.output_names)
        if lowered_names != (form.input_names, form.output_names):
            program.close()
            raise CompileError(f"the cached program's inputs and outputs {lowered_names} are not those "
                               f"it recorded ({form.input_names}, {form.output_names})")
        return program


def _channels_last(setting: Any, precision: str, kind: str, device: str) -> bool:
    """GPU_CHANNELS_LAST resolved: AUTO is on for f16/bf16 on CUDA only (unmeasured elsewhere)."""
    if isinstance(setting, bool):
        return setting
    value = str(setting).upper()
    if value not in ("AUTO", "YES", "NO"):
        raise PropertyError(f"GPU_CHANNELS_LAST {setting!r} is not accepted by {device}; "
                            "accepted: AUTO, YES, NO")
    if value == "AUTO":
        return kind == "cuda" and precision in ("f16", "bf16")
    return value == "YES"


def _compile_plan(settings: Mapping[str, Any], device: str, torch_device: Any, lowered: LoweredGraph,
                  specializer: Specializer | None, for_cache: bool, form: CachedForm | None) -> CompilePlan:
    """``TORCH_COMPILE`` and ``TORCH_COMPILE_MODE`` resolved for this program (see ``tiers``); a
    tiered compile of a program loaded from the cache starts from the entry's torch artefacts."""
    from inferplex.devices.gpu.specialize import Specializer
    from inferplex.devices.gpu.tiers import compile_mode, plan_compile

    setting = values.yes_no_auto(settings["TORCH_COMPILE"])
    cuda = torch_device.type == "cuda"
    mode = compile_mode(settings["TORCH_COMPILE_MODE"], cuda, device)
    specialized = specializer is not None and Specializer.worthwhile(lowered)
    plan = plan_compile(setting, mode, settings["PERFORMANCE_HINT"], cuda, lowered.input_shapes, specialized,
                        for_cache)
    if plan.how == "tiered" and form is not None and form.torch_artifacts:
        return dataclasses.replace(plan, artifacts=form.torch_artifacts)
    return plan


def _warm_up(program: GpuProgram, lowered: Any, settings: Mapping[str, Any], inline: bool, keep_form: bool,
             form: CachedForm | None) -> bytes | None:
    """Run the program's first runs while compiling where that helps; torch.compile's artefacts
    when it compiled for the model cache.

    On CUDA, every worker's graph is captured (see ``graphs.warm_up``).  With
    torch.compile (``inline``), a compile for the cache or from a cached form runs its
    first run here too (torch.compile compiles on it), recording torch's
    artefacts, or loading the cached ones first (a cached form of static shapes
    plans a tiered compile instead, which loads them in the background).
    """
    from inferplex.devices.gpu.graphs import warm_up

    graphs = (program.torch_device.type == "cuda" and lowered.capturable and bool(settings["CUDA_GRAPHS"])
              and not bool(settings["ENABLE_PROFILING"]))
    compiled = inline and (keep_form or form is not None)
    if not compiled:
        if graphs:
            warm_up(program, lowered)  # every worker's CUDA graph captured before the compile returns
        return None
    from inferplex.devices.gpu.cache_form import load_torch_artifacts, recording_torch_artifacts
    from inferplex.devices.gpu.tiers import COMPILE_LOCK

    with COMPILE_LOCK, recording_torch_artifacts() as saved:
        if form is not None and form.torch_artifacts:
            load_torch_artifacts(form.torch_artifacts)
        ran = _first_runs(program, lowered)
        return saved() if ran and keep_form else None


def _first_runs(program: GpuProgram, lowered: Any) -> bool:
    """Run each worker once on zeros, given as numpy arrays as requests give them (torch.compile
    guards on how its inputs were made: a torch tensor made here would compile once more on the
    first request); False, running nothing, when an input shape is dynamic."""
    import torch

    from inferplex.devices.gpu.tensors import torch_to_numpy

    shapes = lowered.input_shapes
    if any(shape is None or not all(isinstance(d, int) for d in shape) for shape in shapes):
        return False
    zeros = {name: torch_to_numpy(torch.zeros(list(shape), dtype=dtype))
             for name, dtype, shape in zip(lowered.input_names, lowered.input_dtypes, shapes, strict=True)}
    for worker in range(program.num_workers):
        try:
            program.run(zeros, worker)
        except Exception as error:  # noqa: BLE001 - the first request compiles instead
            _log.info("inferplex: %s: a first run on zeros failed, the first request compiles "
                      "instead: %s", program.device, error)
            return False
    return True
