"""Edge cases of the GPU lowerings that real models and the ONNX spec allow, on the emulated
``GPU.0`` through the public API, against raw ONNX Runtime.

Each model must run whole on ``GPU.0`` (``query_model`` claims every node and
``EXECUTION_DEVICES`` says GPU.0, no CPU fallback).  Every test runs on the
emulated GPU and, under ``pytest -m gpu``, on a CUDA GPU.  Where ONNX Runtime has no
kernel for a case (uint16/uint64 Where, a Scan over zero steps) numpy is the
reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

from conftest import make_model, ort_run

pytest.importorskip("torch")

F, U8, I64, BOOL = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT64, TensorProto.BOOL
_UNSIGNED = {np.uint16: TensorProto.UINT16, np.uint32: TensorProto.UINT32, np.uint64: TensorProto.UINT64}


@pytest.fixture(scope="module", params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def core(request: pytest.FixtureRequest) -> Iterator[ov.Core]:
    """GPU.0 emulated on torch's CPU device; and, under ``pytest -m gpu``, a CUDA GPU's own kernels."""
    torch = pytest.importorskip("torch")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "emulated":
            patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        else:
            if not torch.cuda.is_available():
                pytest.skip("no CUDA GPU")
            patch.delenv("INFERPLEX_EMULATED_GPUS", raising=False)
        yield ov.Core()


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return model


def _run_on_gpu(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    model = _named(model)
    supported = core.query_model(model, "GPU.0")
    assert sorted(supported) == sorted(n.name for n in model.graph.node), "a node stays off the GPU"
    compiled = core.compile_model(model, "GPU.0")
    assert list(compiled.get_property("EXECUTION_DEVICES")) == ["GPU.0"]
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(compiled.outputs))]


def _assert_like_ort(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any],
                     atol: float = 0.0) -> None:
    got = _run_on_gpu(core, model, feeds)
    want = ort_run(model, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if atol:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


# --- recurrent layers -----------------------------------------------------------------------


def _recurrent(op: str, outputs: list[str], direction: str = "forward", lengths: bool = False,
               hidden: int = 3, size: int = 2) -> onnx.ModelProto:
    dirs, gates = (2 if direction == "bidirectional" else 1), {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(1)
    weights = [numpy_helper.from_array(rng.standard_normal((dirs, gates * hidden, n)).astype(np.float32), w)
               for w, n in (("w", size), ("r", hidden))]
    inputs, graph_inputs = ["x", "w", "r"], [("x", F, [4, 3, size])]
    if lengths:  # with initial states, which a row of length 0 must not pass on
        states = ["h0", "c0"] if op == "LSTM" else ["h0"]
        inputs += ["", "lens", *states]
        graph_inputs += [("lens", TensorProto.INT32, [3])] + [(s, F, [dirs, 3, hidden]) for s in states]
    node = helper.make_node(op, inputs, outputs, hidden_size=hidden, direction=direction)
    return _model_with_outputs(node, graph_inputs, [o for o in outputs if o], weights)


def _model_with_outputs(node: onnx.NodeProto, inputs: list[Any], outputs: list[str],
                        weights: list[onnx.TensorProto]) -> onnx.ModelProto:
    """A one-node model whose output shapes come from ONNX shape inference."""
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(o, F, None) for o in outputs],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.output}
    for output in model.graph.output:
        output.type.CopyFrom(inferred[output.name].type)
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_layer_with_only_its_sequence_output(core: ov.Core, op: str) -> None:
    model = _recurrent(op, ["y"])
    feeds = {"x": np.random.default_rng(2).standard_normal((4, 3, 2)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_row_of_length_zero_has_zero_final_state(core: ov.Core, op: str, direction: str) -> None:
    outputs = ["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"]
    model = _recurrent(op, outputs, direction, lengths=True)
    rng = np.random.default_rng(3)
    dirs = 2 if direction == "bidirectional" else 1
    feeds = {"x": rng.standard_normal((4, 3, 2)).astype(np.float32), "lens": np.array([4, 0, 2], np.int32),
             "h0": rng.standard_normal((dirs, 3, 3)).astype(np.float32)}
    if op == "LSTM":
        feeds["c0"] = rng.standard_normal((dirs, 3, 3)).astype(np.float32)
    _assert_like_ort(core, model, feeds, atol=1e-5)


# --- spectral -------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [17, 20])
def test_inverse_dft_of_a_real_signal(core: ov.Core, opset: int) -> None:
    node = helper.make_node("DFT", ["x"], ["y"], inverse=1, **({"axis": 1} if opset < 20 else {}))
    model = make_model([node], [("x", F, [2, 8, 1])], [("y", F, [2, 8, 2])], opset=opset)
    feeds = {"x": np.random.default_rng(4).standard_normal((2, 8, 1)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


def _constants(**values: Any) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(np.array(v, np.float32 if isinstance(v, float) else np.int64), n)
            for n, v in values.items()]


@pytest.mark.parametrize(("bins", "length", "rate", "low", "high"),
                         [(8, 64, 16000, 0.0, 8000.0), (40, 512, 22050, 20.0, 11000.0),
                          (5, 16, 1000, 0.0, 400.0)])
@pytest.mark.parametrize("elem", [F, TensorProto.INT32])
def test_mel_weight_matrix(core: ov.Core, bins: int, length: int, rate: int, low: float, high: float,
                           elem: int) -> None:
    node = helper.make_node("MelWeightMatrix", ["bins", "length", "rate", "low", "high"], ["y"],
                            output_datatype=elem)
    model = make_model([node], [], [("y", elem, [length // 2 + 1, bins])],
                       _constants(bins=bins, length=length, rate=rate, low=low, high=high), opset=17)
    _assert_like_ort(core, model, {}, atol=1e-6 if elem == F else 0.0)


def test_log_mel_audio_front_end(core: ov.Core) -> None:
    nodes = [helper.make_node("HannWindow", ["frame"], ["window"]),
             helper.make_node("STFT", ["x", "step", "window", "frame"], ["spectrum"]),
             helper.make_node("ReduceSumSquare", ["spectrum", "last"], ["power"], keepdims=0),
             helper.make_node("MelWeightMatrix", ["bins", "frame", "rate", "low", "high"], ["mel"]),
             helper.make_node("MatMul", ["power", "mel"], ["energy"]),
             helper.make_node("Add", ["energy", "floor"], ["floored"]),
             helper.make_node("Log", ["floored"], ["y"])]
    constants = _constants(frame=256, step=128, last=[3], bins=40, rate=16000, low=0.0, high=8000.0,
                           floor=1e-6)
    model = make_model(nodes, [("x", F, ["N", 1600, 1])], [("y", F, ["N", 11, 40])], constants, opset=18)
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 1600, 1)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-4)


# --- control flow that runs no iteration ------------------------------------------------------


def _vi(name: str, elem: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def test_loop_with_no_iteration_gives_empty_scan_outputs(core: ov.Core) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("acc_in", F, [2])],
        [_vi("cond_out", BOOL, []), _vi("acc_out", F, [2]), _vi("scan_out", F, [2])])
    loop = helper.make_node("Loop", ["trips", "go", "a0"], ["acc", "scans"], body=body)
    model = make_model([loop], [("trips", I64, []), ("go", BOOL, []), ("a0", F, [2]), ("x", F, [2])],
                       [("acc", F, [2]), ("scans", F, ["K", 2])], opset=17)
    base = {"a0": np.array([1, 2], np.float32), "x": np.array([3, 4], np.float32)}
    for trips, go in ((0, True), (3, False), (3, True)):
        feeds = {**base, "trips": np.array(trips, np.int64), "go": np.array(go)}
        _assert_like_ort(core, model, feeds, atol=1e-6)


def test_scan_over_zero_steps_keeps_its_state(core: ov.Core) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xi"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["yi"])],
        "body", [_vi("s_in", F, [2]), _vi("xi", F, [2])], [_vi("s_out", F, [2]), _vi("yi", F, [2])])
    scan = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], num_scan_inputs=1, body=body)
    model = make_model([scan], [("s0", F, [2]), ("xs", F, ["L", 2])], [("s", F, [2]), ("ys", F, ["L", 2])],
                       opset=16)
    s0 = np.array([1.5, -2], np.float32)
    # ONNX Runtime refuses a zero-length scan axis; the state passes through and ys is empty.
    state, ys = _run_on_gpu(core, model, {"s0": s0, "xs": np.zeros((0, 2), np.float32)})
    np.testing.assert_array_equal(state, s0)
    assert ys.shape == (0, 2) and ys.dtype == np.float32
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    _assert_like_ort(core, model, {"s0": s0, "xs": xs}, atol=1e-6)


# --- quantized ------------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv_rounds_like_onnx_runtime(core: ov.Core, bias: bool) -> None:
    # Scales whose ratio puts some sums within float32 rounding of a half: float64 would round
    # them the other way.
    rng = np.random.default_rng(3)
    weights = rng.integers(0, 256, (6, 4, 3, 3)).astype(np.uint8)
    inits = [numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in
             [("xs", 0.05, np.float32), ("xz", 100, np.uint8), ("ws", 0.02, np.float32),
              ("wz", 128, np.uint8), ("ys", 0.3, np.float32), ("yz", 120, np.uint8)]]
    inits.append(numpy_helper.from_array(weights, "w"))
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(numpy_helper.from_array(rng.integers(-500, 500, (6,)).astype(np.int32), "b"))
        names.append("b")
    node = helper.make_node("QLinearConv", names, ["y"], pads=[1, 1, 1, 1])
    model = make_model([node], [("x", U8, [2, 4, 7, 7])], [("y", U8, [2, 6, 7, 7])], inits, opset=10)
    for seed in range(4):
        feeds = {"x": np.random.default_rng(seed).integers(0, 256, (2, 4, 7, 7)).astype(np.uint8)}
        _assert_like_ort(core, model, feeds)


def test_dynamic_quantize_linear_of_zeros(core: ov.Core) -> None:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    model = make_model([node], [("x", F, [3, 4])],
                       [("y", U8, [3, 4]), ("s", F, []), ("z", U8, [])], opset=11)
    _assert_like_ort(core, model, {"x": np.zeros((3, 4), np.float32)})


@pytest.mark.parametrize(("elem", "low", "high"), [(TensorProto.INT4, -8, 8), (TensorProto.UINT4, 0, 16)])
def test_int4_weights_dequantized_per_block(core: ov.Core, elem: int, low: int, high: int) -> None:
    rng = np.random.default_rng(8)
    weights, zeros = rng.integers(low, high, (16, 8)), rng.integers(low, high, (4, 8))
    scales = (rng.uniform(0.01, 0.1, (4, 8))).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=4),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]
    inits = [helper.make_tensor("w", elem, [16, 8], weights.flatten().tolist()),
             numpy_helper.from_array(scales, "s"),
             helper.make_tensor("z", elem, [4, 8], zeros.flatten().tolist())]
    model = make_model(nodes, [("x", F, ["N", 16])], [("y", F, ["N", 8])], inits, opset=21)
    feeds = {"x": rng.standard_normal((3, 16)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


_FLOAT8 = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
           TensorProto.FLOAT8E5M2FNUZ]
_F8_VALUES = np.array([0, 1, -3, 0.3, 100, 1000, -1e6, 0.01, 448, 57344, 1e-9, 240], np.float32)


@pytest.mark.parametrize("f8", _FLOAT8)
def test_float8_constants_as_castlike_target_and_zero_point(core: ov.Core, f8: int) -> None:
    like = make_model([helper.make_node("CastLike", ["x", "like"], ["h"]),
                       helper.make_node("Cast", ["h"], ["y"], to=F)],
                      [("x", F, [12])], [("y", F, [12])], [helper.make_tensor("like", f8, [1], [0])],
                      opset=19)
    _assert_like_ort(core, like, {"x": _F8_VALUES})
    qdq = make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                      helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                     [("x", F, [12])], [("y", F, [12])],
                     [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
                      helper.make_tensor("z", f8, [], [0])], opset=21)
    _assert_like_ort(core, qdq, {"x": _F8_VALUES})


# --- uint16/32/64 data through the ops that move it -------------------------------------------


def _unsigned_values(dtype: Any, count: int, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    values = np.random.default_rng(seed).integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    values[:2] = [info.max, 0]  # the top bit set, and zero
    return values


@pytest.mark.parametrize("dtype", list(_UNSIGNED))
def test_unsigned_data_through_selection_ops(core: ov.Core, dtype: Any) -> None:
    elem = _UNSIGNED[dtype]
    a, b = _unsigned_values(dtype, 24, 1), _unsigned_values(dtype, 24, 2)
    ints = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
            [("starts", [2]), ("ends", [20]), ("repeats", [2]), ("index", [0, -1, 3, 17])]]
    nodes = [helper.make_node("Concat", ["a", "b"], ["joined"], axis=0),
             helper.make_node("Slice", ["joined", "starts", "ends"], ["sliced"]),
             helper.make_node("Split", ["sliced"], ["half1", "half2"], axis=0, num_outputs=2),
             helper.make_node("Tile", ["half2", "repeats"], ["tiled"]),
             helper.make_node("Gather", ["tiled", "index"], ["picked"], axis=0),
             helper.make_node("Abs", ["half1"], ["absolute"]),
             helper.make_node("Sign", ["b"], ["sign"])]
    outputs = [("picked", elem, [4]), ("absolute", elem, [9]), ("sign", elem, [24])]
    model = make_model(nodes, [("a", elem, [24]), ("b", elem, [24])], outputs, ints, opset=18)
    _assert_like_ort(core, model, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", list(_UNSIGNED))
def test_unsigned_where_and_clip(core: ov.Core, dtype: Any) -> None:
    elem = _UNSIGNED[dtype]
    a, b = _unsigned_values(dtype, 24, 3), _unsigned_values(dtype, 24, 4)
    high = np.iinfo(dtype).max // 3
    bounds = [numpy_helper.from_array(np.array(v, dtype), n) for n, v in [("low", 5), ("high", high)]]
    nodes = [helper.make_node("Greater", ["a", "b"], ["greater"]),
             helper.make_node("Where", ["greater", "a", "b"], ["larger"]),
             helper.make_node("Clip", ["a", "low", "high"], ["clipped"])]
    model = make_model(nodes, [("a", elem, [24]), ("b", elem, [24])],
                       [("larger", elem, [24]), ("clipped", elem, [24])], bounds, opset=18)
    larger, clipped = _run_on_gpu(core, model, {"a": a, "b": b})
    # ONNX Runtime has no uint16/uint64 Where or Clip kernels: numpy is the reference.
    np.testing.assert_array_equal(larger, np.maximum(a, b))
    np.testing.assert_array_equal(clipped, np.clip(a, dtype(5), dtype(high)))
    assert larger.dtype == clipped.dtype == dtype


# --- RoiAlign (two-stage detectors) -----------------------------------------------------------


def _regions(count: int, height: float, width: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x1, y1 = rng.uniform(-2, width, count), rng.uniform(-2, height, count)
    w, h = rng.uniform(0, width * 0.7, count), rng.uniform(0, height * 0.7, count)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], 1).astype(np.float32)
    boxes[0] = [2, 2, 2, 2]  # empty
    boxes[1] = [-6, -6, -1.5, -1.5]  # outside the map
    return boxes


@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling", [0, 2])
@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align(core: ov.Core, mode: str, sampling: int, transform: str) -> None:
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode, output_height=5,
                            output_width=4, sampling_ratio=sampling, spatial_scale=0.25,
                            coordinate_transformation_mode=transform)
    model = make_model([node], [("x", F, [2, 3, 10, 12]), ("rois", F, ["R", 4]), ("batch", I64, ["R"])],
                       [("y", F, ["R", 3, 5, 4])], opset=16)
    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((2, 3, 10, 12)).astype(np.float32), "rois": _regions(9, 40, 48, 10),
             "batch": rng.integers(0, 2, 9).astype(np.int64)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


def test_roi_align_under_an_f16_hint_samples_in_float32(core: ov.Core) -> None:
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=7, output_width=7,
                            sampling_ratio=2, spatial_scale=0.0625)
    inputs = [("x", F, [2, 16, 20, 24]), ("rois", F, ["R", 4]), ("batch", I64, ["R"])]
    model = _named(make_model([node], inputs, [("y", F, ["R", 16, 7, 7])], opset=16))
    rng = np.random.default_rng(11)
    corner = rng.uniform(0, 250, (10, 2))
    rois = np.concatenate([corner, corner + rng.uniform(10, 80, (10, 2))], 1).astype(np.float32)
    feeds = {"x": rng.standard_normal((2, 16, 20, 24)).astype(np.float32), "rois": rois,
             "batch": rng.integers(0, 2, 10).astype(np.int64)}
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"})
    assert list(compiled.get_property("EXECUTION_DEVICES")) == ["GPU.0"]
    np.testing.assert_allclose(compiled(feeds)[0], ort_run(model, feeds)[0], rtol=2e-2, atol=2e-2)


# --- normalizations ---------------------------------------------------------------------------


def test_mean_variance_normalization_of_a_3d_input_with_the_default_axes(core: ov.Core) -> None:
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])  # axes [0, 2, 3]
    model = make_model([node], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])], opset=17)
    feeds = {"x": np.random.default_rng(12).standard_normal((2, 3, 4)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_layer_normalization_whose_input_rank_inference_lost(core: ov.Core, axis: int) -> None:
    # The Reshape's target is a graph input: ONNX shape inference cannot say its output's rank.
    scale_shape = [8] if axis == -1 else [6, 8]
    rng = np.random.default_rng(13)
    weights = [numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), name)
               for name in ("g", "b")]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "g", "b"], ["y"], axis=axis)]
    model = make_model(nodes, [("x", F, [2, 6, 8]), ("shape", I64, [3])], [("y", F, ["A", "B", "C"])],
                       weights, opset=17)
    feeds = {"x": rng.standard_normal((2, 6, 8)).astype(np.float32), "shape": np.array([2, 6, 8], np.int64)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


# --- a dynamically quantized transformer ------------------------------------------------------


def test_dynamically_quantized_transformer_encoder(core: ov.Core, tmp_path: Any) -> None:
    """quantize_dynamic's DynamicQuantizeLinear + MatMulInteger chains through attention and MLP.

    ``reduce_range``: ONNX Runtime's own uint8 x int8 kernels on CPUs without VNNI
    saturate pair sums at int16 (its documented advice is 7-bit weights there); the
    GPU's sums are exact either way, and with 7-bit weights the two agree.
    """
    torch = pytest.importorskip("torch")
    quantization = pytest.importorskip("onnxruntime.quantization")
    from torch_export import export_onnx

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32)
            layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = torch.nn.Linear(32, 5)

        def forward(self, ids: Any) -> Any:
            return self.head(self.encoder(self.embed(ids)))

    torch.manual_seed(0)
    source, target = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(export_onnx(Encoder(), (torch.randint(0, 100, (2, 9)),), ["ids"]), source)
    quantization.quantize_dynamic(str(source), str(target), reduce_range=True)
    model = onnx.load(target)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    feeds = {"ids": np.random.default_rng(1).integers(0, 100, (2, 9)).astype(np.int64)}
    _assert_like_ort(core, model, feeds, atol=1e-4)


# --- discrete decisions under a reduced-precision hint ----------------------------------------


@pytest.mark.parametrize("hint", ["f16", "bf16"])
def test_non_max_suppression_keeps_the_same_boxes_under_a_reduced_precision_hint(core: ov.Core,
                                                                                 hint: str) -> None:
    rng = np.random.default_rng(5)
    corner = rng.uniform(0, 600, (1, 200, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(5, 80, (1, 200, 2))], -1).astype(np.float32)
    scores = rng.uniform(0, 1, (1, 3, 200)).astype(np.float32)
    limits = [numpy_helper.from_array(np.array(v, t), n) for n, v, t in
              [("most", [50], np.int64), ("iou", [0.3], np.float32), ("floor", [0.05], np.float32)]]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "most", "iou", "floor"], ["picked"])
    model = _named(make_model([node], [("boxes", F, [1, 200, 4]), ("scores", F, [1, 3, 200])],
                              [("picked", I64, ["K", 3])], limits, opset=11))
    feeds = {"boxes": boxes, "scores": scores}
    compiled = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": hint})
    np.testing.assert_array_equal(compiled(feeds)[0], ort_run(model, feeds)[0])
