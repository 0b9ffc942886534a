"""Shapes of models with ONNX Runtime's contrib ops (``com.microsoft``, and its two ONNX-domain
normalizations), before and after ``Model.reshape``, on the model and on the compiled model.

ONNX's shape inference knows none of these ops; inferplex gives their outputs (and everything
downstream) the shapes ONNX Runtime computes.  Each case is a small model with symbolic input dims:
it is read, reshaped to new static dims, saved, and run by ONNX Runtime (CPU) on inputs of those
dims; every output's ``partial_shape`` and element type must be what ONNX Runtime returned.  The two
ops ONNX Runtime runs only on CUDA (BiasAdd, BiasSoftmax) are checked against the arrays the
emulated GPU computes instead.  BERT and GPT-2 models that ONNX Runtime's transformer optimizer
wrote (the fixtures of ``test_gpu_contrib_models.py``) are checked value by value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_gpu_contrib_models import (  # noqa: F401  (fixtures: optimized BERT and GPT-2 models)
    _text_feeds,
    bert,
    bert_export,
    bert_mha,
    gpt2,
    gpt2_module,
    gpt2_opset14,
)

import inferplex as ov
from inferplex.errors import InputError

MS = "com.microsoft"
F, I32, I64, U8 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8
RNG = np.random.default_rng(11)


@dataclass(frozen=True)
class Case:
    """A model whose inputs have symbolic dims, the feeds of the dims it is reshaped to, the outputs
    whose dims are run-time values (dynamic even after a reshape), whether ONNX Runtime's CPU
    runs it (else the emulated GPU's results are the reference) and the devices that compile it."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    runtime_dims: frozenset[str] = field(default_factory=frozenset)
    on_ort_cpu: bool = True
    devices: tuple[str, ...] = ("CPU", "GPU.0")


def _model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, int, Sequence[Any]]],
           outputs: Sequence[tuple[str, int]], weights: dict[str, np.ndarray] | None = None,
           opset: int = 17) -> onnx.ModelProto:
    """The nodes, then ``after = Mul(first output, first output)`` (a standard op downstream of the
    contrib op); outputs declared with their type only, as exporters often write them."""
    first, kind = outputs[0]
    nodes = [*nodes, helper.make_node("Mul", [first, first], ["after"], name="downstream")]
    graph = helper.make_graph(
        nodes, "contrib_shapes", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in [*outputs, ("after", kind)]],
        [numpy_helper.from_array(a, n) for n, a in (weights or {}).items()])
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 10
    return model


def _ms(op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=op.lower(), domain=MS, **attrs)


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


X = ("x", F, ["batch", "seq", 8])
"""The usual activation input: (batch, seq, hidden 8), reshaped to (3, 5, 8)."""


def _activation(op: str, bias: bool = False, **attrs: Any) -> Case:
    names = ["x", "bias"] if bias else ["x"]
    weights = {"bias": _floats(8)} if bias else {}
    return Case(_model([_ms(op, names, ["y"], **attrs)], [X], [("y", F)], weights), {"x": _floats(3, 5, 8)})


def _skip_norm(op: str, opset: int = 17) -> Case:
    names = ["x", "skip", "gamma", "beta", "bias"]
    weights = {"gamma": _floats(8), "beta": _floats(8), "bias": _floats(8)}
    if op != "SkipLayerNormalization":  # no beta
        names.remove("beta")
        del weights["beta"]
    node = _ms(op, names, ["y", "mean", "inv_std", "sum"], epsilon=1e-5)
    model = _model([node], [X, ("skip", F, ["batch", "seq", 8])],
                   [("y", F), ("mean", F), ("inv_std", F), ("sum", F)], weights, opset)
    return Case(model, {"x": _floats(3, 5, 8), "skip": _floats(3, 5, 8)})


def _layer_norm(op: str, axis: int, opset: int = 17) -> Case:
    """ONNX-domain normalization over the dims from ``axis`` of (batch, 3, 8)."""
    scale_shape = (3, 8) if axis % 3 == 1 else (8,)
    stats = ["mean", "inv_std"] if op == "LayerNormalization" else ["inv_std"]
    weights = {"scale": _floats(*scale_shape)}
    names = ["x", "scale"]
    if op == "LayerNormalization":
        weights["bias"] = _floats(*scale_shape)
        names.append("bias")
    node = helper.make_node(op, names, ["y", *stats], name="norm", axis=axis, epsilon=1e-5)
    model = _model([node], [("x", F, ["batch", 3, 8])], [("y", F), *[(s, F) for s in stats]], weights, opset)
    return Case(model, {"x": _floats(4, 3, 8)})


def _embed_layer_norm(opset: int = 17) -> Case:
    names = ["ids", "segments", "word", "position", "segment", "gamma", "beta", "mask"]
    weights = {"word": _floats(10, 8), "position": _floats(16, 8), "segment": _floats(2, 8),
               "gamma": _floats(8), "beta": _floats(8)}
    inputs = [(n, I32, ["batch", "seq"]) for n in ("ids", "segments", "mask")]
    model = _model([_ms("EmbedLayerNormalization", names, ["y", "mask_index", "sum"], epsilon=1e-5)], inputs,
                   [("y", F), ("mask_index", I32), ("sum", F)], weights, opset)
    feeds = {"ids": RNG.integers(0, 10, (3, 5)).astype(np.int32),
             "segments": RNG.integers(0, 2, (3, 5)).astype(np.int32), "mask": np.ones((3, 5), np.int32)}
    return Case(model, feeds)


def _attention(past: bool, sizes: Sequence[int] | None = None) -> Case:
    """Attention of 2 heads over (batch, seq, 8), with a past (2, batch, 2, past, 4) or with
    ``qkv_hidden_sizes``."""
    width = sum(sizes) if sizes else 24
    attrs: dict[str, Any] = {"num_heads": 2, **({"qkv_hidden_sizes": list(sizes)} if sizes else {})}
    names = ["x", "w", "b", "", "past"] if past else ["x", "w", "b"]
    inputs = [X, ("past", F, [2, "batch", 2, "past", 4])] if past else [X]
    model = _model([_ms("Attention", names, ["y", "present"], **attrs)], inputs, [("y", F), ("present", F)],
                   {"w": _floats(8, width) * 0.3, "b": _floats(width)})
    feeds = {"x": _floats(3, 5, 8), **({"past": _floats(2, 3, 2, 4, 4)} if past else {})}
    return Case(model, feeds)


def _multi_head_attention(shared: bool = False) -> Case:
    """MultiHeadAttention of 2 heads with past key/value (B, 2, past, 4); ``shared``: with a
    past_sequence_length, the form whose present caches are the past buffers (of the longest length)."""
    names = ["q", "k", "v", "", "", "", "past_key", "past_value"] + (["past_length"] if shared else [])
    inputs = [("q", F, ["batch", "seq", 8]), ("k", F, ["batch", "kv", 8]), ("v", F, ["batch", "kv", 8]),
              ("past_key", F, ["batch", 2, "past", 4]), ("past_value", F, ["batch", 2, "past", 4])]
    if shared:
        inputs.append(("past_length", I32, [1]))
    model = _model([_ms("MultiHeadAttention", names, ["y", "present_key", "present_value"], num_heads=2)],
                   inputs, [("y", F), ("present_key", F), ("present_value", F)])
    new = 1 if shared else 6  # a decode step writes one position into the shared buffer
    feeds = {"q": _floats(3, new, 8), "k": _floats(3, new, 8), "v": _floats(3, new, 8),
             "past_key": _floats(3, 2, 9, 4), "past_value": _floats(3, 2, 9, 4)}
    if shared:
        feeds["past_length"] = np.asarray([4], np.int32)
    return Case(model, feeds, devices=("CPU",) if shared else ("CPU", "GPU.0"))


def _cross_attention() -> Case:
    """MultiHeadAttention over key and value given as (B, N, L, H) heads (a cross-attention cache)."""
    inputs = [("q", F, ["batch", "seq", 8]), ("k", F, ["batch", 2, "kv", 4]), ("v", F, ["batch", 2, "kv", 4])]
    model = _model([_ms("MultiHeadAttention", ["q", "k", "v"], ["y", "present_key", "present_value"],
                        num_heads=2)], inputs, [("y", F), ("present_key", F), ("present_value", F)])
    feeds = {"q": _floats(3, 5, 8), "k": _floats(3, 2, 6, 4), "v": _floats(3, 2, 6, 4)}
    return Case(model, feeds, devices=("CPU",))


def _group_query_attention() -> Case:
    """A decode step of packed Q/K/V, 4 query heads over 2 K/V heads of 8 features: the caches'
    length is max(total_sequence_length, past), a run-time value."""
    names = ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    inputs = [("qkv", F, ["batch", "seq", 64]), ("past_key", F, ["batch", 2, "past", 8]),
              ("past_value", F, ["batch", 2, "past", 8]), ("seqlens_k", I32, ["batch"]),
              ("total_sequence_length", I32, [])]
    node = _ms("GroupQueryAttention", names, ["y", "present_key", "present_value"], num_heads=4,
               kv_num_heads=2)
    model = _model([node], inputs, [("y", F), ("present_key", F), ("present_value", F)])
    feeds = {"qkv": _floats(2, 1, 64), "past_key": _floats(2, 2, 4, 8), "past_value": _floats(2, 2, 4, 8),
             "seqlens_k": np.full(2, 4, np.int32), "total_sequence_length": np.asarray(5, np.int32)}
    return Case(model, feeds, frozenset({"present_key", "present_value"}))


def _rotary_embedding() -> Case:
    inputs = [X, ("position_ids", I64, ["batch", "seq"])]
    model = _model([_ms("RotaryEmbedding", ["x", "position_ids", "cos", "sin"], ["y"])], inputs, [("y", F)],
                   {"cos": _floats(16, 4), "sin": _floats(16, 4)})
    return Case(model, {"x": _floats(3, 5, 8), "position_ids": np.tile(np.arange(5, dtype=np.int64), (3, 1))})


def _fused_matmul() -> Case:
    """(batch, 4, m) with transA times (4, batch, 6) with transBatchB: (batch, m, 6)."""
    node = _ms("FusedMatMul", ["a", "b"], ["y"], transA=1, transBatchB=1, alpha=0.5)
    model = _model([node], [("a", F, ["batch", 4, "m"]), ("b", F, [4, "batch", 6])], [("y", F)])
    return Case(model, {"a": _floats(3, 4, 5), "b": _floats(4, 3, 6)})


def _fused_gemm() -> Case:
    node = _ms("FusedGemm", ["a", "b", "c"], ["y"], transB=1, activation="Relu")
    model = _model([node], [("a", F, ["n", 8])], [("y", F)], {"b": _floats(6, 8), "c": _floats(6)})
    return Case(model, {"a": _floats(5, 8)})


def _fused_conv() -> Case:
    node = _ms("FusedConv", ["x", "w", "b"], ["y"], activation="Relu", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    weights = {"w": _floats(4, 2, 3, 3), "b": _floats(4)}
    model = _model([node], [("x", F, ["n", 2, "h", "w"])], [("y", F)], weights)
    return Case(model, {"x": _floats(2, 2, 6, 7)})


def _matmul_nbits() -> Case:
    """4-bit weights of K=16 by N=8 in one block per column."""
    weights = {"packed": RNG.integers(0, 256, (8, 1, 8)).astype(np.uint8),
               "scales": np.full(8, 0.1, np.float32)}
    node = _ms("MatMulNBits", ["a", "packed", "scales"], ["y"], K=16, N=8, bits=4, block_size=16)
    model = _model([node], [("a", F, ["batch", "seq", 16])], [("y", F)], weights)
    return Case(model, {"a": _floats(3, 5, 16)})


def _qlinear_add() -> Case:
    weights = {"b": RNG.integers(0, 256, 8).astype(np.uint8), "s": np.asarray(0.05, np.float32),
               "z": np.asarray(128, np.uint8)}
    node = _ms("QLinearAdd", ["a", "s", "z", "b", "s", "z", "s", "z"], ["y"])
    model = _model([node], [("a", U8, ["n", 8])], [("y", U8)], weights)
    return Case(model, {"a": RNG.integers(0, 256, (6, 8)).astype(np.uint8)})


def _bias_add() -> Case:
    model = _model([_ms("BiasAdd", ["x", "bias", "skip"], ["y"])], [X, ("skip", F, ["batch", "seq", 8])],
                   [("y", F)], {"bias": _floats(8)})
    return Case(model, {"x": _floats(3, 5, 8), "skip": _floats(3, 5, 8)}, on_ort_cpu=False)


def _bias_softmax() -> Case:
    node = _ms("BiasSoftmax", ["x", "bias"], ["y"], axis=-1, is_inner_broadcast=0)
    model = _model([node], [("x", F, ["batch", 4, 6])], [("y", F)], {"bias": _floats(4, 6)})
    return Case(model, {"x": _floats(3, 4, 6)}, on_ort_cpu=False, devices=("GPU.0",))


CASES = {
    "Gelu": lambda: _activation("Gelu"),
    "FastGelu": lambda: _activation("FastGelu", bias=True),
    "BiasGelu": lambda: _activation("BiasGelu", bias=True),
    "QuickGelu": lambda: _activation("QuickGelu", alpha=1.5),
    "SkipLayerNormalization": lambda: _skip_norm("SkipLayerNormalization"),
    "SkipLayerNormalization-opset12": lambda: _skip_norm("SkipLayerNormalization", opset=12),
    "SkipSimplifiedLayerNormalization-opset18":
        lambda: _skip_norm("SkipSimplifiedLayerNormalization", opset=18),
    "SimplifiedLayerNormalization-last": lambda: _layer_norm("SimplifiedLayerNormalization", -1),
    "SimplifiedLayerNormalization-axis1": lambda: _layer_norm("SimplifiedLayerNormalization", 1),
    "LayerNormalization-opset16": lambda: _layer_norm("LayerNormalization", 1, opset=16),
    "EmbedLayerNormalization": _embed_layer_norm,
    "EmbedLayerNormalization-opset18": lambda: _embed_layer_norm(opset=18),
    "Attention-past": lambda: _attention(past=True),
    "Attention-sizes": lambda: _attention(past=False, sizes=(8, 8, 4)),
    "MultiHeadAttention": _multi_head_attention,
    "MultiHeadAttention-shared-buffer": lambda: _multi_head_attention(shared=True),
    "MultiHeadAttention-cross": _cross_attention,
    "GroupQueryAttention": _group_query_attention,
    "RotaryEmbedding": _rotary_embedding,
    "FusedMatMul": _fused_matmul,
    "FusedGemm": _fused_gemm,
    "FusedConv": _fused_conv,
    "MatMulNBits": _matmul_nbits,
    "QLinearAdd": _qlinear_add,
    "BiasAdd": _bias_add,
    "BiasSoftmax": _bias_softmax,
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: Any) -> Case:
    return CASES[request.param]()


def _reshaped(core: ov.Core, case: Case) -> ov.Model:
    model = core.read_model(case.model)
    model.reshape({name: list(array.shape) for name, array in case.feeds.items()})
    return model


def _reference(core: ov.Core, case: Case, model: ov.Model, tmp_path: Path) -> list[np.ndarray]:
    """The outputs ONNX Runtime's CPU computes on the saved reshaped model (else the emulated GPU's)."""
    if not case.on_ort_cpu:
        results = core.compile_model(model, "GPU.0")(case.feeds)
        return [np.asarray(results[i]) for i in range(len(model.outputs))]
    path = tmp_path / "reshaped.onnx"
    ov.save_model(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, case.feeds)


def _check_ports(ports: Sequence[Any], expected: Sequence[np.ndarray], runtime_dims: frozenset[str]) -> None:
    """Each port's element type and shape are the array's (dims that are run-time values: dynamic,
    the rest equal)."""
    assert len(ports) == len(expected)
    for port, array in zip(ports, expected, strict=True):
        name = port.get_any_name()
        assert port.get_element_type() == ov.Type(array.dtype), name
        shape = port.get_partial_shape()
        if name in runtime_dims:
            assert shape.rank.get_length() == array.ndim, (name, shape, array.shape)
            assert shape.compatible(ov.PartialShape(list(array.shape))) and shape.is_dynamic, (name, shape)
        else:
            assert shape == ov.PartialShape(list(array.shape)), (name, shape, array.shape)


def test_read_model_gives_contrib_outputs_their_rank(case: Case, emulated_core: ov.Core,
                                                     tmp_path: Path) -> None:
    """Before any reshape, every output (downstream ones included) has the rank ONNX Runtime's
    results have, and its element type."""
    model = emulated_core.read_model(case.model)
    expected = _reference(emulated_core, case, _reshaped(emulated_core, case), tmp_path)
    for port, array in zip(model.outputs, expected, strict=True):
        assert port.get_partial_shape().rank.get_length() == array.ndim, port.get_any_name()
        assert port.get_element_type() == ov.Type(array.dtype), port.get_any_name()


@pytest.mark.parametrize("where", ["model", "CPU", "GPU.0"])
def test_reshape_gives_every_output_the_shape_onnx_runtime_computes(case: Case, where: str,
                                                                     emulated_core: ov.Core,
                                                                     tmp_path: Path) -> None:
    if where != "model" and where not in case.devices:
        pytest.skip(f"{where} does not run this form of the op")
    model = _reshaped(emulated_core, case)
    expected = _reference(emulated_core, case, model, tmp_path)
    ports = model.outputs if where == "model" else emulated_core.compile_model(model, where).outputs
    _check_ports(ports, expected, case.runtime_dims)


@pytest.mark.parametrize("packed", ["kv", "qkv"])
def test_packed_multi_head_attention_has_the_shapes_of_onnx_runtime_spec(packed: str) -> None:
    """The packed forms only ONNX Runtime's CUDA kernels run (no reference to run here): key (B, L, N,
    2, H) or query (B, S, N, 3, H) give an output of (B, S, N * H) and caches of (B, N, L, H), as
    ONNX Runtime's operator spec states."""
    if packed == "kv":
        names, inputs = ["q", "kv"], [("q", F, ["batch", "seq", 8]), ("kv", F, ["batch", "kv", 2, 2, 4])]
    else:
        names, inputs = ["qkv"], [("qkv", F, ["batch", "seq", 2, 3, 4])]
    outputs = [("y", F), ("present_key", F), ("present_value", F)]
    model = ov.Core().read_model(_model([_ms("MultiHeadAttention", names, [n for n, _ in outputs],
                                             num_heads=2)], inputs, outputs))
    model.reshape({"q": [3, 5, 8], "kv": [3, 6, 2, 2, 4]} if packed == "kv" else {"qkv": [3, 5, 2, 3, 4]})
    length = 6 if packed == "kv" else 5
    assert [port.get_partial_shape() for port in model.outputs] == [
        ov.PartialShape([3, 5, 8]), ov.PartialShape([3, 2, length, 4]), ov.PartialShape([3, 2, length, 4]),
        ov.PartialShape([3, 5, 8])]


def test_shapes_a_contrib_op_cannot_take_are_refused_by_reshape() -> None:
    """The twins bring the ops' own checks: a Gemm of (n, 7) by a (6, 8) weight is no product."""
    model = ov.Core().read_model(_fused_gemm().model)
    before = model.output(0).get_partial_shape()
    with pytest.raises(InputError, match=r"input 'a' \[5,7\]"):
        model.reshape({"a": [5, 7]})
    assert model.output(0).get_partial_shape() == before


def test_set_batch_on_an_input_of_unknown_rank_says_how_to_give_it_one() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["pixels"], ["y"])], "unranked",
                              [helper.make_tensor_value_info("pixels", F, None)],
                              [helper.make_tensor_value_info("y", F, None)])
    model = ov.Core().read_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    for layout in (None, "NCHW"):
        if layout:
            model.get_parameters()[0].set_layout(layout)
        with pytest.raises(InputError, match=r"'pixels'.*unknown rank.*model\.reshape") as error:
            ov.set_batch(model, 2)
        assert "set_layout" in str(error.value)
    model.reshape({"pixels": "?,?,?,?"})  # the fix the message names: a rank, then the layout
    model.get_parameters()[0].set_layout("NCHW")
    ov.set_batch(model, 2)
    assert model.input(0).get_partial_shape() == ov.PartialShape("2,?,?,?")


# --- models ONNX Runtime's transformer optimizer wrote ----------------------------------------------


@pytest.mark.parametrize(("name", "length"), [("bert", 5), ("bert_mha", 5), ("gpt2", 8), ("gpt2_opset14", 8)])
def test_every_value_of_a_reshaped_optimized_transformer_has_onnx_runtime_shape(
        name: str, length: int, request: Any, tmp_path: Path) -> None:
    """BERT and GPT-2 after ``optimize_model`` (Attention or MultiHeadAttention, EmbedLayerNormalization,
    SkipLayerNormalization, BiasGelu or FastGelu), reshaped to a batch of 2 and ``length`` tokens (the
    GPT-2 export holds its traced length in constants): every value of the graph, made an output,
    has the type ONNX Runtime computes and a shape that holds its result; the contrib ops' outputs
    and the model's output have exactly the result's shape (ONNX's inference leaves some standard
    ops' shapes open: a Range of computed bounds)."""
    proto: onnx.ModelProto = request.getfixturevalue(name)
    model = ov.Core().read_model(proto)
    feeds = {key: array[:2, :length] for key, array in
             _text_feeds([value.name for value in proto.graph.input], 5).items()}
    model.reshape({key: list(array.shape) for key, array in feeds.items()})
    model.add_outputs([out for node in proto.graph.node for out in node.output if out])
    exact = {proto.graph.output[0].name} | {out for node in proto.graph.node if node.domain == MS
                                            for out in node.output if out}
    expected = _reference(ov.Core(), Case(proto, feeds), model, tmp_path)
    assert len(model.outputs) == len(expected)
    for port, array in zip(model.outputs, expected, strict=True):
        name, shape = port.get_any_name(), port.get_partial_shape()
        assert port.get_element_type() == ov.Type(array.dtype), name
        assert shape.compatible(ov.PartialShape(list(array.shape))), (name, shape, array.shape)
        assert name not in exact or shape == ov.PartialShape(list(array.shape)), (name, shape, array.shape)
