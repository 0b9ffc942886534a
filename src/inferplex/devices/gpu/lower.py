"""Lower an ONNX model (onnx-ir) to a flat ``torch.fx.GraphModule``.

Two steps:

1. :func:`analyze_model` walks the main graph once in topological order.  It
   runs ONNX shape inference (on a weight-free copy, so the caller's model is
   never touched), resolves every value it can to numpy at lowering time
   (initializers, ``Constant`` outputs, ``Shape`` of a statically shaped tensor,
   and any deterministic node whose inputs are all constant, evaluated with its
   own lowering on the host; see :mod:`._folding`), and asks each node's lowering
   whether it runs the node exactly.  The result tells HETERO which nodes the GPU
   device takes.
2. :func:`lower_model` turns the analysis into a GraphModule: graph inputs become
   placeholders, constants that feed run-time nodes become buffers on the target
   device, and every remaining node one ``call_function`` of the callable its
   lowering returned.  Because constants were resolved, the forward pass does
   not read device memory back to the host, so it can be captured in a CUDA
   graph, unless the graph holds an op whose output shape depends on data.

Reduced precision (``f16``/``bf16``) converts floating weights once here and
casts floating inputs at the graph boundary (except the boxes, scores and
thresholds only NonMaxSuppression and RoiAlign read, see
:func:`.build.keeps_float32`); outputs are cast back to the model's declared
types, so callers see the model's dtypes whatever the hint (an output the
model declares f16/bf16, as ``OUTPUT_PRECISION`` INFERENCE makes it, is handed
out as computed: no cast runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx

from inferplex.devices.gpu import ops as _ops  # noqa: F401  (fills the registry)
from inferplex.devices.gpu._folding import (
    DATA_DEPENDENT,
    constant_attribute,
    fold_node,
    propagate_shapes,
    static_shape_value,
    value_type,
)
from inferplex.devices.gpu.build import Builder, cast_to, cast_value, keeps_float32
from inferplex.devices.gpu.ops._common import VALUE_KINDS, value_kind
from inferplex.devices.gpu.ops._fused_float import contiguous
from inferplex.devices.gpu.optimize import WeightCache, plan_fusions
from inferplex.devices.gpu.registry import NodeInfo, find_lowering
from inferplex.devices.gpu.shapes import ShapeInference
from inferplex.devices.gpu.support import forget_source_when_collected
from inferplex.devices.gpu.tensors import (
    HELD_DTYPES,
    TORCH_DTYPES,
    held_array,
    numpy_to_torch,
    torch_to_numpy,
)
from inferplex.errors import UnsupportedOpError

__all__ = [
    "HELD_DTYPES",
    "TORCH_DTYPES",
    "Analysis",
    "LoweredGraph",
    "analyze_model",
    "lower_model",
    "node_friendly_name",
    "numpy_to_torch",
    "torch_to_numpy",
]


_FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def node_friendly_name(node: ir.Node, index: int) -> str:
    """The node's name, or ``<op_type>_<index>`` for an unnamed node (index in the graph)."""
    return node.name or f"{node.op_type}_{index}"


@dataclass
class Analysis:
    """What the GPU device knows about a model before building anything."""

    model: ir.Model
    nodes: list[tuple[str, ir.Node]] = field(default_factory=list)
    """(friendly name, node) in graph order."""
    infos: dict[str, NodeInfo] = field(default_factory=dict)
    """Static facts of each node, by friendly name."""
    constants: dict[ir.Value, np.ndarray] = field(default_factory=dict)
    """Every value resolved at lowering time."""
    folded: set[str] = field(default_factory=set)
    """Nodes whose outputs are all constants: they do not run."""
    unsupported: dict[str, str] = field(default_factory=dict)
    """Friendly name -> reason, for the nodes the device cannot run."""
    types: dict[str, tuple[ir.DataType | None, tuple[int | str | None, ...] | None]] = \
        field(default_factory=dict)
    """Inferred element type and shape of each value, by value name."""
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    """The callable each supported node's lowering returned, by friendly name."""
    specialized: bool = False
    """Whether the graph inputs' shapes are fixed (one input signature): given, or static in the model."""

    @property
    def supported(self) -> set[str]:
        return {name for name, _ in self.nodes if name not in self.unsupported}


@dataclass(frozen=True)
class LoweredGraph:
    """A model lowered to torch, ready for :class:`GpuProgram`."""

    module: torch.fx.GraphModule
    input_names: tuple[str, ...]
    input_dtypes: tuple[torch.dtype, ...]
    """Element type each input must have (the model's)."""
    input_shapes: tuple[tuple[int | str | None, ...] | None, ...]
    output_names: tuple[str, ...]
    output_dtypes: tuple[torch.dtype | None, ...]
    capturable: bool
    """False when some op reads data back to the host (no CUDA graph capture)."""
    compute_dtype: torch.dtype | None
    """Floating type of the computation under a reduced precision hint, else None."""
    folded_nodes: tuple[tuple[str, str], ...] = ()
    """(name, op type) of the nodes resolved to constants at lowering time (they never run)."""
    input_kinds: tuple[str, ...] = ()
    """Kind of each input (``ops._common.VALUE_KINDS``: a sequence comes as a list of tensors, an
    optional as its value or None); empty: every input is a tensor."""


# --- analysis -----------------------------------------------------------------


def _opset(model: ir.Model, domain: str) -> int:
    domain = "" if domain == "ai.onnx" else domain
    version = model.opset_imports.get(domain)
    if version is None and domain == "":
        version = model.opset_imports.get("ai.onnx")
    return int(version) if version is not None else 1


def _make_info(analysis: Analysis, node: ir.Node, opset: int) -> NodeInfo:
    ins = [value_type(analysis, v) for v in node.inputs]
    outs = [value_type(analysis, v) for v in node.outputs]
    return NodeInfo(
        node=node, opset=opset,
        input_dtypes=tuple(t[0] for t in ins), input_shapes=tuple(t[1] for t in ins),
        constants=tuple(None if v is None else analysis.constants.get(v) for v in node.inputs),
        output_dtypes=tuple(t[0] for t in outs), output_shapes=tuple(t[1] for t in outs))


def _dtype_problem(info: NodeInfo, held: frozenset[ir.DataType] = frozenset()) -> str | None:
    for kind, dtypes in (("input", info.input_dtypes), ("output", info.output_dtypes)):
        for index, dtype in enumerate(dtypes):
            if dtype is not None and dtype not in TORCH_DTYPES and dtype not in held:
                return f"{kind} {index} has element type {dtype.name}, which torch cannot compute"
    return None


def _check_node(analysis: Analysis, name: str, node: ir.Node, index: int) -> None:
    """Analyze one node: resolve constants, record support or the reason against it."""
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        value = constant_attribute(node)
        if value is None:
            analysis.unsupported[name] = "Constant holds a string, sparse or unsupported-type value"
        else:
            analysis.constants[node.outputs[0]] = value
            analysis.folded.add(name)
        return
    opset = _opset(analysis.model, node.domain)
    info = _make_info(analysis, node, opset)
    analysis.infos[name] = info
    lowering = find_lowering(node.domain, node.op_type, opset)
    problem = _dtype_problem(info, lowering.held_dtypes if lowering is not None else frozenset())
    if problem is None and node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx"):
        value = static_shape_value(node, info)
        if value is not None:
            analysis.constants[node.outputs[0]] = value
            analysis.folded.add(name)
            return
    if problem is None and lowering is not None and lowering.supports is not None:
        problem = lowering.supports(info)
    if problem is not None or lowering is None:
        if problem is None:
            domain = f"{node.domain}::" if node.domain else ""
            problem = f"no GPU lowering for {domain}{node.op_type} at opset {opset}"
        analysis.unsupported[name] = problem
        return
    try:
        fn = lowering.lower(info)
    except Exception as e:  # noqa: BLE001 - a lowering that cannot build the node means "unsupported"
        analysis.unsupported[name] = f"lowering failed: {e}"
        return
    analysis.functions[name] = _named(fn, node.op_type)
    if fold_node(analysis, node, info, fn):
        analysis.folded.add(name)
    elif analysis.specialized:
        propagate_shapes(analysis, node, fn, lambda: lowering.lower(info))


def _named(fn: Callable[..., Any], op_type: str) -> Callable[..., Any]:
    """fx names call targets after ``__name__``; give one to callables without (partials, objects)."""
    if hasattr(fn, "__name__"):
        return fn

    def call(*args: Any) -> Any:
        return fn(*args)

    call.__name__ = call.__qualname__ = f"onnx_{op_type}"
    call.data_dependent = getattr(fn, "data_dependent", False)  # type: ignore[attr-defined]
    return call


def analyze_model(model: ir.Model, input_shapes: Mapping[str, Sequence[int]] | None = None,
                  inference: ShapeInference | None = None) -> Analysis:
    """Resolve constants and check every node of the main graph; see the module docstring.

    ``input_shapes`` (input name -> dims) fixes the graph inputs' shapes: the
    analysis of that one signature, where shape arithmetic becomes constant.
    ``inference`` reuses a model's weight-free copy across such analyses.
    """
    inference = inference or ShapeInference(model)
    analysis = Analysis(model=model, types=inference.types(input_shapes),
                        specialized=input_shapes is not None or _static_inputs(model))
    for value in model.graph.initializers.values():
        array = None if value.const_value is None else held_array(value.const_value)
        if array is not None:
            analysis.constants[value] = array
    for index, node in enumerate(model.graph):
        name = node_friendly_name(node, index)
        analysis.nodes.append((name, node))
        _check_node(analysis, name, node, index)
    return analysis


def _static_inputs(model: ir.Model) -> bool:
    """Whether every graph input is a tensor of static shape: the model has one input signature,
    and shapes that ONNX shape inference leaves symbolic (a batch of 1 broadcast against a
    folded constant's unknown dim, say) are found by running the lowerings on meta tensors."""
    initializers = set(model.graph.initializers)
    for value in model.graph.inputs:
        if value.name in initializers:
            continue
        if value_kind(value.type) != "tensor" or value.shape is None \
                or not all(isinstance(d, int) for d in value.shape):
            return False
    return True


# --- building the GraphModule ----------------------------------------------------


def _graph_inputs(model: ir.Model, analysis: Analysis) -> list[ir.Value]:
    return [v for v in model.graph.inputs if v not in analysis.constants]


def _check_supported(analysis: Analysis, model: ir.Model) -> None:
    if analysis.unsupported:
        listing = "; ".join(f"{n} ({_op_of(analysis, n)}): {r}"
                            for n, r in sorted(analysis.unsupported.items()))
        raise UnsupportedOpError(f"the GPU device cannot run {len(analysis.unsupported)} node(s): {listing}. "
                                 "Compile on HETERO:GPU,CPU to place them on the CPU"
                                 f"{_reshape_hint(analysis, model)}")


def _reshape_hint(analysis: Analysis, model: ir.Model) -> str:
    """Where a node needs a rank and the model has inputs declared without a shape: how to give them one."""
    unranked = [value.name for value in model.graph.inputs if value_kind(value.type) == "tensor"
                and value.shape is None and value not in analysis.constants]
    if not unranked or not any("rank" in reason for reason in analysis.unsupported.values()):
        return ""
    names = ", ".join(repr(name) for name in unranked)
    return (f", or give the model's inputs of unknown rank ({names}, declared without a shape) a shape "
            f"with model.reshape({{{unranked[0]!r}: [...]}}) before compile_model")


def _add_inputs(builder: Builder, model: ir.Model) -> tuple[list[ir.Value], list[Any], list[Any]]:
    analysis, compute = builder.analysis, builder.compute_dtype
    inputs = _graph_inputs(model, analysis)
    input_dtypes, input_shapes = [], []
    for position, value in enumerate(inputs):
        dtype, shape = value_type(analysis, value)
        kind = value_kind(value.type)
        if kind not in VALUE_KINDS:
            raise UnsupportedOpError(f"model input {value.name!r} is a {kind}; the GPU device accepts "
                                     f"a {', '.join(VALUE_KINDS)}")
        if dtype not in HELD_DTYPES:
            raise UnsupportedOpError(f"model input {value.name!r} has element type "
                                     f"{getattr(dtype, 'name', dtype)}; the GPU device accepts "
                                     f"{', '.join(t.name for t in HELD_DTYPES)}")
        node = builder.graph.placeholder(f"input_{position}")
        wide = dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE)
        if compute is not None and wide and not keeps_float32(value):
            cast = cast_to if kind == "tensor" else cast_value
            node = builder.graph.call_function(cast, (node, compute))
        builder.env[value] = node
        input_dtypes.append(HELD_DTYPES[dtype])
        # A list's or an absent optional's shape is unknown: nothing compiles ahead for its zeros.
        input_shapes.append(shape if kind == "tensor" else None)
    return inputs, input_dtypes, input_shapes


def _add_outputs(builder: Builder, model: ir.Model, channels_last: bool) -> list[torch.dtype | None]:
    outputs, output_dtypes = [], []
    for value in model.graph.outputs:
        dtype = value_type(builder.analysis, value)[0]
        torch_dtype = HELD_DTYPES.get(dtype) if dtype is not None else None
        out = builder.arg(value)
        if value_kind(value.type) != "tensor":  # a list or None: each tensor cast, none reordered
            if torch_dtype is not None:
                out = builder.graph.call_function(cast_value, (out, torch_dtype))
            outputs.append(out)
            output_dtypes.append(torch_dtype)
            continue
        if torch_dtype is not None:
            out = builder.graph.call_function(cast_to, (out, torch_dtype))
        if channels_last:
            out = builder.graph.call_function(contiguous, (out,))
        outputs.append(out)
        output_dtypes.append(torch_dtype)
    builder.graph.output(tuple(outputs))
    return output_dtypes


def lower_model(model: ir.Model, device: Any = "cpu", precision: str = "f32",
                analysis: Analysis | None = None, cache: WeightCache | None = None,
                channels_last: bool = False) -> LoweredGraph:
    """Lower ``model`` to a GraphModule on ``device``.

    Raise UnsupportedOpError listing every node it cannot run.

    ``precision`` is ``"f32"`` (exact: the model's own types), ``"f16"`` or ``"bf16"``.
    ``cache`` shares weight tensors with other lowerings of the same model (the
    first lowering through it must be the generic one); ``channels_last`` stores
    4-D convolutions NHWC (see :mod:`.optimize`).
    """
    analysis = analysis or analyze_model(model)
    _check_supported(analysis, model)
    cache = cache or WeightCache()
    cache.adopt(analysis)
    compute = {"f32": None, "f16": torch.float16, "bf16": torch.bfloat16}[precision]
    fusions = plan_fusions(analysis, channels_last, cuda=torch.device(device).type == "cuda")
    builder = Builder(analysis, torch.device(device), compute, cache, fusions)
    inputs, input_dtypes, input_shapes = _add_inputs(builder, model)
    for name, node in analysis.nodes:
        if name not in analysis.folded and node not in fusions.absorbed:
            builder.emit(name, node)
    output_dtypes = _add_outputs(builder, model, bool(fusions.channels_last_convs))
    if builder.device.type == "cuda":
        # Constants finished on the device (channels-last copies) were queued on the caller's
        # current stream, the user's own maybe; the workers' streams do not wait for it.
        torch.cuda.current_stream(builder.device).synchronize()
    # calls whose results nothing reads (a fused call took over what they fed) do not run
    builder.graph.eliminate_dead_code()
    module = torch.fx.GraphModule(builder.root, builder.graph, class_name="OnnxGraph")
    module.eval()
    forget_source_when_collected(module)
    # A sequence's length is no part of an input signature, and a graph's outputs are tensors.
    kinds = tuple(value_kind(v.type) for v in inputs)
    tensors_only = all(value_kind(v.type) == "tensor" for v in (*inputs, *model.graph.outputs))
    capturable = tensors_only and not any(
        (n.op_type in DATA_DEPENDENT and n.op_type != "If")
        or getattr(analysis.functions.get(name), "data_dependent", False)
        for name, n in analysis.nodes if name not in analysis.folded)
    return LoweredGraph(module, tuple(v.name or f"input_{i}" for i, v in enumerate(inputs)),
                        tuple(input_dtypes), tuple(input_shapes),
                        tuple(v.name or f"output_{i}" for i, v in enumerate(model.graph.outputs)),
                        tuple(output_dtypes), capturable, compute,
                        tuple((name, n.op_type) for name, n in analysis.nodes if name in analysis.folded),
                        kinds if any(k != "tensor" for k in kinds) else ())


def _op_of(analysis: Analysis, name: str) -> str:
    for node_name, node in analysis.nodes:
        if node_name == name:
            return node.op_type
    return "?"


def constant_inputs(model: ir.Model, analysis: Analysis) -> Iterable[str]:
    """Names of graph inputs backed by initializers: compiled as constants, not fed."""
    return [v.name or "" for v in model.graph.inputs if v in analysis.constants]
