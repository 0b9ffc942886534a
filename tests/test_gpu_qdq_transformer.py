"""Quantized transformer encoders on the GPU device, through the public API, against ONNX Runtime.

A small post-norm encoder (self-attention, residual Adds, LayerNormalization, a GELU feed-forward)
goes through ``quantize_static`` (QDQ format) and ``quantize_dynamic``, as users quantize BERT-style
models.  The static model's tensors read by several consumers share one QuantizeLinear, and
``quantize_static`` puts a QuantizeLinear -> DequantizeLinear pair after each Reshape, Transpose,
Squeeze and Split: the GPU device runs those pairs as one fake-quantize call each, or none where
the data-movement op's input already holds the same grid, and the int8 matmuls quantize their
inputs themselves.  The references are ONNX Runtime running each op as written; a value within
float32 rounding of a quantization step's half may land one step away, so the comparisons allow
a few steps where the model requantizes, and check that almost every value agrees.  The dynamic
model is quantized with ``reduce_range`` (see ``test_gpu_qdq.py``).  On CUDA the int8 matmuls,
quantizers and fake-quantize passes run as Triton kernels, on emulated GPUs as ATen ops.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest
from quantized_models import PROFILED, ort_unfused, profiled, quantized
from torch_export import export_onnx

import inferplex as ov

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
nn = torch.nn

_HIDDEN, _HEADS, _LENGTH, _BATCH = 64, 4, 16, 4


class _Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(_HIDDEN, 3 * _HIDDEN), nn.Linear(_HIDDEN, _HIDDEN)
        self.up, self.down = nn.Linear(_HIDDEN, 4 * _HIDDEN), nn.Linear(4 * _HIDDEN, _HIDDEN)
        self.norm1, self.norm2 = nn.LayerNorm(_HIDDEN), nn.LayerNorm(_HIDDEN)

    def forward(self, x: Any) -> Any:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, _HEADS, -1).permute(2, 0, 3, 1, 4).unbind(0)
        weights = torch.softmax(q @ k.transpose(-1, -2) / (_HIDDEN // _HEADS) ** 0.5, dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(batch, length, _HIDDEN)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))


def _encoder() -> onnx.ModelProto:
    torch.manual_seed(21)
    return export_onnx(nn.Sequential(_Layer(), _Layer()), (torch.randn(_BATCH, _LENGTH, _HIDDEN),), ["x"],
                       opset=17)


def _feeds(seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((_BATCH, _LENGTH, _HIDDEN)).astype(np.float32)}


@pytest.fixture(scope="module")
def static_model(tmp_path_factory: Any) -> onnx.ModelProto:
    return quantized(tmp_path_factory.mktemp("static"), _encoder(), True, per_channel=True)


@pytest.fixture(scope="module")
def dynamic_model(tmp_path_factory: Any) -> onnx.ModelProto:
    return quantized(tmp_path_factory.mktemp("dynamic"), _encoder(), False, reduce_range=True)


@pytest.fixture
def core(emulated_or_cuda_core: ov.Core) -> ov.Core:
    return emulated_or_cuda_core


def _close(got: np.ndarray, want: np.ndarray, atol: float, agree: float) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    assert np.mean(np.abs(got - want) <= 1e-4) >= agree, np.abs(got - want).max()


def _matches_onnx_runtime(core: ov.Core, model: onnx.ModelProto, seed: int
                          ) -> tuple[Counter[str], Counter[str], dict[str, str]]:
    """Run a static QDQ model on GPU.0 against ONNX Runtime (LayerNormalization's output: a step of
    a requantized value moves it by about a hundredth); the model's op counts, the op types that
    ran, and the profile's records."""
    feeds = _feeds(seed)
    got, records = profiled(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    _close(got, want, atol=0.1, agree=0.97)
    return Counter(n.op_type for n in model.graph.node), Counter(records.values()), records


def test_static_qdq_encoder_matches_onnx_runtime(core: ov.Core, static_model: onnx.ModelProto) -> None:
    ops, ran, _ = _matches_onnx_runtime(core, static_model, 3)
    # every QuantizeLinear joins a call or changes nothing; pairs after data movement run no call
    assert ran["QuantizeLinear"] == 0 and ran["DequantizeLinear"] == 0
    assert 0 < ran["FakeQuantize"] < ops["QuantizeLinear"] - ops["Transpose"]


def test_static_qdq_encoder_under_f16_hint_stays_close(core: ov.Core, static_model: onnx.ModelProto) -> None:
    feeds = _feeds(4)
    got, _ = profiled(core, static_model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = ort_unfused(static_model, feeds)
    np.testing.assert_allclose(got, want, rtol=0, atol=0.25)
    assert np.abs(got - want).mean() < 0.03


def test_dynamic_quantized_encoder_matches_onnx_runtime(core: ov.Core,
                                                        dynamic_model: onnx.ModelProto) -> None:
    feeds = _feeds(5)
    got, records = profiled(core, dynamic_model, feeds)
    (want,) = ort_unfused(dynamic_model, feeds)
    _close(got, want, atol=0.05, agree=0.97)
    integer = {n.name for n in dynamic_model.graph.node if n.op_type == "MatMulInteger"}
    assert integer <= set(records) and len(integer) == 8


def test_dynamic_quantized_encoder_under_f16_hint_stays_close(core: ov.Core,
                                                              dynamic_model: onnx.ModelProto) -> None:
    feeds = _feeds(6)
    got, _ = profiled(core, dynamic_model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = ort_unfused(dynamic_model, feeds)
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05)
    assert np.abs(got - want).mean() < 0.006


class _CausalAttention(nn.Module):
    """Self-attention with a constant causal mask added to the scaled scores."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(_HIDDEN, 3 * _HIDDEN), nn.Linear(_HIDDEN, _HIDDEN)
        self.register_buffer("mask", torch.triu(torch.full((_LENGTH, _LENGTH), -1e4), diagonal=1))

    def forward(self, x: Any) -> Any:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, _HEADS, -1).permute(2, 0, 3, 1, 4).unbind(0)
        scores = q @ k.transpose(-1, -2) * (_HIDDEN // _HEADS) ** -0.5 + self.mask
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, length, _HIDDEN)
        return self.out(context)


@pytest.fixture(scope="module")
def causal_model(tmp_path_factory: Any) -> onnx.ModelProto:
    torch.manual_seed(22)
    model = export_onnx(_CausalAttention(), (torch.randn(_BATCH, _LENGTH, _HIDDEN),), ["x"], opset=17)
    return quantized(tmp_path_factory.mktemp("causal"), model, True, per_channel=True)


@pytest.mark.parametrize("model_name", ["static_model", "causal_model"])
def test_qdq_attention_runs_as_one_call_and_matches_onnx_runtime(core: ov.Core, model_name: str,
                                                                 request: pytest.FixtureRequest) -> None:
    """The pairs between the attention's matmuls (after the scores, the scale, the mask and the
    softmax) keep the chain from ``scaled_dot_product_attention``; it runs as one call, named after
    its second MatMul, and no Softmax, scale, mask Add or pair of the chain runs on its own."""
    model = request.getfixturevalue(model_name)
    ops, ran, records = _matches_onnx_runtime(core, model, 8)
    assert ops["Softmax"] >= 1 and ran["Softmax"] == 0
    softmax_inputs = {n.input[0] for n in model.graph.node if n.op_type == "Softmax"}
    producers, _ = _producers_and_readers(model)
    chained = {producers[producers[name].input[0]].name for name in softmax_inputs}  # the pairs' quantizers
    assert not chained & set(records)
    if model_name == "causal_model":
        assert ops["Add"] > ran["Add"]  # the mask's Add joined the call


def _at_precision_matches_onnx_runtime(core: ov.Core, model: onnx.ModelProto, precision: str,
                                       seed: int) -> dict[str, str]:
    """Run a static QDQ model on GPU.0 at ``precision`` (f32 or f16) against ONNX Runtime; the
    profile's records."""
    feeds = _feeds(seed)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    if precision == "f32":
        _close(got, want, atol=0.1, agree=0.97)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=0.25)
        assert np.abs(got - want).mean() < 0.03
    return records


def _producers_and_readers(model: onnx.ModelProto) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The node making each value of ``model`` and the nodes reading it, by the value's name."""
    producers = {out: n for n in model.graph.node for out in n.output}
    readers: dict[str, list[Any]] = {}
    for n in model.graph.node:
        for name in n.input:
            readers.setdefault(name, []).append(n)
    return producers, readers


def _gelus(model: onnx.ModelProto) -> list[tuple[Any, set[str], Any]]:
    """Each GELU formula of a static QDQ model: the Div before its Erf, the names of the nodes from
    the Div to its last Mul, and the last Mul."""
    nodes = model.graph.node
    producers, readers = _producers_and_readers(model)

    def after(node: Any) -> Any:  # the next node past the pair on node's output, if there is one
        (reader,) = readers[node.output[0]]
        if reader.op_type == "QuantizeLinear":
            (dq,) = readers[reader.output[0]]
            (reader,) = readers[dq.output[0]]
        return reader

    found = []
    for erf in (n for n in nodes if n.op_type == "Erf"):
        div, add = producers[erf.input[0]], after(erf)
        product = after(add)
        last = after(product)
        assert (div.op_type, add.op_type, product.op_type, last.op_type) == ("Div", "Add", "Mul", "Mul")
        names = {div.name, erf.name, add.name, product.name, last.name, readers[erf.output[0]][0].name}
        found.append((div, names, last))
    return found


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_qdq_gelu_runs_in_the_matmul_before_it_and_matches_onnx_runtime(
        core: ov.Core, static_model: onnx.ModelProto, precision: str) -> None:
    """GELU's formula with a pair after its Erf, Add and product, whose input is the pair after the
    feed-forward's up projection (MatMul, pair, bias Add, pair), runs inside that projection's
    call: none of the formula's nodes, nor the pairs between, run on their own."""
    records = _at_precision_matches_onnx_runtime(core, static_model, precision, 10)
    producers, _ = _producers_and_readers(static_model)
    gelus = _gelus(static_model)
    assert len(gelus) == 2
    for div, names, _ in gelus:
        assert not names & set(records)
        before = [div]
        for _ in range(6):  # back through the pair, the bias Add (and its bias) and the pair
            before = [producers[name] for node in before for name in node.input if name in producers]
        (matmul,) = [node for node in before if node.op_type == "MatMul"]
        assert records.get(matmul.name) == "MatMul"


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_qdq_gelu_whose_input_is_a_graph_output_runs_as_its_own_call(
        core: ov.Core, static_model: onnx.ModelProto, precision: str) -> None:
    """Where the model also gives the GELU's input as an output, the formula runs as one call of
    its own, named after its last Mul (the Erf, the Div and the pairs between run in it), and both
    outputs are ONNX Runtime's."""
    model = onnx.ModelProto()
    model.CopyFrom(static_model)
    gelus = _gelus(model)
    model.graph.output.append(onnx.helper.make_tensor_value_info(gelus[0][0].input[0], onnx.TensorProto.FLOAT,
                                                                 None))
    feeds = _feeds(11)
    request = core.compile_model(model, "GPU.0", {**PROFILED, "INFERENCE_PRECISION_HINT": precision}
                                 ).create_infer_request()
    got, gelu_input = (np.asarray(value) for value in request.infer(feeds).values())
    records = {r.node_name: r.node_type for r in request.get_profiling_info()}
    want, want_input = ort_unfused(model, feeds)
    atol = 0.1 if precision == "f32" else 0.25
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    np.testing.assert_allclose(gelu_input, want_input, rtol=0, atol=atol)
    _, names, last = gelus[0]
    assert records.get(last.name) == "Mul" and not (names - {last.name}) & set(records)


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_residual_layer_norm_runs_with_its_residual_add_and_pairs_as_one_call(
        core: ov.Core, static_model: onnx.ModelProto, precision: str) -> None:
    """Each LayerNormalization, the residual Add and pair before it and the QuantizeLinear after it
    (which feeds the next int8 matmul and, through a pair, the next residual Add) run as one call
    named after the normalization; the model's result stays ONNX Runtime's."""
    records = _at_precision_matches_onnx_runtime(core, static_model, precision, 12)
    nodes = static_model.graph.node
    producers, readers = _producers_and_readers(static_model)
    norms = [n for n in nodes if n.op_type == "LayerNormalization"]
    assert len(norms) == 4 and all(records.get(n.name) == "LayerNormalization" for n in norms)
    for norm in norms:
        (quantizer,) = readers[norm.output[0]]
        before = producers[producers[producers[norm.input[0]].input[0]].input[0]]  # DQ <- Q <- Add
        assert quantizer.op_type == "QuantizeLinear" and quantizer.name not in records
        assert before.op_type == "Add" and before.name not in records


@pytest.mark.parametrize("model_name", ["static_model", "causal_model"])
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_qdq_attention_writes_its_output_projections_8_bit_input(
        core: ov.Core, model_name: str, precision: str, request: pytest.FixtureRequest) -> None:
    """The attention's result reaches the output projection's int8 matmul through a Transpose to
    (batch, row, head, width), a Reshape joining the heads (pairs between) and the projection's
    QuantizeLinear: the attention's call writes that QuantizeLinear's data itself, so the Transpose,
    the Reshape and the quantizer run no call, and the model still matches ONNX Runtime."""
    model = request.getfixturevalue(model_name)
    records = _at_precision_matches_onnx_runtime(core, model, precision, 13)
    producers, readers = _producers_and_readers(model)

    def after_pair(value: str) -> Any:
        (quantizer,) = readers[value]
        (dq,) = readers[quantizer.output[0]]
        (reader,) = readers[dq.output[0]]
        return reader

    heads = [n for n in model.graph.node if n.op_type == "Transpose"
             and list(onnx.helper.get_attribute_value(n.attribute[0])) == [0, 2, 1, 3]]
    assert heads
    for transpose in heads:
        reshape = after_pair(transpose.output[0])
        (quantizer,) = readers[reshape.output[0]]
        assert reshape.op_type == "Reshape" and quantizer.op_type == "QuantizeLinear"
        assert not {transpose.name, reshape.name, quantizer.name} & set(records)
        matmul = producers[producers[producers[transpose.input[0]].input[0]].input[0]]  # DQ <- Q <- MatMul
        assert records.get(matmul.name) == "MatMul"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16", "bf16"])
def test_qdq_attention_on_cuda_in_each_precision_stays_close(causal_model: onnx.ModelProto,
                                                             precision: str) -> None:
    feeds = _feeds(9)
    (want,) = ort_unfused(causal_model, feeds)
    compiled = ov.Core().compile_model(causal_model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    for _ in range(3):  # the first run, then CUDA-graph replays
        got = np.asarray(compiled(feeds)[0])
        if precision == "f32":
            _close(got, want, atol=0.1, agree=0.97)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=0.25 if precision == "f16" else 0.6)
            assert np.abs(got - want).mean() < (0.03 if precision == "f16" else 0.08)


def test_quantized_encoder_in_a_cuda_graph_gives_the_profiled_values(
        core: ov.Core, static_model: onnx.ModelProto, dynamic_model: onnx.ModelProto) -> None:
    # without profiling, CUDA graphs replay the calls (on CUDA); the values are the profiled run's
    for model in (static_model, dynamic_model):
        feeds = _feeds(7)
        profiled_values, _ = profiled(core, model, feeds)
        compiled = core.compile_model(model, "GPU.0")
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(compiled(feeds)[0]), profiled_values)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_quantized_encoder_on_the_compiled_tier_matches_onnx_runtime(kind: str, static_model: onnx.ModelProto,
                                                                   dynamic_model: onnx.ModelProto,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # under torch.compile the int8 matmuls run as one operator with their epilogue, the
    # quantizers as elementwise ops Inductor fuses
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = static_model if kind == "static" else dynamic_model
    config = {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT"}
    compiled = ov.Core().compile_model(model, "GPU.0", config)
    compiled(_feeds(8))  # the eager tier serves while the compiled one is made
    deadline = time.monotonic() + 300
    while compiled.get_property("COMPILED_TIER") == "COMPILING" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert compiled.get_property("COMPILED_TIER") == "COMPILED"
    for seed in (9, 10):
        feeds = _feeds(seed)
        _close(np.asarray(compiled(feeds)[0]), ort_unfused(model, feeds)[0], atol=0.1, agree=0.97)
    assert not [r for r in caplog.records if "does not compile as one graph" in r.getMessage()]
    compiled.release()


class _LongAttention(nn.Module):
    """Self-attention over 1,024 tokens of two 64-wide heads: at f32 K^T and V of a head pass what the
    fused kernel holds, so the chain runs as its separate calls, inside the CUDA graph."""

    def forward(self, x: Any) -> Any:
        batch, length, hidden = x.shape
        q = k = v = x.reshape(batch, length, 2, hidden // 2).transpose(1, 2)
        scores = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)
        return (scores @ v).transpose(1, 2).reshape(batch, length, hidden)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_qdq_attention_past_the_kernels_size_runs_in_a_cuda_graph(tmp_path: Any) -> None:
    model = quantized(tmp_path, export_onnx(_LongAttention(), (torch.randn(1, 1024, 128),), ["x"], opset=17),
                      True, per_channel=True)
    feeds = {"x": np.random.default_rng(11).standard_normal((1, 1024, 128)).astype(np.float32)}
    (want,) = ort_unfused(model, feeds)
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    for _ in range(3):  # the first run, then CUDA-graph replays
        _close(np.asarray(compiled(feeds)[0]), want, atol=0.1, agree=0.97)
