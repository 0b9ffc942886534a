"""Real-model shapes of the GPU lowerings added for recurrent, quantized, detection, sampling,
control-flow and unsigned ops, on the emulated ``GPU.0`` through the public API.

Each model runs whole on ``GPU.0`` (``query_model`` must claim every node) and is
compared with raw ONNX Runtime on the same model.  Integer outputs must be equal;
float outputs match at rtol 1e-4 (recurrent layers accumulate over time steps).
Quantized models are compared with ONNX Runtime running each op as written
(graph optimizations off): its default QDQ fusions requantize once per fused
group instead of once per op, which is another computation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model, ort_run

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _run_on_gpu(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    supported = core.query_model(model, "GPU.0")
    assert set(supported) >= {n.name for n in model.graph.node if n.name}, "a node stays off the GPU"
    assert len(supported) == len(model.graph.node)
    compiled = core.compile_model(model, "GPU.0")
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(compiled.outputs))]


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return model


# --- recurrent layers exported from torch -------------------------------------------------


class _Tagger(nn.Module):
    """A CRNN-style head: bidirectional LSTM over features, GRU, then a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True)
        self.gru = nn.GRU(32, 12)
        self.head = nn.Linear(12, 5)

    def forward(self, x: Any) -> Any:
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(y).log_softmax(-1)


def test_lstm_gru_model_exported_from_torch_matches_onnx_runtime(core: ov.Core) -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 3, 8)
    model = export_onnx(_Tagger(), (x,), ["x"], {"x": {0: "T", 1: "N"}})
    assert {"LSTM", "GRU"} <= {n.op_type for n in model.graph.node}
    feeds = {"x": np.random.default_rng(1).standard_normal((9, 2, 8)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)


def _rnn_model(layout: int, weights: list[onnx.TensorProto], hidden: int, size: int) -> onnx.ModelProto:
    node = helper.make_node("RNN", ["x", "w", "r", "", "lens"], ["y", "h"], hidden_size=hidden,
                            direction="bidirectional", layout=layout, name="rnn")
    x, y, h = ([5, 2, size], [5, 2, 2, hidden], [2, 2, hidden]) if layout == 0 else \
        ([2, 5, size], [2, 5, 2, hidden], [2, 2, hidden])
    return make_model([node], [("x", TensorProto.FLOAT, x), ("lens", TensorProto.INT32, [2])],
                      [("y", TensorProto.FLOAT, y), ("h", TensorProto.FLOAT, h)], weights, opset=14)


def test_bidirectional_rnn_with_sequence_lengths_in_both_layouts(core: ov.Core) -> None:
    rng = np.random.default_rng(2)
    hidden, size = 4, 3
    weights = [numpy_helper.from_array(rng.standard_normal((2, hidden, size)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((2, hidden, hidden)).astype(np.float32), "r")]
    feeds = {"x": rng.standard_normal((5, 2, size)).astype(np.float32), "lens": np.array([5, 3], np.int32)}
    model = _rnn_model(0, weights, hidden, size)
    want = ort_run(model, feeds)
    for got, expected in zip(_run_on_gpu(core, model, feeds), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    # ONNX Runtime lacks the batch-first layout: it must give the same values, batch axis first.
    batch_first = {"x": feeds["x"].transpose(1, 0, 2), "lens": feeds["lens"]}
    y, h = _run_on_gpu(core, _rnn_model(1, weights, hidden, size), batch_first)
    np.testing.assert_allclose(y, want[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(h, want[1].transpose(1, 0, 2), rtol=1e-4, atol=1e-6)


# --- quantized models from onnxruntime.quantization --------------------------------------


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2),
                                  nn.ReLU(), nn.Flatten(), nn.Linear(8 * 7 * 7, 10))

    def forward(self, x: Any) -> Any:
        return self.body(x)


class _Reader:
    """Calibration data for quantize_static."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self._batches = iter([{"x": b} for b in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _quantized(tmp_path: Any, model: onnx.ModelProto, static: bool, **options: Any) -> onnx.ModelProto:
    quantization = pytest.importorskip("onnxruntime.quantization")
    source, target = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, source)
    if static:
        rng = np.random.default_rng(3)
        reader = _Reader([rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(4)])
        quantization.quantize_static(str(source), str(target), reader, **options)
    else:
        quantization.quantize_dynamic(str(source), str(target), **options)
    return _named(onnx.load(target))


@pytest.mark.parametrize("quant_format", ["QDQ", "QOperator"])
def test_statically_quantized_conv_net_matches_onnx_runtime(core: ov.Core, tmp_path: Any,
                                                            quant_format: str) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    torch.manual_seed(4)
    x = torch.randn(1, 3, 16, 16)
    float_model = export_onnx(_ConvNet(), (x,), ["x"], opset=13)
    # in the operator format the Linear layers quantize to com.microsoft's QGemm, the GPU's too
    model = _quantized(tmp_path, float_model, True,
                       quant_format=getattr(quantization.QuantFormat, quant_format))
    ops = {n.op_type for n in model.graph.node}
    assert ({"QuantizeLinear", "DequantizeLinear"} <= ops if quant_format == "QDQ"
            else {"QLinearConv", "QuantizeLinear", "QGemm"} <= ops)
    feeds = {"x": np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _ort_unfused(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    """ONNX Runtime running each quantized op as written (its QDQ fusions requantize differently)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_dynamically_quantized_matmul_model_matches_onnx_runtime(core: ov.Core, tmp_path: Any) -> None:
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array(rng.standard_normal((16, 24)).astype(np.float32), "w")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [("x", TensorProto.FLOAT, ["N", 16])], [("y", TensorProto.FLOAT, ["N", 24])],
                       [w], opset=13)
    model = _quantized(tmp_path, model, False)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    feeds = {"x": rng.standard_normal((5, 16)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_integer_matmul_is_exact_on_large_sums(core: ov.Core) -> None:
    rng = np.random.default_rng(7)
    k = 4096  # sums beyond float32's exact integers
    model = make_model([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"], name="mmi")],
                       [("a", TensorProto.UINT8, [3, k]), ("b", TensorProto.INT8, [k, 2]),
                        ("za", TensorProto.UINT8, []), ("zb", TensorProto.INT8, [])],
                       [("y", TensorProto.INT32, [3, 2])], opset=13)
    feeds = {"a": rng.integers(200, 256, (3, k), dtype=np.uint8),
             "b": rng.integers(-128, -100, (k, 2), np.int8),
             "za": np.array(3, np.uint8), "zb": np.array(5, np.int8)}
    (got,) = _run_on_gpu(core, model, feeds)
    want = (feeds["a"].astype(np.int64) - 3) @ (feeds["b"].astype(np.int64) - 5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a_type", [TensorProto.UINT8, TensorProto.INT8])
def test_integer_matmul_with_int8_weights_and_per_row_zero_points(core: ov.Core, a_type: int) -> None:
    rng = np.random.default_rng(15)
    a_dtype = np.uint8 if a_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(a_dtype)
    model = make_model([helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"], name="mmi")],
                       [("a", a_type, [24, 64]), ("b", TensorProto.INT8, [64, 16]), ("za", a_type, [24])],
                       [("y", TensorProto.INT32, [24, 16])], opset=13)
    feeds = {"a": rng.integers(info.min, info.max, (24, 64), endpoint=True).astype(a_dtype),
             "b": rng.integers(-128, 127, (64, 16), endpoint=True).astype(np.int8),
             "za": rng.integers(info.min, info.max, 24, endpoint=True).astype(a_dtype)}
    (got,) = _run_on_gpu(core, model, feeds)
    want = (feeds["a"].astype(np.int64) - feeds["za"].astype(np.int64)[:, None]) @ feeds["b"].astype(np.int64)
    np.testing.assert_array_equal(got, want)


# --- shapes inference loses, unsigned types, detection, sampling, control flow --------------


def test_layer_normalization_runs_when_the_input_rank_is_unknown(core: ov.Core) -> None:
    rng = np.random.default_rng(8)
    scale = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "scale")
    # A shape read from an input of unknown length: shape inference cannot tell the rank.
    nodes = [helper.make_node("Reshape", ["x", "dims"], ["folded"], name="fold"),
             helper.make_node("LayerNormalization", ["folded", "scale"], ["y"], name="ln")]
    model = make_model(nodes, [("x", TensorProto.FLOAT, [12]), ("dims", TensorProto.INT64, ["K"])],
                       [("y", TensorProto.FLOAT, [2, 6])], [scale])
    feeds = {"x": rng.standard_normal(12).astype(np.float32), "dims": np.array([2, 6], np.int64)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("elem", "dtype"),
                         [(TensorProto.UINT32, np.uint32), (TensorProto.UINT64, np.uint64)])
def test_unsigned_arithmetic_and_comparisons_are_exact_at_the_top_of_the_range(
        core: ov.Core, elem: int, dtype: Any) -> None:
    nodes = [helper.make_node(op, ["a", "b"], [out], name=out)
             for op, out in (("Add", "sum"), ("Div", "quotient"), ("Greater", "greater"), ("Max", "max"))]
    outputs = [("sum", elem, [4]), ("quotient", elem, [4]), ("greater", TensorProto.BOOL, [4]),
               ("max", elem, [4])]
    model = make_model(nodes, [("a", elem, [4]), ("b", elem, [4])], outputs, opset=14)
    top = np.iinfo(dtype).max
    feeds = {"a": np.array([top, top - 7, 5, 2**31 + 3], dtype=dtype),
             "b": np.array([3, top // 2 + 1, top, 1], dtype=dtype)}
    got = _run_on_gpu(core, model, feeds)
    want = [feeds["a"] + feeds["b"], feeds["a"] // feeds["b"], feeds["a"] > feeds["b"],
            np.maximum(feeds["a"], feeds["b"])]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("elem", [TensorProto.UINT16, TensorProto.UINT64, TensorProto.FLOAT8E4M3FN])
def test_view_ops_move_the_types_torch_barely_computes(core: ov.Core, elem: int) -> None:
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    consts = [numpy_helper.from_array(np.array([3, 4], np.int64), "dims"),
              numpy_helper.from_array(np.array([0], np.int64), "axes")]
    nodes = [helper.make_node("Reshape", ["x", "dims"], ["matrix"], name="reshape"),
             helper.make_node("Transpose", ["matrix"], ["turned"], name="transpose"),
             helper.make_node("Unsqueeze", ["turned", "axes"], ["batched"], name="unsqueeze"),
             helper.make_node("Identity", ["batched"], ["y"], name="same")]
    model = make_model(nodes, [("x", elem, [12])], [("y", elem, [1, 4, 3])], consts, opset=21)
    x = (np.arange(12) * 3).astype(dtype)
    (got,) = _run_on_gpu(core, model, {"x": x})
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint8), x.reshape(3, 4).T[None].copy().view(np.uint8))


def test_non_max_suppression_matches_onnx_runtime(core: ov.Core) -> None:
    rng = np.random.default_rng(9)
    corners = rng.uniform(0, 10, (2, 30, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners.min(2), corners.max(2) + 1], axis=-1).reshape(2, 30, 4)
    limits = [numpy_helper.from_array(np.array([5], np.int64), "limit"),
              numpy_helper.from_array(np.array([0.3], np.float32), "iou"),
              numpy_helper.from_array(np.array([0.2], np.float32), "floor")]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "floor"], ["picked"],
                            name="nms")
    model = make_model([node], [("boxes", TensorProto.FLOAT, [2, 30, 4]),
                                ("scores", TensorProto.FLOAT, [2, 3, 30])],
                       [("picked", TensorProto.INT64, ["K", 3])], limits, opset=11)
    feeds = {"boxes": boxes, "scores": rng.uniform(0, 1, (2, 3, 30)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_array_equal(got, ort_run(model, feeds)[0])


def test_deformable_detr_style_grid_sample_matches_onnx_runtime(core: ov.Core) -> None:
    rng = np.random.default_rng(10)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="zeros",
                            align_corners=0, name="sample")
    model = make_model([node], [("x", TensorProto.FLOAT, [2, 8, 12, 16]),
                                ("grid", TensorProto.FLOAT, [2, 5, 7, 2])],
                       [("y", TensorProto.FLOAT, [2, 8, 5, 7])], opset=20)
    feeds = {"x": rng.standard_normal((2, 8, 12, 16)).astype(np.float32),
             "grid": rng.uniform(-1.1, 1.1, (2, 5, 7, 2)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_if_branches_read_values_of_the_enclosing_graph(core: ov.Core) -> None:
    then_graph = helper.make_graph([helper.make_node("Mul", ["doubled", "x"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Add", ["x", "x"], ["doubled"], name="double"),
             helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0, name="total"),
             helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
             helper.make_node("If", ["positive"], ["y"], then_branch=then_graph, else_branch=else_graph,
                              name="branch")]
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    model = make_model(nodes, [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])], [zero])
    for values in ([1.0, 2.0, -0.5], [-1.0, 0.5, -3.0]):
        feeds = {"x": np.array(values, np.float32)}
        (got,) = _run_on_gpu(core, model, feeds)
        np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-6)


def _unpool_model(extra_nodes: list[onnx.NodeProto], outputs: list[Any]) -> onnx.ModelProto:
    """MaxUnpool after a Relu, then ``extra_nodes``: the GPU refuses the MaxUnpool, whose output_shape
    is a model input (ONNX's reference and ONNX Runtime differ where it is not the inferred shape)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MaxUnpool", ["r", "where", "shape"], ["unpooled"], kernel_shape=[2, 2],
                              strides=[2, 2], name="unpool"), *extra_nodes]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, 1, 2, 2]),
                              ("where", TensorProto.INT64, [1, 1, 2, 2]),
                              ("shape", TensorProto.INT64, [4]),
                              ("flag", TensorProto.BOOL, [])], outputs, opset=19)


def _unpool_feeds(rng: np.random.Generator, flag: bool) -> dict[str, np.ndarray]:
    where = np.array([0, 3, 9, 14], np.int64).reshape(1, 1, 2, 2)  # one position in each 2x2 window
    return {"x": rng.standard_normal((1, 1, 2, 2)).astype(np.float32), "where": where,
            "shape": np.array([1, 1, 4, 4], np.int64), "flag": np.array(flag)}


def test_if_with_a_constant_condition_takes_its_branch(core: ov.Core) -> None:
    then_graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    else_graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    flag = numpy_helper.from_array(np.array(False), "flag")
    node = helper.make_node("If", ["flag"], ["y"], then_branch=then_graph, else_branch=else_graph,
                            name="branch")
    model = make_model([node], [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])], [flag])
    feeds = {"x": np.random.default_rng(16).standard_normal((2, 3)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-6)


def test_refused_op_names_its_reason_and_runs_on_hetero(core: ov.Core) -> None:
    rng = np.random.default_rng(11)
    model = _unpool_model([helper.make_node("Identity", ["unpooled"], ["y"], name="same")],
                          [("y", TensorProto.FLOAT, [1, 1, 4, 4])])
    assert set(core.query_model(model, "GPU.0")) == {"relu", "same"}
    with pytest.raises(ov.errors.UnsupportedOpError, match="MaxUnpool with an output_shape not known"):
        core.compile_model(model, "GPU.0")
    feeds = _unpool_feeds(rng, True)
    got = core.compile_model(model, "HETERO:GPU.0,CPU")(feeds)[0]
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-6)


def test_if_on_the_gpu_reads_a_value_made_on_the_cpu_under_hetero(core: ov.Core) -> None:
    rng = np.random.default_rng(12)
    then_graph = helper.make_graph([helper.make_node("Relu", ["unpooled"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 1, 4, 4])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["unpooled"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 1, 4, 4])])
    branch = helper.make_node("If", ["flag"], ["y"], then_branch=then_graph, else_branch=else_graph,
                              name="branch")
    model = _unpool_model([branch], [("y", TensorProto.FLOAT, [1, 1, 4, 4])])
    assert "branch" in core.query_model(model, "GPU.0")
    compiled = core.compile_model(model, "HETERO:GPU.0,CPU")
    for flag in (True, False):
        feeds = _unpool_feeds(rng, flag)
        np.testing.assert_allclose(compiled(feeds)[0], ort_run(model, feeds)[0], rtol=1e-6)


def test_deformable_convolution_with_mask_and_groups_matches_onnx_runtime(core: ov.Core) -> None:
    rng = np.random.default_rng(13)
    weight = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    node = helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"], kernel_shape=[3, 3],
                            pads=[1, 1, 1, 1], group=2, offset_group=2, name="dcn")
    model = make_model([node], [("x", TensorProto.FLOAT, [2, 4, 6, 5]),
                                ("offset", TensorProto.FLOAT, [2, 36, 6, 5]),
                                ("mask", TensorProto.FLOAT, [2, 18, 6, 5])],
                       [("y", TensorProto.FLOAT, [2, 4, 6, 5])], [weight, bias], opset=19)
    feeds = {"x": rng.standard_normal((2, 4, 6, 5)).astype(np.float32),
             "offset": rng.uniform(-2, 2, (2, 36, 6, 5)).astype(np.float32),
             "mask": rng.uniform(0, 1, (2, 18, 6, 5)).astype(np.float32)}
    (got,) = _run_on_gpu(core, model, feeds)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_audio_front_end_window_and_stft_match_numpy(core: ov.Core) -> None:
    frame, step = 16, 4
    length = numpy_helper.from_array(np.array(frame, np.int64), "length")
    hop = numpy_helper.from_array(np.array(step, np.int64), "hop")
    nodes = [helper.make_node("HannWindow", ["length"], ["window"], name="hann"),
             helper.make_node("STFT", ["signal", "hop", "window"], ["spectrum"], name="stft")]
    bins, frames = frame // 2 + 1, 1 + (64 - frame) // step
    model = make_model(nodes, [("signal", TensorProto.FLOAT, [2, 64, 1])],
                       [("spectrum", TensorProto.FLOAT, [2, frames, bins, 2])], [length, hop])
    signal = np.random.default_rng(14).standard_normal((2, 64, 1)).astype(np.float32)
    (got,) = _run_on_gpu(core, model, {"signal": signal})
    window = np.sin(np.pi * np.arange(frame) / frame) ** 2  # periodic Hann, ONNX's default
    starts = np.arange(frames) * step
    pieces = np.stack([signal[:, s:s + frame, 0] * window for s in starts], axis=1)
    want = np.fft.rfft(pieces, axis=-1)
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], axis=-1), rtol=1e-4, atol=1e-4)
