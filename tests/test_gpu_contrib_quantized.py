"""ONNX Runtime's quantized contrib ops (domain ``com.microsoft``) on the GPU device: the element-wise,
pooling and quantization ops of :mod:`inferplex.devices.gpu.ops.contrib_quantized`, and whole models.

Each op runs alone on ``GPU.0`` (emulated on torch's CPU here; the ``gpu`` tests need CUDA) and is
compared with ONNX Runtime's CPU kernel running the same model, every op as written.  Integer
outputs agree exactly or within one quantization step (where ORT's vectorized kernels round a
float sum in another order).  Whole models come from ``onnxruntime.quantization``:
``quantize_static`` in the QOperator format, and QDQ with 16-bit activations or int4 weights
through the domain's own QuantizeLinear/DequantizeLinear.  They must run on ``GPU.0`` with no
HETERO split, every node listed by ``query_model``, and on the CPU device too.  The matmuls are in
``test_gpu_contrib_matmul.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from contrib_models import (
    F32,
    I8,
    MS,
    NUMPY,
    U8,
    Spec,
    assert_within_step,
    check,
    ms_model,
    param,
    qparams,
    random_ints,
    run_on_gpu,
)
from onnx import TensorProto, helper, numpy_helper
from quantized_models import ort_unfused, output_scale
from torch_export import export_onnx

import inferplex as ov
from inferplex.errors import UnsupportedOpError

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


# --- element-wise ops ---------------------------------------------------------------------


@pytest.mark.parametrize("elem", [U8, I8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_ops_with_broadcasting_match_onnx_runtime(core: ov.Core, op: str, elem: int) -> None:
    zero = 0 if elem == I8 else 128
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"]
    node = helper.make_node(op, names, ["c"], name="op", domain=MS)
    inits = [*qparams("a", 0.05, zero + 3, elem), *qparams("b", 0.031, zero - 7, elem),
             *qparams("c", 0.07 if op == "QLinearAdd" else 0.2, zero + 1, elem)]
    inputs: list[Spec] = [("a", elem, [2, 4, 5, 6]), ("b", elem, [1, 4, 1, 6])]
    model = ms_model([node], inputs, [("c", elem, None)], inits)
    check(core, model, {"a": random_ints((2, 4, 5, 6), elem, 1), "b": random_ints((1, 4, 1, 6), elem, 2)})


@pytest.mark.parametrize("elem", [U8, I8])
@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_unary_ops_over_every_input_value_match_onnx_runtime(core: ov.Core, op: str, elem: int) -> None:
    info = np.iinfo(NUMPY[elem])
    values = np.arange(info.min, info.max + 1).astype(NUMPY[elem]).reshape(1, 256)
    zero = 0 if elem == I8 else 128
    out_zero = (-128 if elem == I8 else 0) if op == "QLinearSigmoid" else zero
    attrs: dict[str, Any] = {"alpha": 0.13} if op == "QLinearLeakyRelu" else {}
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="op", domain=MS, **attrs)
    inits = [*qparams("x", 0.045, zero - 5, elem),
             *qparams("y", 1 / 255 if op == "QLinearSigmoid" else 0.03, out_zero, elem)]
    check(core, ms_model([node], [("x", elem, [1, 256])], [("y", elem, None)], inits), {"x": values})


@pytest.mark.parametrize(("opset", "axis", "shape"),
                         [(13, -1, (3, 5, 40)), (13, 1, (2, 6, 7)), (12, 1, (2, 3, 9))])
@pytest.mark.parametrize("elem", [U8, I8])
def test_softmax_matches_onnx_runtime(core: ov.Core, elem: int, opset: int, axis: int,
                                      shape: tuple[int, ...]) -> None:
    zero = 0 if elem == I8 else 128
    node = helper.make_node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="softmax",
                            domain=MS, opset=opset, axis=axis)
    inits = [*qparams("x", 0.06, zero + 2, elem), *qparams("y", 1 / 256, -128 if elem == I8 else 0, elem)]
    model = ms_model([node], [("x", elem, list(shape))], [("y", elem, None)], inits)
    check(core, model, {"x": random_ints(shape, elem, 5)})


@pytest.mark.parametrize("elem", [U8, I8])
def test_concat_requantizes_each_input(core: ov.Core, elem: int) -> None:
    zero = 0 if elem == I8 else 128
    names = ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z", "c", "y_s", "y_z"]
    node = helper.make_node("QLinearConcat", names, ["y"], name="concat", domain=MS, axis=1)
    inits = [*qparams("y", 0.05, zero, elem), *qparams("a", 0.02, zero + 9, elem),
             *qparams("b", 0.11, zero - 4, elem)]
    inputs = [("a", elem, [2, 3, 4]), ("b", elem, [2, 5, 4]), ("c", elem, [2, 1, 4])]
    feeds = {n: random_ints(tuple(s), elem, i) for i, (n, _, s) in enumerate(inputs)}
    check(core, ms_model([node], inputs, [("y", elem, None)], inits), feeds)


def test_where_requantizes_the_chosen_input(core: ov.Core) -> None:
    names = ["cond", "x", "x_s", "x_z", "y", "y_s", "y_z", "z_s", "z_z"]
    node = helper.make_node("QLinearWhere", names, ["z"], name="where", domain=MS)
    inits = [*qparams("x", 0.02, 120, U8), *qparams("y", 0.09, 131, U8), *qparams("z", 0.05, 128, U8)]
    inputs: list[Spec] = [("cond", TensorProto.BOOL, [4, 6]), ("x", U8, [4, 6]), ("y", U8, [1, 6])]
    feeds = {"cond": np.random.default_rng(0).random((4, 6)) > 0.5, "x": random_ints((4, 6), U8, 1),
             "y": random_ints((1, 6), U8, 2)}
    check(core, ms_model([node], inputs, [("z", U8, None)], inits), feeds)


# --- pooling and reduction --------------------------------------------------------------------


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("elem", [U8, I8])
def test_global_average_pool_matches_onnx_runtime(core: ov.Core, elem: int, channels_last: int) -> None:
    zero = 0 if elem == I8 else 128
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="gap",
                            domain=MS, channels_last=channels_last)
    inits = [*qparams("x", 0.04, zero + 6, elem), *qparams("y", 0.01, zero - 3, elem)]
    model = ms_model([node], [("x", elem, [2, 5, 7, 6])], [("y", elem, None)], inits)
    check(core, model, {"x": random_ints((2, 5, 7, 6), elem, 7)})


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0},
    {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1, "ceil_mode": 1, "strides": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [1, 1], "channels_last": 1},
])
def test_average_pool_matches_onnx_runtime(core: ov.Core, attrs: dict[str, Any]) -> None:
    node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="pool",
                            domain=MS, **attrs)
    inits = [*qparams("x", 0.03, 125, U8), *qparams("y", 0.025, 130, U8)]
    model = ms_model([node], [("x", U8, [2, 3, 9, 8])], [("y", U8, None)], inits)
    check(core, model, {"x": random_ints((2, 3, 9, 8), U8, 8)})


@pytest.mark.parametrize("channels_last", [0, 1])
def test_domain_qlinear_conv_matches_onnx_runtime(core: ov.Core, channels_last: int) -> None:
    """The domain's QLinearConv: channels-last data, per-channel weights, a bias, strides and pads."""
    rng = np.random.default_rng(2)
    names = ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "bias"]
    node = helper.make_node("QLinearConv", names, ["y"], name="conv", domain=MS, channels_last=channels_last,
                            kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[2, 1])
    weight = rng.integers(-60, 60, (6, 4, 3, 3), np.int8)
    inits = [*qparams("x", 0.03, 5, I8), numpy_helper.from_array(weight, "w"),
             param("w_s", rng.uniform(0.005, 0.02, 6)), param("w_z", np.zeros(6), np.int8),
             *qparams("y", 0.15, -3, I8), param("bias", rng.integers(-500, 500, 6), np.int32)]
    shape = [2, 7, 6, 4] if channels_last else [2, 4, 7, 6]
    model = ms_model([node], [("x", I8, shape)], [("y", I8, None)], inits)
    check(core, model, {"x": random_ints(tuple(shape), I8, 4)})


@pytest.mark.parametrize("elem", [U8, I8])
def test_nhwc_max_pool_matches_onnx_runtime(core: ov.Core, elem: int) -> None:
    node = helper.make_node("NhwcMaxPool", ["x"], ["y"], name="pool", domain=MS, kernel_shape=[3, 2],
                            strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)
    model = ms_model([node], [("x", elem, [2, 7, 6, 5])], [("y", elem, None)], [])
    check(core, model, {"x": random_ints((2, 7, 6, 5), elem, 3)}, steps=0)


def test_reduce_mean_matches_the_float_reduction(core: ov.Core) -> None:
    """ONNX Runtime's CPU provider has no QLinearReduceMean kernel: the reference is its spec,
    ``quantize(ReduceMean(dequantize(x)))``, in numpy."""
    node = helper.make_node("QLinearReduceMean", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="mean",
                            domain=MS, axes=[1, -1], keepdims=0)
    inits = [*qparams("x", 0.05, 128, U8), *qparams("y", 0.01, 120, U8)]
    model = ms_model([node], [("x", U8, [2, 3, 4, 5])], [("y", U8, None)], inits)
    x = random_ints((2, 3, 4, 5), U8, 9)
    mean = ((x.astype(np.float32) - 128) * np.float32(0.05)).mean(axis=(1, 3))
    expected = np.clip(np.round(mean / np.float32(0.01)) + 120, 0, 255).astype(np.uint8)
    assert_within_step(run_on_gpu(core, model, {"x": x})[0], expected)


@pytest.mark.parametrize("elem", [TensorProto.UINT16, TensorProto.INT16])
def test_domain_quantize_dequantize_16_bit(core: ov.Core, elem: int) -> None:
    """``UseQDQContribOps``' QuantizeLinear/DequantizeLinear pair, per tensor and per axis."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q", domain=MS),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", domain=MS),
             helper.make_node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], name="qc", domain=MS, axis=1),
             helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["yc"], name="dqc", domain=MS, axis=1)]
    middle = 0 if elem == TensorProto.INT16 else 32768
    inits = [param("s", 3e-4), param("z", middle + 11, NUMPY[elem]),
             param("sc", [1e-4, 5e-4, 2e-3]),
             param("zc", [middle, middle - 100, middle + 100], NUMPY[elem])]
    outputs: list[Spec] = [("q", elem, None), ("y", TensorProto.FLOAT, None), ("qc", elem, None),
               ("yc", TensorProto.FLOAT, None)]
    model = ms_model(nodes, [("x", TensorProto.FLOAT, [2, 3, 8])], outputs, inits)
    x = np.random.default_rng(2).standard_normal((2, 3, 8)).astype(np.float32) * 4
    check(core, model, {"x": x}, steps=0)


# --- whole models from ONNX Runtime's quantizer ------------------------------------------------------------


class _Cnn(torch.nn.Module):  # type: ignore[name-defined]
    """Conv, Relu, Sigmoid, LeakyRelu, Add, Mul, AveragePool, GlobalAveragePool, Concat, Gemm, Softmax:
    the ops the QOperator format writes as contrib ops."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: Any) -> Any:
        a = torch.relu(self.c1(x))
        b = torch.sigmoid(self.c2(a))
        c = nn.functional.leaky_relu(self.c3(a), 0.1)
        pooled = nn.functional.avg_pool2d((a + b) * c, 2)
        gap = nn.functional.adaptive_avg_pool2d
        g = torch.cat([gap(pooled, 1), gap(b, 1)], 1)
        return torch.softmax(self.fc(torch.flatten(g, 1)), -1)


class _Reader:
    def __init__(self, shape: tuple[int, ...]) -> None:
        rng = np.random.default_rng(1)
        self._batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _quantized_cnn(tmp_path: Any, **options: Any) -> onnx.ModelProto:
    torch.manual_seed(0)
    source, target = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    float_model = export_onnx(_Cnn().eval(), (torch.randn(2, 3, 8, 8),), ["x"], {"x": {0: "N"}}, opset=13)
    onnx.save(float_model, source)
    quantization.quantize_static(str(source), str(target), _Reader((2, 3, 8, 8)), **options)
    model = onnx.load(target)
    model.ir_version = 10
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return model


def test_qoperator_model_runs_whole_on_the_gpu(core: ov.Core, tmp_path: Any) -> None:
    model = _quantized_cnn(tmp_path, quant_format=quantization.QuantFormat.QOperator)
    contrib = {n.op_type for n in model.graph.node if n.domain == MS}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool",
            "QLinearGlobalAveragePool", "QLinearConcat", "QGemm", "QLinearSoftmax"} <= contrib
    # batch 3, not the calibration's 2: the batch dim is dynamic
    feeds = {"x": np.random.default_rng(5).standard_normal((3, 3, 8, 8)).astype(np.float32)}
    check(core, model, feeds)


def test_layout_optimized_qoperator_model_runs_whole_on_the_gpu(core: ov.Core, tmp_path: Any) -> None:
    """ONNX Runtime's full optimization saves QLinearConv in its own domain on channels-last data,
    between Transposes (per-channel weights here)."""
    import onnxruntime as ort

    model = _quantized_cnn(tmp_path, quant_format=quantization.QuantFormat.QOperator, per_channel=True)
    onnx.save(model, tmp_path / "qoperator.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(tmp_path / "qoperator.onnx"), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(tmp_path / "optimized.onnx")
    optimized.ir_version = 10
    for i, node in enumerate(optimized.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    if not any(n.domain == MS and n.op_type == "QLinearConv" for n in optimized.graph.node):
        pytest.skip("ONNX Runtime's layout optimizer left the convolutions in ONNX's domain on this CPU")
    feeds = {"x": np.random.default_rng(8).standard_normal((3, 3, 8, 8)).astype(np.float32)}
    check(core, optimized, feeds)


@pytest.mark.parametrize(("form", "engine"), [("QOperator", "ONNXRUNTIME"), ("QDQ16", "ONNXRUNTIME"),
                                            ("QDQ4", None)])
def test_quantized_models_run_on_the_cpu_device(core: ov.Core, tmp_path: Any, form: str,
                                                engine: str | None) -> None:
    """OpenVINO reads no QOperator contrib op (ONNX Runtime runs the model), and drops the rounding
    of 16-bit QuantizeLinear (the CPU device leaves those models to ONNX Runtime too); int4
    weights run on either engine, within one output step of ONNX Runtime."""
    types = quantization.QuantType
    options: dict[str, Any] = {"quant_format": quantization.QuantFormat.QOperator}
    if form != "QOperator":
        options = {"quant_format": quantization.QuantFormat.QDQ, "extra_options": {"UseQDQContribOps": True},
                   "activation_type": types.QUInt16 if form == "QDQ16" else types.QUInt8,
                   "weight_type": types.QUInt8 if form == "QDQ16" else types.QInt4}
    model = _quantized_cnn(tmp_path, **options)
    feeds = {"x": np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    compiled = core.compile_model(model, "CPU", F32)
    assert engine is None or compiled.get_property("ENGINE") == engine
    if form == "QDQ16":
        assert "16-bit QuantizeLinear" in compiled.get_property("ENGINE_FALLBACK_REASON")
    step = output_scale(model) * 1.001  # OpenVINO's int4 convolutions may land one output step apart
    np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), ort_unfused(model, feeds)[0],
                               atol=step if engine is None else 1e-6)


@pytest.mark.parametrize(("activations", "weights"), [("QUInt16", "QUInt8"), ("QInt16", "QInt8"),
                                                      ("QUInt8", "QInt4"), ("QUInt8", "QUInt4")])
def test_qdq_model_with_contrib_quantizers_runs_whole_on_the_gpu(core: ov.Core, tmp_path: Any,
                                                                 activations: str, weights: str) -> None:
    """``UseQDQContribOps``: 16-bit activations or 4-bit weights through the domain's own
    QuantizeLinear/DequantizeLinear.  ONNX's inference knows neither op: the GlobalAveragePool
    after one (a dynamic batch) still gets its input's rank, and runs on the GPU."""
    model = _quantized_cnn(tmp_path, quant_format=quantization.QuantFormat.QDQ,
                           activation_type=getattr(quantization.QuantType, activations),
                           weight_type=getattr(quantization.QuantType, weights),
                           extra_options={"UseQDQContribOps": True})
    assert any(n.domain == MS and n.op_type == "DequantizeLinear" for n in model.graph.node)
    feeds = {"x": np.random.default_rng(7).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    actual, expected = run_on_gpu(core, model, feeds)[0], ort_unfused(model, feeds)[0]
    np.testing.assert_allclose(actual, expected, atol=output_scale(model) * 1.001)  # one step at most


# --- what the device refuses -----------------------------------------------------------------------------


def test_per_channel_parameters_are_refused_by_name(core: ov.Core) -> None:
    """ORT takes per-tensor scales only: a per-channel one leaves the node to another device, and
    compiling on GPU.0 alone says which node and why."""
    node = helper.make_node("QLinearSigmoid", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="sigmoid",
                            domain=MS)
    inits = [param("x_s", [0.1, 0.2]), param("x_z", 128, np.uint8), *qparams("y", 1 / 255, 0, U8)]
    model = ms_model([node], [("x", U8, [2, 2])], [("y", U8, None)], inits)
    assert core.query_model(model, "GPU") == {}
    with pytest.raises(UnsupportedOpError, match=r"sigmoid.*2 values; accepted: one"):
        core.compile_model(model, "GPU.0", F32)


# --- on CUDA ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_qoperator_model_on_cuda_matches_onnx_runtime(tmp_path: Any) -> None:
    model = _quantized_cnn(tmp_path, quant_format=quantization.QuantFormat.QOperator)
    feeds = {"x": np.random.default_rng(5).standard_normal((32, 3, 8, 8)).astype(np.float32)}
    check(ov.Core(), model, feeds)
