"""The CPU device: the host CPU, run by OpenVINO's CPU plugin or by ONNX Runtime.

Engines (the ``ENGINE`` property):

- ``OPENVINO`` (the default where the ``openvino`` package is installed): the
  fastest x86 CPU engine, computing in bf16 by default on CPUs with AMX or
  AVX512_BF16.  See ``openvino_engine.py``.
- ``ONNXRUNTIME``: ONNX Runtime's CPU execution provider, f32 only.  See
  ``onnxruntime_engine.py``.

Left unset, each model runs on OpenVINO when OpenVINO reads and compiles it,
and on ONNX Runtime otherwise (contrib ops that OpenVINO lacks, such as
``com.microsoft.Inverse``; ops OpenVINO computes unlike ONNX, among them the
quantized ones of :mod:`.quantized`); the compiled model's ``ENGINE`` says which, and
``ENGINE_FALLBACK_REASON`` why.  Set explicitly, the engine is the one asked
for, and a model it cannot run is a CompileError.  ``query_model`` answers for
the engine that would compile the model.

Every key OpenVINO's CPU plugin lists in its SUPPORTED_PROPERTIES is taken, with its values:
its LLM-cache and quantization keys (``KV_CACHE_PRECISION``, ``KEY_CACHE_PRECISION``,
``VALUE_CACHE_PRECISION``, ``KEY_CACHE_GROUP_SIZE``, ``VALUE_CACHE_GROUP_SIZE``,
``DYNAMIC_QUANTIZATION_GROUP_SIZE``), ``CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE``, ``TBB_PARTITIONER``,
``ENABLE_CPU_RESERVATION``, ``ENABLE_TENSOR_PARALLEL`` and ``MODEL_DISTRIBUTION_POLICY``
(``{TENSOR_PARALLEL}``), ``ENABLE_WEIGHTLESS`` and ``WEIGHTS_PATH``.  The OpenVINO engine compiles
with them and its compiled model reads back what OpenVINO took; ONNX Runtime, whose kernels they do
not tune, reads them back as set, and refuses ``ENABLE_CPU_RESERVATION=True``, which it cannot hold.
Never set, they read OpenVINO's defaults.
"""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir

from inferplex._opsets.build import EXACT_INTEGERS_KEY
from inferplex.config import values
from inferplex.config.values import Parser
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo
from inferplex.devices.cpu import cpu_info, onnxruntime_engine, openvino_core, openvino_engine, quantized
from inferplex.devices.cpu.onnxruntime_support import ort_supported_nodes
from inferplex.devices.cpu.program import CpuProgram
from inferplex.errors import CompileError

__all__ = ["CpuPlugin"]

_log = logging.getLogger("inferplex")


def _element_type(*accepted: str) -> Parser:
    """An element type among ``accepted`` (``"u8"``, ``"f16"``...): its name, or an ``ov.Type``
    (OpenVINO's too)."""
    aliases = {"FP32": "f32", "FP16": "f16", "BFLOAT16": "bf16", "FLOAT32": "f32", "FLOAT16": "f16",
               "UINT8": "u8", "INT8": "i8", "UINT4": "u4", "UINT3": "u3"}
    parse = values.choice(*accepted, aliases={k: v for k, v in aliases.items() if v in accepted})

    def element_type(value: Any) -> str:
        if not isinstance(value, str) and callable(getattr(value, "get_type_name", None)):
            value = value.get_type_name()
        return parse(value)

    return element_type


def _rate(value: Any) -> float:
    """A float in [0.0, 1.0]."""
    try:
        rate = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise values.Reject("a float from 0.0 to 1.0")
    return rate


def _path(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise values.Reject("a file path (str or os.PathLike)")
    return os.fspath(value)


def _cpu_distribution(value: Any) -> str:
    """OpenVINO CPU's MODEL_DISTRIBUTION_POLICY: ``{TENSOR_PARALLEL}`` or an empty set (stored as text)."""
    value = values.as_text(value)
    names = [str(v) for v in value] if isinstance(value, (set, frozenset, list, tuple)) else [str(value)]
    names = [name.strip().upper() for name in names if name.strip()]
    if any(name != "TENSOR_PARALLEL" for name in names):
        raise values.Reject("{TENSOR_PARALLEL} or an empty set (the CPU takes no PIPELINE_PARALLEL)")
    return "TENSOR_PARALLEL" if names else ""


_PARSERS: dict[str, Parser] = {
    "THREAD_SPINNING": values.boolean,
    "THREAD_PRIORITY": values.choice("NORMAL", "LOW"),
    "ENGINE": values.choice("OPENVINO", "ONNXRUNTIME",
                            aliases={"ONNX_RUNTIME": "ONNXRUNTIME", "ORT": "ONNXRUNTIME"}),
    "CPU_DENORMALS_OPTIMIZATION": values.boolean,
    "ENABLE_HYPER_THREADING": values.boolean,
    "SCHEDULING_CORE_TYPE": values.choice("ANY_CORE", "PCORE_ONLY", "ECORE_ONLY"),
    "ENABLE_CPU_RESERVATION": values.boolean,
    "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE": _rate,
    "ENABLE_TENSOR_PARALLEL": values.boolean,
    "TBB_PARTITIONER": values.choice("STATIC", "AUTO", "NONE"),
    "DYNAMIC_QUANTIZATION_GROUP_SIZE": values.int_at_least(0),
    "KV_CACHE_PRECISION": _element_type("u8", "u4", "u3", "bf16", "f16", "f32"),
    "KEY_CACHE_PRECISION": _element_type("u8", "i8", "u4", "u3", "bf16", "f16", "f32"),
    "VALUE_CACHE_PRECISION": _element_type("u8", "u4", "u3", "bf16", "f16", "f32"),
    "KEY_CACHE_GROUP_SIZE": values.int_at_least(0),
    "VALUE_CACHE_GROUP_SIZE": values.int_at_least(0),
    "ENABLE_WEIGHTLESS": values.boolean,
    "WEIGHTS_PATH": _path,
    "MODEL_DISTRIBUTION_POLICY": _cpu_distribution,
}
"""The CPU's own keys (see the module docstring); those after SCHEDULING_CORE_TYPE are OpenVINO's
CPU plugin's, with its values, passed to it where it runs the model
(:data:`.openvino_core.PASSED_AS_IS`); ONNX Runtime reports them as set
(:func:`.onnxruntime_engine.check_precision` refuses the one it cannot hold)."""

_SUPPORTED = (
    "PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS", "NUM_STREAMS", "INFERENCE_NUM_THREADS",
    "INFERENCE_PRECISION_HINT", "ENABLE_PROFILING", "MEMORY_LIMIT", "THREAD_SPINNING",
    "THREAD_PRIORITY", "ENGINE", "EXECUTION_MODE_HINT", "MODEL_PRIORITY", "ENABLE_CPU_PINNING",
    "CPU_DENORMALS_OPTIMIZATION", "ENABLE_HYPER_THREADING", "SCHEDULING_CORE_TYPE",
    *openvino_core.PASSED_AS_IS,
)
_DEFAULTS: dict[str, Any] = {
    "PERFORMANCE_HINT": "LATENCY", "PERFORMANCE_HINT_NUM_REQUESTS": 0, "NUM_STREAMS": 1,
    "INFERENCE_NUM_THREADS": 0, "ENABLE_PROFILING": False, "MEMORY_LIMIT": 0,
    "THREAD_SPINNING": True, "THREAD_PRIORITY": "NORMAL", "EXECUTION_MODE_HINT": "PERFORMANCE",
    "MODEL_PRIORITY": "MEDIUM", "CPU_DENORMALS_OPTIMIZATION": False, "WEIGHTS_PATH": "",
}
"""What ``core.get_property("CPU", key)`` reads for a setting never set, as OpenVINO answers
with its defaults: the LATENCY hint; ``NUM_STREAMS`` 1 (as OpenVINO reads it: the streams of
a compile still come from its hint unless ``NUM_STREAMS`` is set), 0 threads and 0 requests
(the engine decides), no ``MEMORY_LIMIT`` (0); idle threads spin, as they do with the one
stream of the LATENCY hint.  ``WEIGHTS_PATH`` reads empty, as OpenVINO's (it only writes)."""


def default_engine() -> str:
    """``"OPENVINO"`` where the openvino package is installed, else ``"ONNXRUNTIME"``."""
    return "OPENVINO" if openvino_core.available() else "ONNXRUNTIME"


class CpuPlugin(DevicePlugin):
    """The host CPU on OpenVINO's CPU plugin, or on ONNX Runtime (see the module docstring)."""

    family = "CPU"

    def devices(self) -> list[str]:
        return ["CPU"]

    def supported_properties(self) -> tuple[str, ...]:
        return _SUPPORTED

    def property_parsers(self) -> Mapping[str, Parser]:
        return _PARSERS

    def device_property(self, device: str, key: str) -> Any:
        if key in _DEFAULTS:
            return _DEFAULTS[key]
        engine = default_engine()
        if key in openvino_core.X86_DEFAULTS:
            return openvino_core.cpu_setting(key) if engine == "OPENVINO" else openvino_core.X86_DEFAULTS[key]
        facts = {
            "FULL_DEVICE_NAME": cpu_info.cpu_name,
            "DEVICE_TOTAL_MEM_SIZE": lambda: self.memory(device).total_bytes,
            "DEVICE_FREE_MEM_SIZE": lambda: self.memory(device).free_bytes,
            "DEVICE_TYPE": lambda: "host",
            "NUMBER_OF_CORES": cpu_info.cores,
            "ENGINE": lambda: engine,
            "ENGINE_VERSION": lambda: _engine_version(engine),
            "INSTRUCTION_SETS": lambda: list(cpu_info.instruction_sets()),
            "INFERENCE_PRECISION_HINT": lambda: (
                openvino_core.default_precision() if engine == "OPENVINO" else "f32"),
            "ENABLE_CPU_PINNING": lambda: (
                bool(openvino_core.cpu_fact("ENABLE_CPU_PINNING")) if engine == "OPENVINO" else False),
            "ENABLE_HYPER_THREADING": lambda: (
                bool(openvino_core.cpu_fact("ENABLE_HYPER_THREADING")) if engine == "OPENVINO" else True),
            "SCHEDULING_CORE_TYPE": lambda: "ANY_CORE",
            "DEVICE_ID": lambda: "",
            "RANGE_FOR_STREAMS": lambda: (
                tuple(openvino_core.cpu_fact("RANGE_FOR_STREAMS")) if engine == "OPENVINO"
                else (1, cpu_info.cores())),
            "RANGE_FOR_ASYNC_INFER_REQUESTS": lambda: (
                tuple(openvino_core.cpu_fact("RANGE_FOR_ASYNC_INFER_REQUESTS")) if engine == "OPENVINO"
                else (1, cpu_info.cores(), 1)),
            "DEVICE_ARCHITECTURE": lambda: (
                str(openvino_core.cpu_fact("DEVICE_ARCHITECTURE")) if engine == "OPENVINO"
                else platform.machine().lower()),
            "OPTIMIZATION_CAPABILITIES": lambda: _capabilities(engine),
            "EXECUTION_DEVICES": lambda: ["CPU"],
            "CACHING_PROPERTIES": lambda: {"FULL_DEVICE_NAME": "RO"},
        }
        if key not in facts:
            raise KeyError(key)
        return facts[key]()

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        if _engine_asked(config) == "ONNXRUNTIME":
            return onnxruntime_engine.stream_layout(config)[0]
        return openvino_core.optimal_requests(config)

    def memory(self, device: str) -> MemoryInfo:
        return cpu_info.memory()

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        asked = _engine_asked(config)
        if asked == "ONNXRUNTIME":
            return ort_supported_nodes(model)
        if config.get("ENGINE") != "OPENVINO" and _onnx_runtime_keeps(model):
            return ort_supported_nodes(model)
        nodes, whole = openvino_engine.openvino_supported_nodes(model)
        if whole or config.get("ENGINE") == "OPENVINO":
            return nodes
        return ort_supported_nodes(model)  # the engine that would compile this model

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> CpuProgram:
        asked = _engine_asked(config)
        if asked == "ONNXRUNTIME":
            onnxruntime_engine.check_precision(config)
            return onnxruntime_engine.OnnxRuntimeProgram(model, config)
        reason = "" if config.get("ENGINE") == "OPENVINO" else _onnx_runtime_keeps(model)
        if not reason and config.get("ENGINE") != "OPENVINO":
            preferred = _onnx_runtime_where_it_runs(model, config)
            if preferred is not None:
                return preferred
        if not reason:
            try:
                return openvino_engine.OpenVinoProgram(model, config)
            except openvino_engine.OpenVinoCannotRun as error:
                if config.get("ENGINE") == "OPENVINO":
                    raise CompileError(f"OpenVINO cannot run the model on CPU: {error}; ENGINE=ONNXRUNTIME "
                                       "runs it on ONNX Runtime, as leaving ENGINE unset does") from error
                reason = f"OpenVINO cannot run the model: {error}"
        onnxruntime_engine.check_precision(config, f" (used because {reason})")
        _log.info("inferplex: the CPU runs this model on ONNX Runtime: %s", reason)
        return onnxruntime_engine.OnnxRuntimeProgram(model, config, fallback_reason=reason)

    # --- model caching: each engine's own compiled form (see inferplex.devices.cache) ------

    def cache_fingerprint(self, device: str, config: Mapping[str, Any]) -> str | None:
        """Both engines' versions (the default engine falls back to ONNX Runtime) and the CPU itself:
        OpenVINO's blobs and ONNX Runtime's optimized models are made for the instruction sets here."""
        versions = [onnxruntime_engine.ort_version()]
        if openvino_core.available():
            versions.insert(0, openvino_core.openvino_version())
        return "; ".join([*versions, cpu_info.cpu_name(), ",".join(sorted(cpu_info.instruction_sets()))])

    def export_program(self, program: DeviceProgram) -> bytes | None:
        if isinstance(program, openvino_engine.OpenVinoProgram):
            return _OPENVINO_BLOB + program.exported()
        if isinstance(program, onnxruntime_engine.OnnxRuntimeProgram):
            return _ORT_BLOB + program.exported()
        return None

    def import_program(self, blob: bytes, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        if blob.startswith(_OPENVINO_BLOB):
            return openvino_engine.OpenVinoProgram.imported(blob[len(_OPENVINO_BLOB):], config)
        if blob.startswith(_ORT_BLOB):
            return onnxruntime_engine.OnnxRuntimeProgram.imported(blob[len(_ORT_BLOB):], config)
        raise CompileError("the CPU's compiled-program blob names no engine it knows")


_OPENVINO_BLOB = b"OPENVINO\n"
_ORT_BLOB = b"ONNXRUNTIME\n"
"""First line of an exported CPU program: the engine that compiled it."""


def _engine_asked(config: Mapping[str, Any]) -> str:
    """The engine a config asks for, or the default: ``"OPENVINO"`` or ``"ONNXRUNTIME"``.

    Raise CompileError for ENGINE=OPENVINO where the openvino package is missing.
    """
    asked = config.get("ENGINE")
    if asked == "OPENVINO" and not openvino_core.available():
        raise CompileError("ENGINE=OPENVINO needs the openvino package (pip install openvino); "
                           "ENGINE=ONNXRUNTIME, or leaving ENGINE unset, runs on ONNX Runtime")
    return str(asked or default_engine())


def _onnx_runtime_keeps(model: ir.Model) -> str:
    """Why the default engine leaves ``model`` to ONNX Runtime though OpenVINO reads it ('' if not).

    Models with a node that OpenVINO computes differently from ONNX (found by
    ONNX's conformance suite; for casts to float8 see :func:`_onnx_runtime_where_it_runs`);
    models that compute in float64: OpenVINO's CPU plugin computes them in f32
    and saturates infinities to the largest finite f32 on the way, where ONNX
    Runtime computes in f64 as the model says;
    and models with string tensors: OpenVINO's CPU plugin runs few ops on them,
    and its Python binding aborts the process at exit after it passed a string
    tensor through unchanged (an ``Identity``);
    and models with an input of unknown rank (declared without a shape): OpenVINO
    reads it as a Parameter of dynamic rank, which its CPU plugin refuses to compile.
    """
    unranked = [value.name for value in model.graph.inputs
                if isinstance(value.type, ir.TensorType) and value.shape is None]
    if unranked:
        names = ", ".join(repr(name) for name in unranked)
        return f"OpenVINO's CPU plugin takes no input of dynamic rank (the model's {names})"
    for node in model.graph:
        if reason := _openvino_differs(node):
            return f"OpenVINO's CPU plugin computes {node.op_type} {reason} unlike ONNX's definition"
    values = [*model.graph.inputs, *model.graph.outputs, *model.graph.initializers.values()]
    values.extend(output for node in model.graph for output in node.outputs)
    types = {value.dtype for value in values}
    if ir.DataType.DOUBLE in types:
        return "the model computes in float64, which OpenVINO's CPU plugin computes in float32"
    if ir.DataType.STRING in types:
        return "the model has string tensors, which OpenVINO's CPU plugin runs for few ops"
    return ""


def _openvino_differs(node: ir.Node) -> str:
    """The attributes of ``node`` that OpenVINO's CPU plugin computes unlike ONNX ('' where none).

    Some ``com.microsoft`` ops it reads compute unlike ONNX Runtime (:func:`_contrib_differs`);
    quantized models are :mod:`.quantized`'s.
    """
    if node.domain == "com.microsoft":
        return _contrib_differs(node)
    if node.domain not in ("", "ai.onnx"):
        return ""
    if node.op_type == "LSTM" and len(node.inputs) > 7 and node.inputs[7] is not None:
        return "with peepholes"
    if node.op_type == "Resize":
        if node.attributes.get_int("antialias", 0):
            return "with antialias"
        if node.attributes.get_string("keep_aspect_ratio_policy", "stretch") != "stretch":
            return "with keep_aspect_ratio_policy"
        if node.attributes.get_int("exclude_outside", 0):
            return "with exclude_outside"
    return ""


def _contrib_differs(node: ir.Node) -> str:
    """The forms of ONNX Runtime's contrib ops that OpenVINO reads but computes unlike ONNX Runtime's
    kernels, which define them ('' where none): Attention's ``scale``, FusedGemm's activations other
    than Relu and LeakyRelu, RotaryEmbedding's partial rotation and its one start position, and
    GroupQueryAttention (OpenVINO's reading of it fails on batches of more than one)."""
    attributes = node.attributes
    if node.op_type == "GroupQueryAttention":
        return "on batches of more than one"
    scale = attributes.get("scale")
    if node.op_type == "Attention" and scale is not None and scale.as_float():
        return "with a scale attribute"
    activation = attributes.get_string("activation", "")
    if node.op_type == "FusedGemm" and activation not in ("", "Relu", "LeakyRelu"):
        return f"with activation {activation}"
    if node.op_type == "RotaryEmbedding":
        if attributes.get_int("rotary_embedding_dim", 0):
            return "with rotary_embedding_dim"
        positions = node.inputs[1] if len(node.inputs) > 1 else None
        if positions is None or positions.shape is None or len(positions.shape) == 1:
            return "with one start position for every row"
    return ""


def _onnx_runtime_where_it_runs(model: ir.Model, config: Mapping[str, Any]) -> CpuProgram | None:
    """ONNX Runtime's program for a model that casts or quantizes to float8 unlike ONNX on OpenVINO
    (:func:`_float8_differs`), or whose quantized ops OpenVINO computes unlike ONNX (see
    :mod:`.quantized`), where ONNX Runtime compiles it at f32 (the precision it computes in), or
    whose integer arithmetic must be exact to 32 and 64 bits (``EXACT_INTEGERS_KEY``: the bitwise
    ops), at any precision;
    else None, and OpenVINO runs it: ONNX Runtime lacks such kernels at the newest opsets, where a
    model OpenVINO runs, edge values aside, beats a compile error."""
    reason = next((found for node in model.graph if (found := _float8_differs(node))), "")
    if reason:
        reason = f"OpenVINO's CPU plugin computes {reason} unlike ONNX's definition"
    reason = reason or quantized.onnx_runtime_keeps(model)
    exact = next((what for node in model.graph if (what := node.metadata_props.get(EXACT_INTEGERS_KEY))), "")
    if exact and not reason:  # it divides 32-bit integers in f32 and holds 64-bit ones in 32 bits
        reason = f"OpenVINO's CPU plugin rounds the integer arithmetic of {exact}"
    if not reason or (config.get("INFERENCE_PRECISION_HINT", "f32") != "f32" and not exact):
        return None
    try:
        program = onnxruntime_engine.OnnxRuntimeProgram(model, config, fallback_reason=reason)
    except CompileError as error:
        if exact:
            _log.warning("inferplex: ONNX Runtime cannot run this model (%s), so OpenVINO does: %s, "
                         "beyond 2**24 in magnitude", str(error).splitlines()[0], reason)
        return None
    _log.info("inferplex: the CPU runs this model on ONNX Runtime: %s", reason)
    return program


_SATURATED = frozenset({ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E5M2})
"""The float8 types OpenVINO reads whose casts ONNX saturates by default (``saturate=1``)."""


def _float8_differs(node: ir.Node) -> str:
    """How OpenVINO's CPU plugin casts or quantizes to float8 unlike ONNX ('' where it does not).

    Its Cast never saturates (out-of-range values and infinities become NaN or
    infinity where ONNX's default gives the largest finite value) and rounds to
    float8e8m0 to nearest (ONNX rounds up by default); its QuantizeLinear always
    saturates and turns NaN into the lowest finite value.
    """
    if node.domain not in ("", "ai.onnx"):
        return ""
    if node.op_type in ("Cast", "CastLike"):
        target: ir.DataType | None = None
        if node.op_type == "Cast":
            target = ir.DataType(int(node.attributes.get_int("to", 0)))
        elif len(node.inputs) > 1 and node.inputs[1] is not None:
            target = node.inputs[1].dtype
        saturate = int(node.attributes.get_int("saturate", 1))
        if target == ir.DataType.FLOAT8E8M0:
            return f"{node.op_type} to float8e8m0 (rounding to nearest)"
        if target in _SATURATED and saturate:
            return f"{node.op_type} to float8 with saturate (out-of-range values become NaN or infinity)"
    elif node.op_type == "QuantizeLinear" and _quantized_type(node) in _SATURATED:
        return "QuantizeLinear to float8 (NaN becomes the lowest finite value, saturate=0 is ignored)"
    return ""


def _quantized_type(node: ir.Node) -> ir.DataType | None:
    """A QuantizeLinear's output type: its output's, else its zero point's, else ``output_dtype``."""
    output = node.outputs[0].dtype
    if output is not None:
        return output
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].dtype is not None:
        return node.inputs[2].dtype
    output_dtype = node.attributes.get_int("output_dtype", 0)
    return ir.DataType(output_dtype) if output_dtype else None


def _capabilities(engine: str) -> list[str]:
    """FP32 and INT8 (quantized ONNX ops) on either engine; BF16/FP16 where OpenVINO's CPU
    plugin computes in them on this CPU (ONNX Runtime's CPU engine runs f32 only); EXPORT_IMPORT
    (``export_model`` / ``Core.import_model``) on both."""
    names = ["FP32", "INT8", "EXPORT_IMPORT"]
    if engine == "OPENVINO":
        own = set(openvino_core.cpu_fact("OPTIMIZATION_CAPABILITIES"))
        names[1:1] = [name for name in ("BF16", "FP16") if name in own]
    return names


def _engine_version(engine: str) -> str:
    return openvino_core.openvino_version() if engine == "OPENVINO" else onnxruntime_engine.ort_version()
