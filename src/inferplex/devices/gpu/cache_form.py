"""The GPU program's cached form (``CACHE_DIR``, ``export_model``): data, never our own objects.

A lowered program is a ``torch.fx.GraphModule`` whose calls are Python closures
made by the op lowerings: it has no serialized form, and pickling it would make
every cache entry code.  What a cold compile spends its time on is upstream of
those closures: ONNX shape inference, evaluating the nodes whose inputs are all
constant (shape arithmetic, weights computed by ``ConstantOfShape`` or casts),
folding each BatchNormalization into its Conv in float64, then uploading the
weights (``python bench/cache.py --breakdown`` measures each part).  The cached
form keeps the results of that work as data:

* the **optimised model**, as ONNX: every value the analysis resolved and a
  run-time node reads is an initializer, nodes resolved to constants are gone
  (but the DequantizeLinear of an int8 weight that a quantized matmul reads,
  which folds again, so that the int8 matmul is found again), each Conv +
  BatchNormalization pair is one Conv with the folded weight and bias, every
  node is named with its friendly name and every value carries the type and
  shape that shape inference found.  Lowering it again gives the same
  GraphModule (the same lowerings, called with the same weights), without the
  folding: the weights are bit for bit those the cold compile uploaded (under
  f16/bf16 hints, the reduced-precision weights widened back to the model's
  type, which narrow back to the same values);
* the **lowering's decisions** as JSON: the nodes resolved at lowering time
  (profiling lists them as NOT_RUN), the input and output names;
* **torch.compile's artefacts** (``TORCH_COMPILE``): torch's own bytes from
  ``torch.compiler.save_cache_artifacts``, handed back to
  ``torch.compiler.load_cache_artifacts`` before the program compiles again.
  They hold pickles: :mod:`inferplex.devices.cache` checks an entry's owner,
  key and checksum before :meth:`GpuPlugin.import_program
  <inferplex.devices.gpu.plugin.GpuPlugin.import_program>` sees it.

Layout: a marker, the JSON header's length (8 bytes, little-endian) and the
header, then the model's protobuf without its weights (they are typed graph
inputs there), then torch's artefacts, then each weight's raw bytes (64-byte
aligned), which the import reads in place.  Models with subgraph attributes
(If, Loop, Scan) are not given a form: their subgraphs read values of the outer
graph, which the rewrite does not follow.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx_ir as ir

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis
    from inferplex.devices.gpu.optimize import Fusions, WeightCache

__all__ = ["FORM_VERSION", "CachedForm", "NotCacheableError", "load_torch_artifacts", "optimised_model",
           "pack", "recording_torch_artifacts", "unpack"]

FORM_VERSION = 2
"""Version of the layout and of the rewrite; part of the GPU plugin's cache fingerprint."""

_MAGIC = b"INFERPLEX-GPU-FORM\x00"
_ALIGN = 64
_SUBGRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


class NotCacheableError(Exception):
    """The model has no cached form (the message says why); it is compiled cold each time."""


@dataclass(frozen=True)
class CachedForm:
    """A program's cached form, unpacked."""

    model: ir.Model
    """The optimised model (weights are read-only views of the packed bytes)."""
    folded_nodes: tuple[tuple[str, str], ...]
    """(friendly name, op type) of the nodes the cold compile resolved to constants."""
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    torch_artifacts: bytes | None
    """``torch.compiler.save_cache_artifacts()`` bytes, or None."""


# --- the optimised model -------------------------------------------------------------


def optimised_model(model: ir.Model, analysis: Analysis, fusions: Fusions, weights: WeightCache) -> ir.Model:
    """``model`` as the lowering sees it after analysis and fusion planning (see the module docstring).

    ``weights`` is the cold lowering's weight cache: the folded Conv weights
    are read back from it rather than computed again.  Raise
    NotCacheableError for models the rewrite does not handle.
    """
    rewrite = _Rewrite(analysis, weights)
    absorbed = set(fusions.conv_bn.values())  # MatMul + Add stay two nodes: the lowering fuses them again
    # A quantized weight's DequantizeLinear stays a node (it folds again) so the int8 matmul is found again.
    dequantizers = {dq for found in fusions.quantized_matmul.values() for dq in found.dequantizers[1:]}
    nodes: list[ir.Node] = []
    for name, node in analysis.nodes:
        if (name in analysis.folded and node not in dequantizers) or node in absorbed:
            continue
        if any(attribute.type in _SUBGRAPH_ATTRIBUTES for attribute in node.attributes.values()):
            raise NotCacheableError(f"node {name} ({node.op_type}) holds a subgraph")
        bn = fusions.conv_bn.get(name)
        if bn is None:
            nodes.append(rewrite.node(name, node, [rewrite.input(v) for v in node.inputs], node.outputs))
        else:
            x = rewrite.input(node.inputs[0])
            weight, bias = rewrite.folded_conv(name, node, bn)
            nodes.append(rewrite.node(name, node, [x, weight, bias], bn.outputs[:1]))
    outputs = [rewrite.input(value) for value in model.graph.outputs if value is not None]
    inputs = [rewrite.values[v] for v in model.graph.inputs if v in rewrite.values]
    graph = ir.Graph([v for v in inputs if v.const_value is None], [v for v in outputs if v is not None],
                     nodes=nodes,
                     initializers=rewrite.initializers, opset_imports=dict(model.graph.opset_imports),
                     name=model.graph.name)
    return ir.Model(graph, ir_version=model.ir_version, producer_name="inferplex")


class _Rewrite:
    """Old values to new ones, while :func:`optimised_model` builds the new graph."""

    def __init__(self, analysis: Analysis, weights: WeightCache):
        self.analysis = analysis
        self.weights = weights
        self.values: dict[ir.Value, ir.Value] = {}
        self.initializers: list[ir.Value] = []
        self.names = {v.name for _, n in analysis.nodes for v in (*n.inputs, *n.outputs) if v is not None}
        graph = analysis.model.graph
        for value in graph.inputs:
            if value not in analysis.constants:
                self.values[value] = self._typed(ir.Value(name=value.name), value)

    def _typed(self, new: ir.Value, old: ir.Value) -> ir.Value:
        """``new`` with ``old``'s element type and shape, as shape inference knows them."""
        dtype, dims = self.analysis.types.get(old.name or "", (None, None))
        dtype = dtype or old.dtype
        if dtype is not None:
            new.type = ir.TensorType(dtype)
        if dims is not None:
            new.shape = ir.Shape(list(dims))
        elif old.shape is not None:
            new.shape = ir.Shape(list(old.shape.dims))
        return new

    def constant(self, name: str, array: np.ndarray) -> ir.Value:
        dtype = ir.DataType.from_numpy(array.dtype)
        value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(dtype),
                         const_value=ir.Tensor(_c_order(array), dtype=dtype, name=name))
        self.initializers.append(value)
        return value

    def input(self, value: ir.Value | None) -> ir.Value | None:
        if value is None:
            return None
        new = self.values.get(value)
        if new is None:
            if value not in self.analysis.constants:
                raise NotCacheableError(f"value {value.name!r} is read before it is made")
            new = self.values[value] = self.constant(value.name or self._fresh("constant"),
                                                      self.analysis.constants[value])
        return new

    def node(self, name: str, node: ir.Node, inputs: Iterable[ir.Value | None],
             outputs: Iterable[ir.Value]) -> ir.Node:
        old_outputs = list(outputs)
        new = ir.Node(node.domain, node.op_type, list(inputs), list(node.attributes.values()),
                      num_outputs=len(old_outputs), name=name, overload=node.overload)
        for old, made in zip(old_outputs, new.outputs, strict=True):
            made.name = old.name
            self._typed(made, old)
            self.values[old] = made
        return new

    def folded_conv(self, name: str, conv: ir.Node, bn: ir.Node) -> tuple[ir.Value, ir.Value]:
        """The weight and bias of a Conv that absorbs ``bn``, as the cold lowering uploaded them."""
        original = self.analysis.constants[conv.inputs[1]]  # type: ignore[index]
        arrays = [self._uploaded(("conv_bn", name, part), original.dtype) for part in ("weight", "bias")]
        if arrays[0] is None or arrays[1] is None:
            from inferplex.devices.gpu.optimize import fold_conv_bn

            bias = conv.inputs[2] if len(conv.inputs) > 2 else None
            params = [self.analysis.constants[v] for v in bn.inputs[1:5] if v is not None]
            arrays = list(fold_conv_bn(original, None if bias is None else self.analysis.constants[bias],
                                       bn, params))
        return (self.constant(self._fresh(f"{name}.folded_weight"), arrays[0]),  # type: ignore[arg-type]
                self.constant(self._fresh(f"{name}.folded_bias"), arrays[1]))  # type: ignore[arg-type]

    def _uploaded(self, key: tuple[str, ...], dtype: np.dtype[Any]) -> np.ndarray | None:
        from inferplex.devices.gpu.tensors import torch_to_numpy

        tensor = self.weights.tensors.get(key)
        return None if tensor is None else torch_to_numpy(tensor.contiguous()).astype(dtype)

    def _fresh(self, base: str) -> str:
        name, index = base, 0
        while name in self.names:
            index += 1
            name = f"{base}.{index}"
        self.names.add(name)
        return name


# --- bytes -----------------------------------------------------------------------------


def _c_order(array: np.ndarray) -> np.ndarray:
    """``array`` in C order, scalars kept 0-d (``np.ascontiguousarray`` makes them 1-d)."""
    array = np.asarray(array)
    return array if array.flags.c_contiguous else np.array(array, order="C")


def pack(model: ir.Model, folded_nodes: Iterable[tuple[str, str]], input_names: Iterable[str],
         output_names: Iterable[str], torch_artifacts: bytes | None) -> bytes:
    """The bytes of a cached form (see the module docstring)."""
    graph = model.graph
    weights = list(graph.initializers.values())
    view = ir.GraphView([*graph.inputs, *weights], graph.outputs, nodes=graph,
                        opset_imports=dict(graph.opset_imports), name=graph.name)
    shell = ir.Model(view, ir_version=model.ir_version,  # type: ignore[arg-type] # a view serializes alike
                     producer_name=model.producer_name)
    proto = ir.serde.serialize_model(shell).SerializeToString()
    artifacts = torch_artifacts or b""
    offset = len(proto) + len(artifacts)
    table: list[dict[str, Any]] = []
    parts: list[bytes | memoryview] = [proto, artifacts]
    for value in weights:
        array = _c_order(value.const_value.numpy())  # type: ignore[union-attr]
        padding = -offset % _ALIGN
        parts.append(bytes(padding))
        offset += padding
        table.append({"name": value.name, "dtype": int(value.const_value.dtype),  # type: ignore[union-attr]
                      "shape": list(array.shape), "offset": offset, "bytes": array.nbytes})
        parts.append(memoryview(array.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
        offset += array.nbytes
    header = json.dumps({"form": FORM_VERSION, "folded_nodes": [list(pair) for pair in folded_nodes],
                         "inputs": list(input_names), "outputs": list(output_names),
                         "model_bytes": len(proto), "torch_artifact_bytes": len(artifacts),
                         "weights": table}).encode()
    return b"".join([_MAGIC, len(header).to_bytes(8, "little"), header, *parts])  # one copy of the weights


def unpack(blob: bytes) -> CachedForm:
    """A cached form from :func:`pack`'s bytes; raise ValueError saying what is wrong with them."""
    data = memoryview(blob)
    if not blob.startswith(_MAGIC):
        raise ValueError("it is not a GPU program's cached form")
    at = len(_MAGIC) + 8
    size = int.from_bytes(data[len(_MAGIC):at], "little")
    header = json.loads(bytes(data[at:at + size]))
    if header.get("form") != FORM_VERSION:
        raise ValueError(f"its form is version {header.get('form')}, this version reads {FORM_VERSION}")
    body = data[at + size:]
    proto_size, artifact_size = int(header["model_bytes"]), int(header["torch_artifact_bytes"])
    model = ir.serde.deserialize_model(onnx.ModelProto.FromString(bytes(body[:proto_size])))
    graph = model.graph
    table = header["weights"]
    if len(graph.inputs) < len(table):
        raise ValueError("its model declares fewer inputs than it has weights")
    for record in reversed(table):
        value = graph.inputs.pop()
        if value.name != record["name"]:
            raise ValueError(f"weight {record['name']!r} is not where its model declares it")
        dtype = ir.DataType(int(record["dtype"]))
        start, count = int(record["offset"]), int(record["bytes"])
        if start + count > len(body):
            raise ValueError(f"weight {record['name']!r} lies past its end")
        array = np.frombuffer(body[start:start + count], dtype=dtype.numpy()).reshape(record["shape"])
        value.const_value = ir.Tensor(array, dtype=dtype, name=value.name)
        graph.register_initializer(value)
    artifacts = bytes(body[proto_size:proto_size + artifact_size]) if artifact_size else None
    return CachedForm(model, tuple((str(n), str(op)) for n, op in header["folded_nodes"]),
                      tuple(header["inputs"]), tuple(header["outputs"]), artifacts)


# --- torch.compile's artefacts -----------------------------------------------------------


@contextlib.contextmanager
def recording_torch_artifacts() -> Iterator[Callable[[], bytes | None]]:
    """Within it, compile (run) a ``torch.compile`` module; the function it gives returns torch's
    artefacts of that compile (``torch.compiler.save_cache_artifacts``), None where there are none.

    Where torch offers it (``CacheArtifactManager.with_fresh_cache``, torch 2.7 and later), the
    recording is scoped: the bytes hold this compile's artefacts only, and the process-wide list
    that the user's own ``save_cache_artifacts`` reads is left as it was.  Elsewhere the bytes
    hold every artefact the process recorded so far.
    """
    import torch

    def save() -> bytes | None:
        saved = torch.compiler.save_cache_artifacts()
        return None if saved is None else bytes(saved[0])

    try:
        from torch.compiler._cache import CacheArtifactManager

        scope: contextlib.AbstractContextManager[Any] = CacheArtifactManager.with_fresh_cache()
    except (ImportError, AttributeError):
        scope = contextlib.nullcontext()
    with scope:
        yield save


def load_torch_artifacts(blob: bytes) -> bool:
    """Hand torch's artefacts to its caches (``torch.compiler.load_cache_artifacts``) before the
    program compiles; whether torch took them.  Only for bytes of a checked cache entry: they
    hold pickles."""
    import torch

    return torch.compiler.load_cache_artifacts(blob) is not None
