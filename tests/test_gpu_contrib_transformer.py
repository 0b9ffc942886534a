"""ONNX Runtime's transformer contrib ops (``com.microsoft``) on the GPU device, against ONNX Runtime.

Each single-op model runs on an emulated GPU (``INFERENCE_PRECISION_HINT`` f32) and on ONNX Runtime's
CPU provider, whose kernels define these ops; ``query_model`` must place the node on the GPU.  On a
CUDA machine the same tests run on the real GPU under the ``gpu`` marker.  The forms OpenVINO reads
but computes otherwise must run on the CPU device as ONNX Runtime computes them.  Whole models fused
by ONNX Runtime's optimizer are in ``test_gpu_contrib_models.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

torch = pytest.importorskip("torch")

_FLOAT = TensorProto.FLOAT
_MS = "com.microsoft"
_RNG_SEED = 5


@pytest.fixture
def core(emulated_or_cuda_core: ov.Core) -> ov.Core:
    return emulated_or_cuda_core


def _elem(array: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(array.dtype)


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], outputs: Sequence[tuple[str, int]],
           weights: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """One node with ``feeds`` as graph inputs and ``weights`` as initializers, ir_version 10."""
    inputs = [helper.make_tensor_value_info(n, _elem(a), a.shape) for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    inits = [numpy_helper.from_array(a, n) for n, a in (weights or {}).items()]
    graph = helper.make_graph([node], "contrib", inputs, outs, inits)
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(_MS, 1)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 10
    return model


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-4,
           atol: float = 1e-5) -> None:
    """The node is placed on the GPU and its outputs match ONNX Runtime's."""
    placed = core.query_model(core.read_model(model), "GPU")
    assert len(placed) == 1 and next(iter(placed.values())).startswith("GPU"), placed
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(feeds)
    want = _ort(model, feeds)
    for index, expected in enumerate(want):
        actual = np.asarray(got[index])
        assert actual.dtype == expected.dtype, (index, actual.dtype, expected.dtype)
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=f"output {index}")


def _randn(*shape: int, seed: int = _RNG_SEED) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


# --- activations ---------------------------------------------------------------------

@pytest.mark.parametrize(("op", "inputs", "attrs"), [
    ("Gelu", 1, {}),
    ("BiasGelu", 2, {}),
    ("FastGelu", 1, {}),
    ("FastGelu", 2, {}),
    ("QuickGelu", 1, {"alpha": 1.5}),
    ("QuickGelu", 1, {}),
])
def test_activations_match_onnx_runtime(core: ov.Core, op: str, inputs: int, attrs: dict[str, Any]) -> None:
    feeds = {"x": _randn(2, 3, 8) * 3, "bias": _randn(8, seed=1), "skip": _randn(2, 3, 8, seed=2)}
    feeds = dict(list(feeds.items())[:inputs])
    node = helper.make_node(op, list(feeds), ["y"], domain=_MS, **attrs)
    _check(core, _model(node, feeds, [("y", _FLOAT)]), feeds)


def test_bias_add_adds_bias_and_skip(core: ov.Core) -> None:
    # ONNX Runtime has BiasAdd on CUDA only: the spec's sum, in numpy, is the reference
    feeds = {"x": _randn(2, 3, 8), "bias": _randn(8, seed=1), "skip": _randn(2, 3, 8, seed=2)}
    model = _model(helper.make_node("BiasAdd", list(feeds), ["y"], domain=_MS), feeds, [("y", _FLOAT)])
    got = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})(feeds)[0]
    np.testing.assert_allclose(got, feeds["x"] + feeds["bias"] + feeds["skip"], rtol=1e-6)


# --- normalizations ------------------------------------------------------------------

@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("outputs", [1, 4])
def test_skip_layer_normalization_matches_onnx_runtime(core: ov.Core, bias: bool, outputs: int) -> None:
    feeds = {"x": _randn(2, 5, 16), "skip": _randn(2, 5, 16, seed=1)}
    weights = {"gamma": _randn(16, seed=2), "beta": _randn(16, seed=3), "bias": _randn(16, seed=4)}
    names = ["x", "skip", "gamma", "beta"] + (["bias"] if bias else [])
    out_names = ["y", "mean", "inv_std", "sum"][:outputs]
    node = helper.make_node("SkipLayerNormalization", names, out_names, domain=_MS, epsilon=1e-5)
    _check(core, _model(node, feeds, [(n, _FLOAT) for n in out_names if n], weights), feeds)


def test_skip_layer_normalization_broadcasts_its_skip(core: ov.Core) -> None:
    feeds = {"x": _randn(3, 4, 8), "skip": _randn(1, 4, 8, seed=1)}
    weights = {"gamma": _randn(8, seed=2)}
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma"], ["y"], domain=_MS)
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights), feeds)


@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_normalization_matches_onnx_runtime(core: ov.Core, bias: bool) -> None:
    feeds = {"x": _randn(2, 5, 16), "skip": _randn(2, 5, 16, seed=1)}
    weights = {"gamma": _randn(16, seed=2), "bias": _randn(16, seed=4)}
    names = ["x", "skip", "gamma"] + (["bias"] if bias else [])
    outputs = ["y", "mean", "inv_std", "sum"]  # its mean is zeros, as ONNX Runtime writes it
    node = helper.make_node("SkipSimplifiedLayerNormalization", names, outputs, domain=_MS, epsilon=1e-6)
    _check(core, _model(node, feeds, [(n, _FLOAT) for n in outputs], weights), feeds)


@pytest.mark.parametrize("axis", [-1, 1])
def test_simplified_layer_normalization_matches_onnx_runtime(core: ov.Core, axis: int) -> None:
    feeds = {"x": _randn(2, 3, 32)}
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y", "inv_std"], axis=axis,
                            epsilon=1e-6)
    scale = _randn(*(2, 3, 32)[axis:], seed=1)
    _check(core, _model(node, feeds, [("y", _FLOAT), ("inv_std", _FLOAT)], {"scale": scale}), feeds)


def test_layer_normalization_below_opset_17_matches_onnx_runtime(core: ov.Core) -> None:
    feeds = {"x": _randn(2, 3, 32)}
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5)
    weights = {"scale": _randn(32, seed=1), "bias": _randn(32, seed=2)}
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights, opset=14), feeds)


# --- embeddings ----------------------------------------------------------------------

@pytest.mark.parametrize("form", ["full", "position_ids", "shared_position_ids", "no_segments", "no_mask"])
def test_embed_layer_normalization_matches_onnx_runtime(core: ov.Core, form: str) -> None:
    rng = np.random.default_rng(3)
    feeds = {"ids": rng.integers(0, 30, (2, 6)).astype(np.int32),
             "segments": rng.integers(0, 2, (2, 6)).astype(np.int32),
             "mask": np.array([[1] * 6, [1, 0] + [1] * 2 + [0] * 2], dtype=np.int32)}
    names = ["ids", "segments", "word", "position", "segment", "gamma", "beta", "mask"]
    if form == "position_ids":
        feeds["positions"] = rng.integers(0, 10, (2, 6)).astype(np.int32)
    elif form == "shared_position_ids":
        feeds["positions"] = np.array([[5, 4, 3, 2, 1, 0]], dtype=np.int32)
    elif form == "no_segments":
        del feeds["segments"]
        names[1] = names[4] = ""
    elif form == "no_mask":  # the mask index is then zeros
        del feeds["mask"]
        names.pop()
    if "positions" in feeds:
        names.append("positions")
    weights = {"word": _randn(30, 16), "position": _randn(10, 16, seed=1), "segment": _randn(2, 16, seed=2),
               "gamma": _randn(16, seed=3), "beta": _randn(16, seed=4)}
    node = helper.make_node("EmbedLayerNormalization", names, ["y", "mask_index", "sum"], domain=_MS,
                            epsilon=1e-12)
    outputs = [("y", _FLOAT), ("mask_index", TensorProto.INT32), ("sum", _FLOAT)]
    _check(core, _model(node, feeds, outputs, {k: v for k, v in weights.items() if k in names}), feeds)


@pytest.mark.parametrize(("rank", "interleaved", "rotary_dim", "offset"), [
    (3, 0, 0, False), (3, 1, 0, False), (4, 0, 0, False), (4, 1, 0, True), (3, 0, 4, False), (3, 0, 0, True),
])
def test_rotary_embedding_matches_onnx_runtime(core: ov.Core, rank: int, interleaved: int, rotary_dim: int,
                                               offset: bool) -> None:
    batch, length, heads, head = 2, 5, 2, 8
    shape = (batch, length, heads * head) if rank == 3 else (batch, heads, length, head)
    rng = np.random.default_rng(4)
    positions = (np.array([3], dtype=np.int64) if offset
                 else rng.integers(0, 16, (batch, length)).astype(np.int64))
    feeds = {"x": _randn(*shape), "positions": positions}
    half = (rotary_dim or head) // 2
    angles = np.arange(16, dtype=np.float32)[:, None] / (100.0 ** (np.arange(half, dtype=np.float32) / half))
    weights = {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
    attrs: dict[str, Any] = {"interleaved": interleaved}
    if rotary_dim:
        attrs.update(rotary_embedding_dim=rotary_dim, num_heads=heads)
    node = helper.make_node("RotaryEmbedding", ["x", "positions", "cos", "sin"], ["y"], domain=_MS, **attrs)
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights), feeds)


# --- fused products ------------------------------------------------------------------

@pytest.mark.parametrize(("a_shape", "b_shape", "attrs"), [
    ((2, 4, 3), (2, 3, 5), {"alpha": 0.5}),
    ((2, 3, 4), (2, 5, 3), {"transA": 1, "transB": 1}),
    ((4, 2, 3), (2, 3, 5), {"transBatchA": 1}),
    ((2, 4, 3), (3, 2, 5), {"transBatchB": 1}),
    ((3, 2, 2, 4), (2, 2, 3, 5), {"transBatchA": 1, "transA": 1, "alpha": 2.0}),
    ((2, 2, 4, 3), (5, 2, 2, 3), {"transBatchB": 1, "transB": 1}),
    ((3, 4), (2, 3, 5), {"transA": 1, "alpha": 0.25}),
])
def test_fused_matmul_matches_onnx_runtime(core: ov.Core, a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                                           attrs: dict[str, Any]) -> None:
    feeds = {"a": _randn(*a_shape), "b": _randn(*b_shape, seed=9)}
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=_MS, **attrs)
    _check(core, _model(node, feeds, [("y", _FLOAT)]), feeds)


@pytest.mark.parametrize("attrs", [
    {"activation": "Relu"},
    {"activation": "LeakyRelu", "activation_alpha": 0.2, "alpha": 0.5, "beta": 2.0, "transB": 1},
    {"activation": "HardSigmoid", "activation_alpha": 0.3, "activation_beta": 0.4},
    {"activation": "Tanh", "transA": 1},
    {"activation": "Sigmoid"},
    {"activation": "Elu", "activation_alpha": 0.7},
    {"activation": "Selu", "activation_alpha": 1.5, "activation_gamma": 1.1},
    {"activation": "Softplus"},
    {"activation": "Softsign"},
    {"activation": "ThresholdedRelu", "activation_alpha": 0.3},
    {"activation": "ScaledTanh", "activation_alpha": 1.5, "activation_beta": 0.5},
    {"activation": "ParametricSoftplus", "activation_alpha": 1.5, "activation_beta": 0.5},
])
def test_fused_gemm_matches_onnx_runtime(core: ov.Core, attrs: dict[str, Any]) -> None:
    a = _randn(3, 4) if not attrs.get("transA") else _randn(4, 3)
    b = _randn(4, 5, seed=1) if not attrs.get("transB") else _randn(5, 4, seed=1)
    feeds = {"a": a, "b": b}
    node = helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=_MS, **attrs)
    _check(core, _model(node, feeds, [("y", _FLOAT)], {"c": _randn(5, seed=2)}), feeds)


@pytest.mark.parametrize(("activation", "params", "z"), [
    ("Relu", [], True), ("Clip", [-0.5, 0.5], False), ("LeakyRelu", [0.1], True), ("Sigmoid", [], False),
    ("Tanh", [], True), ("HardSigmoid", [0.3, 0.4], False),
])
def test_fused_conv_matches_onnx_runtime(core: ov.Core, activation: str, params: list[float],
                                         z: bool) -> None:
    feeds = {"x": _randn(2, 3, 7, 7)}
    if z:
        feeds["z"] = _randn(2, 4, 4, 4, seed=3)
    weights = {"w": _randn(4, 3, 3, 3, seed=1), "b": _randn(4, seed=2)}
    attrs: dict[str, Any] = {"activation": activation, "strides": [2, 2], "pads": [1, 1, 1, 1]}
    if params:
        attrs["activation_params"] = params
    node = helper.make_node("FusedConv", ["x", "w", "b"] + (["z"] if z else []), ["y"], domain=_MS, **attrs)
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights), feeds)


def test_inverse_matches_onnx_runtime(core: ov.Core) -> None:
    feeds = {"x": _randn(2, 3, 4, 4) + 4 * np.eye(4, dtype=np.float32)}
    node = helper.make_node("Inverse", ["x"], ["y"], domain=_MS)
    _check(core, _model(node, feeds, [("y", _FLOAT)]), feeds, rtol=1e-4, atol=1e-5)


def test_bias_softmax_follows_onnx_runtime_broadcast(core: ov.Core) -> None:
    # ONNX Runtime has BiasSoftmax on CUDA only: numpy's softmax over the dims from axis on is the
    # reference, the bias spanning the dims before axis (0) or the leading ones (1)
    x = _randn(2, 3, 4, 5)
    for inner, bias in ((0, _randn(4, 5, seed=1)), (1, _randn(2, 1, 1, 5, seed=2))):
        feeds = {"x": x, "b": bias}
        node = helper.make_node("BiasSoftmax", ["x", "b"], ["y"], domain=_MS, axis=3,
                                is_inner_broadcast=inner)
        model = _model(node, feeds, [("y", _FLOAT)])
        compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
        got = compiled(feeds)[0]
        z = x + bias
        want = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


# --- attention -----------------------------------------------------------------------

_B, _S, _HIDDEN, _HEADS = 2, 5, 16, 2


def _mask(form: str, total: int) -> np.ndarray | None:
    lengths = np.array([total, total - 2], dtype=np.int32)
    if form == "lengths":
        return lengths
    if form == "start_end":
        return np.concatenate([lengths, np.array([0, 1], dtype=np.int32)])
    raw = (np.arange(total)[None, :] < lengths[:, None]).astype(np.int32)
    if form == "raw":
        return raw
    if form == "raw3d":
        causal = np.tril(np.ones((_S, total), dtype=np.int32), total - _S)
        return (raw[:, None, :] * causal[None]).astype(np.int32)
    return None


@pytest.mark.parametrize("form", [None, "lengths", "start_end", "raw", "raw3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks_match_onnx_runtime(core: ov.Core, form: str | None, unidirectional: int) -> None:
    feeds = {"x": _randn(_B, _S, _HIDDEN)}
    mask = _mask(form, _S) if form else None
    if mask is not None:
        feeds["mask"] = mask
    weights = {"w": _randn(_HIDDEN, 3 * _HIDDEN, seed=1) * 0.5, "bias": _randn(3 * _HIDDEN, seed=2)}
    names = ["x", "w", "bias"] + (["mask"] if mask is not None else [])
    node = helper.make_node("Attention", names, ["y"], domain=_MS, num_heads=_HEADS,
                            unidirectional=unidirectional)
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights), feeds)


def test_attention_with_past_matches_onnx_runtime(core: ov.Core) -> None:
    past = 3
    feeds = {"x": _randn(_B, _S, _HIDDEN), "mask": _mask("raw", past + _S),
             "past": _randn(2, _B, _HEADS, past, _HIDDEN // _HEADS, seed=3)}
    weights = {"w": _randn(_HIDDEN, 3 * _HIDDEN, seed=1) * 0.5, "bias": _randn(3 * _HIDDEN, seed=2)}
    node = helper.make_node("Attention", ["x", "w", "bias", "mask", "past"],
                            ["y", "present"], domain=_MS, num_heads=_HEADS, unidirectional=1, scale=0.3,
                            mask_filter_value=-1e4)
    _check(core, _model(node, feeds, [("y", _FLOAT), ("present", _FLOAT)], weights), feeds)


def test_attention_with_unequal_sizes_and_a_bias_matches_onnx_runtime(core: ov.Core) -> None:
    feeds = {"x": _randn(_B, _S, _HIDDEN), "mask": _mask("lengths", _S),
             "attention_bias": _randn(1, _HEADS, _S, _S, seed=4)}
    weights = {"w": _randn(_HIDDEN, 16 + 16 + 8, seed=1) * 0.5, "bias": _randn(40, seed=2)}
    node = helper.make_node("Attention", ["x", "w", "bias", "mask", "", "attention_bias"], ["y"], domain=_MS,
                            num_heads=_HEADS, qkv_hidden_sizes=[16, 16, 8])
    _check(core, _model(node, feeds, [("y", _FLOAT)], weights), feeds)


@pytest.mark.parametrize("form", [None, "lengths", "raw"])
@pytest.mark.parametrize("extras", ["bias", "causal", "past"])
def test_multi_head_attention_matches_onnx_runtime(core: ov.Core, form: str | None, extras: str) -> None:
    kv_len = 7 if extras != "causal" else _S
    past = 2 if extras == "past" else 0
    feeds = {"q": _randn(_B, _S, _HIDDEN), "k": _randn(_B, kv_len, _HIDDEN, seed=1),
             "v": _randn(_B, kv_len, _HIDDEN, seed=2)}
    names = ["q", "k", "v", "bias" if extras == "bias" else ""]
    weights = {"bias": _randn(3 * _HIDDEN, seed=3)} if extras == "bias" else {}
    mask = _mask(form, kv_len + past) if form else None
    if mask is not None:
        feeds["mask"] = mask
    names.append("mask" if mask is not None else "")
    outputs = [("y", _FLOAT)]
    if extras == "past":
        feeds["pk"] = _randn(_B, _HEADS, past, _HIDDEN // _HEADS, seed=4)
        feeds["pv"] = _randn(_B, _HEADS, past, _HIDDEN // _HEADS, seed=5)
        names += ["", "pk", "pv"]
        outputs += [("present_key", _FLOAT), ("present_value", _FLOAT)]
    node = helper.make_node("MultiHeadAttention", names, [n for n, _ in outputs], domain=_MS,
                            num_heads=_HEADS, unidirectional=int(extras == "causal"))
    _check(core, _model(node, feeds, outputs, weights), feeds)


def test_multi_head_attention_with_attention_bias_matches_onnx_runtime(core: ov.Core) -> None:
    feeds = {"q": _randn(_B, _S, _HIDDEN), "k": _randn(_B, 6, _HIDDEN, seed=1),
             "v": _randn(_B, 6, _HIDDEN, seed=2),
             "attention_bias": _randn(_B, 1, _S, 6, seed=3)}
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "attention_bias"], ["y"],
                            domain=_MS, num_heads=_HEADS, scale=0.2)
    _check(core, _model(node, feeds, [("y", _FLOAT)]), feeds)


def test_forms_onnx_runtime_runs_on_cuda_only_stay_off_the_gpu(core: ov.Core) -> None:
    # a 4-D (Megatron) mask and rotary inside Attention: query_model leaves the node out
    feeds = {"x": _randn(_B, _S, _HIDDEN), "mask": np.ones((_B, 1, _S, _S), dtype=np.int32)}
    weights = {"w": _randn(_HIDDEN, 3 * _HIDDEN, seed=1)}
    for attrs, names in (({}, ["x", "w", "", "mask"]), ({"do_rotary": 1}, ["x", "w"])):
        node = helper.make_node("Attention", names, ["y"], domain=_MS, num_heads=_HEADS, **attrs)
        model = _model(node, {k: v for k, v in feeds.items() if k in names}, [("y", _FLOAT)], weights)
        assert core.query_model(core.read_model(model), "GPU") == {}
    # ONNX Runtime's FusedGemm has no Clip (FusedConv has)
    gemm = helper.make_node("FusedGemm", ["a", "b"], ["y"], domain=_MS, activation="Clip",
                            activation_alpha=0.0, activation_beta=1.0)
    model = _model(gemm, {"a": _randn(3, 4), "b": _randn(4, 5)}, [("y", _FLOAT)])
    assert core.query_model(core.read_model(model), "GPU") == {}
    # nor a FusedMatMul that moves batch dims of operands of unequal ranks
    matmul = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=_MS, transBatchA=1)
    model = _model(matmul, {"a": _randn(4, 2, 3), "b": _randn(3, 5)}, [("y", _FLOAT)])
    assert core.query_model(core.read_model(model), "GPU") == {}


def _rotary_case(**attrs: Any) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    half = 2 if attrs.get("rotary_embedding_dim") else 4
    angles = np.arange(16, dtype=np.float32)[:, None] / (100.0 ** (np.arange(half, dtype=np.float32) / half))
    positions = (np.array([3], dtype=np.int64) if attrs.pop("offset", False)
                 else np.random.default_rng(4).integers(0, 16, (2, 5)).astype(np.int64))
    feeds = {"x": _randn(2, 5, 16), "positions": positions}
    weights = {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
    # OpenVINO reads the op only with its interleaved attribute written out
    node = helper.make_node("RotaryEmbedding", ["x", "positions", "cos", "sin"], ["y"], domain=_MS,
                            interleaved=0, **attrs)
    return _model(node, feeds, [("y", _FLOAT)], weights), feeds


def _attention_scale_case() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    node = helper.make_node("Attention", ["x", "w", "bias"], ["y"], domain=_MS, num_heads=_HEADS, scale=0.3)
    weights = {"w": _randn(_HIDDEN, 3 * _HIDDEN, seed=1) * 0.5, "bias": _randn(3 * _HIDDEN, seed=2)}
    feeds = {"x": _randn(_B, _S, _HIDDEN)}
    return _model(node, feeds, [("y", _FLOAT)], weights), feeds


def _gemm_tanh_case() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    node = helper.make_node("FusedGemm", ["a", "b", "c"], ["y"], domain=_MS, activation="Tanh")
    feeds = {"a": _randn(3, 4), "b": _randn(4, 5, seed=1)}
    return _model(node, feeds, [("y", _FLOAT)], {"c": _randn(5, seed=2)}), feeds


def _cpu_cases() -> list[Any]:
    return [pytest.param(_attention_scale_case, id="attention-scale"),
            pytest.param(_gemm_tanh_case, id="gemm-tanh"),
            pytest.param(lambda: _rotary_case(rotary_embedding_dim=4, num_heads=2), id="rotary-partial"),
            pytest.param(lambda: _rotary_case(offset=True), id="rotary-offset")]


@pytest.mark.parametrize("case", _cpu_cases())
def test_cpu_device_computes_contrib_forms_as_onnx_runtime(case: Any) -> None:
    # OpenVINO reads these forms but computes them otherwise: the CPU device leaves them to ONNX Runtime
    model, feeds = case()
    got = ov.Core().compile_model(model, "CPU")(feeds)[0]
    np.testing.assert_allclose(np.asarray(got), _ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
