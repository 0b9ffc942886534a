"""HETERO and PIPELINE_PARALLEL see the shapes of ONNX Runtime's contrib ops.

The placement code sizes tensors (bytes crossing between devices, activations per
pipeline stage) from the types and shapes its annotated copy of the model carries.
ONNX's shape inference knows no ``com.microsoft`` op (nor the two normalizations
ONNX Runtime registers in the ONNX domain), so these models are checked against
ONNX Runtime itself: every value of the annotated copy against the arrays ONNX
Runtime computes with every value made an output, and a pipeline over two
emulated GPUs, whose plan must count the bytes of those arrays and whose outputs
must be ONNX Runtime's (with a CUDA-only op written as standard ops for its CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.placement.graph import annotate

from conftest import ort_run

MS = "com.microsoft"
F, I32 = TensorProto.FLOAT, TensorProto.INT32
RNG = np.random.default_rng(5)


def _floats(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


class _Builder:
    """Nodes and weights of a small model, with unique node names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def weight(self, name: str, array: np.ndarray) -> str:
        self.weights.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: Any) -> None:
        name = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))

    def norm(self, x: str, out: str) -> None:
        """SimplifiedLayerNormalization (RMSNorm), which ONNX Runtime registers in the ONNX domain."""
        self.op("SimplifiedLayerNormalization", [x, self.weight(f"{out}_g", _floats(16))], [out],
                axis=-1, epsilon=1e-5)

    def nbits(self, x: str, out: str, k: int, n: int) -> None:
        """MatMulNBits of 4-bit weights, blocks of 16 along K."""
        packed = self.weight(f"{out}_w", RNG.integers(0, 256, (n, k // 16, 8)).astype(np.uint8))
        scales = self.weight(f"{out}_s", np.full(n * (k // 16), 0.02, np.float32))
        self.op("MatMulNBits", [x, packed, scales], [out], MS, K=k, N=n, bits=4, block_size=16)

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[str]) -> onnx.ModelProto:
        """Outputs declared with their type only, as exporters often write them."""
        graph = helper.make_graph(self.nodes, "contrib", inputs,
                                  [helper.make_tensor_value_info(n, F, None) for n in outputs], self.weights)
        imports = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
        proto = helper.make_model(graph, opset_imports=imports)
        proto.ir_version = 10
        return proto


def _decoder_layers(layers: int, dims: list[Any], bias_add: bool = False) -> onnx.ModelProto:
    """An int4 LLM's MLP blocks: RMSNorm, MatMulNBits up (16 -> 64), Relu, MatMulNBits down, residual.

    ``bias_add``: the residual adds a bias too, as ONNX Runtime's BiasAdd (``x + bias + skip``), an
    op its CPU provider lacks (so ONNX Runtime cannot even type such a model on the CPU)."""
    b = _Builder()
    x = "x"
    for i in range(layers):
        b.norm(x, f"n{i}")
        b.nbits(f"n{i}", f"u{i}", 16, 64)
        b.op("Relu", [f"u{i}"], [f"r{i}"])
        b.nbits(f"r{i}", f"d{i}", 64, 16)
        if bias_add:
            b.op("BiasAdd", [f"d{i}", b.weight(f"b{i}", _floats(16)), x], [f"h{i}"], MS)
        else:
            b.op("Add", [f"d{i}", x], [f"h{i}"])
        x = f"h{i}"
    return b.model([helper.make_tensor_value_info("x", F, dims)], [x])


def _without_bias_add(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with each BiasAdd written as two Adds (same output names): what ONNX Runtime's CPU runs."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    nodes = []
    for node in copy.graph.node:
        if node.op_type != "BiasAdd":
            nodes.append(node)
            continue
        x, bias, skip = node.input
        nodes += [helper.make_node("Add", [x, bias], [f"{node.name}_biased"], name=f"{node.name}_bias"),
                  helper.make_node("Add", [f"{node.name}_biased", skip], list(node.output), name=node.name)]
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def _gqa_decoder() -> tuple[onnx.ModelProto, dict[str, int], dict[str, np.ndarray]]:
    """A decode step of an int4 LLM layer: RMSNorm, packed QKV by MatMulNBits, GroupQueryAttention
    (2 query heads over 1 K/V head of 8), output projection, residual."""
    b = _Builder()
    b.norm("x", "n")
    b.nbits("n", "qkv", 16, 32)
    names = ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    b.op("GroupQueryAttention", names, ["attn", "present_key", "present_value"], MS,
         num_heads=2, kv_num_heads=1)
    b.nbits("attn", "o", 16, 16)
    b.op("Add", ["o", "x"], ["y"])
    inputs = [helper.make_tensor_value_info("x", F, ["batch", "seq", 16]),
              helper.make_tensor_value_info("past_key", F, ["batch", 1, "past", 8]),
              helper.make_tensor_value_info("past_value", F, ["batch", 1, "past", 8]),
              helper.make_tensor_value_info("seqlens_k", I32, ["batch"]),
              helper.make_tensor_value_info("total_sequence_length", I32, [])]
    feeds = {"x": _floats(2, 1, 16), "past_key": _floats(2, 1, 4, 8), "past_value": _floats(2, 1, 4, 8),
             "seqlens_k": np.full(2, 4, np.int32), "total_sequence_length": np.asarray(5, np.int32)}
    return b.model(inputs, ["y", "present_key", "present_value"]), {"batch": 2, "seq": 1, "past": 4}, feeds


def _bert_layer() -> tuple[onnx.ModelProto, dict[str, int], dict[str, np.ndarray]]:
    """An encoder layer as ONNX Runtime's transformer optimizer writes it: Attention,
    SkipLayerNormalization, MatMul, FastGelu, MatMul, SkipLayerNormalization."""
    b = _Builder()
    b.op("Attention", ["x", b.weight("qkv_w", _floats(16, 48, scale=0.3)), b.weight("qkv_b", _floats(48))],
         ["attn"], MS, num_heads=2)
    gamma, beta = b.weight("gamma", _floats(16)), b.weight("beta", _floats(16))
    b.op("SkipLayerNormalization", ["attn", "x", gamma, beta], ["s1"], MS, epsilon=1e-5)
    b.op("MatMul", ["s1", b.weight("up", _floats(16, 32, scale=0.3))], ["m1"])
    b.op("FastGelu", ["m1", b.weight("up_b", _floats(32))], ["g"], MS)
    b.op("MatMul", ["g", b.weight("down", _floats(32, 16, scale=0.3))], ["m2"])
    b.op("SkipLayerNormalization", ["m2", "s1", gamma, beta], ["y"], MS, epsilon=1e-5)
    model = b.model([helper.make_tensor_value_info("x", F, ["batch", "seq", 16])], ["y"])
    return model, {"batch": 3, "seq": 5}, {"x": _floats(3, 5, 16)}


def _decoder_case() -> tuple[onnx.ModelProto, dict[str, int], dict[str, np.ndarray]]:
    return _decoder_layers(2, ["batch", "seq", 16]), {"batch": 3, "seq": 4}, {"x": _floats(3, 4, 16)}


CASES: dict[str, Callable[[], tuple[onnx.ModelProto, dict[str, int], dict[str, np.ndarray]]]] = {
    "MatMulNBits-decoder": _decoder_case,
    "GroupQueryAttention-decoder": _gqa_decoder,
    "optimized-BERT-layer": _bert_layer,
}
"""Model, the sizes of its symbolic input dims, and feeds of those sizes."""


def _every_value(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX Runtime's arrays of every node output (each made a model output)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    declared = {o.name for o in probe.graph.output}
    names = [o for n in probe.graph.node for o in n.output if o]
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in declared)
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [o.name for o in session.get_outputs()]
    return dict(zip(wanted, session.run(wanted, dict(feeds)), strict=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_annotated_values_have_the_types_and_shapes_onnx_runtime_computes(name: str) -> None:
    proto, dims, feeds = CASES[name]()
    model = ir.serde.deserialize_model(proto)
    annotated = annotate(model, fixed_dims=dims)
    expected = _every_value(proto, feeds)
    values = {v.name: v for n in annotated.graph for v in n.outputs}
    assert set(expected) <= set(values)
    for value_name, array in expected.items():
        value = values[value_name]
        assert value.dtype == ir.DataType.from_numpy(array.dtype), value_name
        assert value.shape is not None and len(value.shape) == array.ndim, value_name
        # GroupQueryAttention's caches grow to max(total_sequence_length, past): a run-time value.
        runtime = value_name.startswith("present_")
        if not runtime:
            assert tuple(value.shape) == array.shape, value_name
        else:
            assert all(d == s for d, s in zip(value.shape, array.shape, strict=True) if isinstance(d, int))
    # The model itself is left as it was: its node outputs keep no inferred shape.
    assert all(v.shape is None for n in model.graph for v in n.outputs)


def test_annotation_without_fixed_dims_keeps_symbolic_dims_through_contrib_ops() -> None:
    annotated = annotate(ir.serde.deserialize_model(_decoder_layers(2, ["batch", "seq", 16])))
    shapes = {v.name: [str(d) for d in v.shape] for n in annotated.graph for v in n.outputs if v.shape}
    assert shapes["u1"] == ["batch", "seq", "64"]
    assert shapes["h1"] == ["batch", "seq", "16"]


def test_pipeline_over_emulated_gpus_counts_the_bytes_of_contrib_outputs(emulated_core: ov.Core) -> None:
    proto = _decoder_layers(4, [2, 3, 16], bias_add=True)
    reference = _without_bias_add(proto)
    feeds = {"x": _floats(2, 3, 16)}
    limit = 9000  # the whole model (weights 6.2 KiB, activations 3.4 KiB) fits neither device
    config = {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL",
              "DEVICE_PROPERTIES": {"GPU": {"MEMORY_LIMIT": limit}}}
    compiled = emulated_core.compile_model(emulated_core.read_model(proto), "HETERO:GPU.0,GPU.1", config)
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["GPU.0", "GPU.1"]
    arrays = _every_value(reference, feeds)
    crossing = [t for t in plan.transfers if t.crosses_devices]
    assert crossing
    for transfer in crossing:
        assert transfer.nbytes == arrays[transfer.value].nbytes, transfer.value
    for sub, stage in zip(plan.subgraphs, compiled.get_property("PIPELINE_STAGES"), strict=True):
        outputs = [o for node in proto.graph.node if node.name in sub.nodes for o in node.output]
        # every output is live when its op has run
        assert stage.activation_bytes >= max(arrays[o].nbytes for o in outputs)
    (name,) = [o.name for o in proto.graph.output]
    np.testing.assert_allclose(compiled(feeds)[name], ort_run(reference, feeds)[0], rtol=1e-4, atol=1e-4)
