"""QDQ and dynamically quantized models on the GPU device, through the public API.

A MatMul or Gemm of two DequantizeLinear outputs (``quantize_static`` with the QDQ
format) runs as one int8 matmul; every other QuantizeLinear -> DequantizeLinear pair
(the activations before a QDQ model's convolutions) runs as one fake-quantize call,
recorded as FakeQuantize under the DequantizeLinear's name, and the weights'
DequantizeLinear nodes fold at compile time.  Results are compared with ONNX Runtime running
each op as written (graph optimizations off: its QDQ fusions requantize
differently); the fusion is seen in the profiling records, where the activations'
QuantizeLinear and DequantizeLinear nodes no longer run.  Models it must not fuse (a weight computed
at run time, a weight zero point other than 0) stay right.

Dynamically quantized models are compared with ONNX Runtime on weights quantized
with ``reduce_range`` (7 bits): on x86 without VNNI its uint8 x int8 kernel
saturates 16-bit pair sums of full-range weights, which the exact int32 sums here
do not.  The emulated tests run on ``GPU.0`` on torch's CPU; the ``gpu`` ones need CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
nn = torch.nn
_PROFILED = {"ENABLE_PROFILING": True}


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


class _Reader:
    """Calibration batches for quantize_static."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self._batches = iter([{"x": b} for b in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _mlp(features: int = 64, hidden: int = 96, out: int = 32) -> onnx.ModelProto:
    torch.manual_seed(11)
    net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                        nn.Linear(hidden, out))
    return export_onnx(net, (torch.randn(4, features),), ["x"], {"x": {0: "N"}}, opset=13)


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return model


def _quantized(tmp_path: Any, model: onnx.ModelProto, static: bool, **options: Any) -> onnx.ModelProto:
    source, target = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, source)
    if static:
        rng = np.random.default_rng(3)
        shape = [d.dim_value or 8 for d in model.graph.input[0].type.tensor_type.shape.dim]
        reader = _Reader([rng.standard_normal(shape).astype(np.float32) for _ in range(4)])
        quantization.quantize_static(str(source), str(target), reader,
                                     quant_format=quantization.QuantFormat.QDQ, **options)
    else:
        quantization.quantize_dynamic(str(source), str(target), **options)
    return _named(onnx.load(target))


def _ort_unfused(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _run(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any],
         config: dict[str, Any] | None = None) -> tuple[np.ndarray, set[str]]:
    """The first output on GPU.0 and the names of the nodes that ran (profiling records)."""
    result, records = _profiled(core, model, feeds, config)
    return result, {name for name, kind in records.items() if kind != "constant folded"}


def _profiled(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any],
              config: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, str]]:
    """The first output on GPU.0 and, by node name, each profiling record's node type (its exec
    type for nodes folded at compile time)."""
    compiled = core.compile_model(model, "GPU.0", {**_PROFILED, **(config or {})})
    request = compiled.create_infer_request()
    result = np.asarray(request.infer(feeds)[0])
    records = {r.node_name: r.exec_type if r.exec_type == "constant folded" else r.node_type
               for r in request.get_profiling_info()}
    return result, records


def _activation_dequantizers(model: onnx.ModelProto) -> set[str]:
    """DequantizeLinear nodes of run-time data that feed a Gemm (those the fusion absorbs)."""
    constants = {i.name for i in model.graph.initializer}
    gemm_inputs = {i for n in model.graph.node if n.op_type == "Gemm" for i in n.input}
    return {n.name for n in model.graph.node if n.op_type == "DequantizeLinear"
            and n.input[0] not in constants and n.output[0] in gemm_inputs}


def _output_scale(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that makes the graph output (one quantization step)."""
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    scale = next(i for i in model.graph.initializer if i.name == last.input[1])
    return float(numpy_helper.to_array(scale).reshape(-1)[0])


@pytest.mark.parametrize(("per_channel", "activation"),
                         [(False, "QUInt8"), (True, "QUInt8"), (True, "QInt8")])
def test_static_qdq_mlp_matches_onnx_runtime_and_runs_fused(core: ov.Core, tmp_path: Any,
                                                            per_channel: bool, activation: str) -> None:
    model = _quantized(tmp_path, _mlp(), True, per_channel=per_channel,
                       activation_type=getattr(quantization.QuantType, activation))
    feeds = {"x": np.random.default_rng(5).standard_normal((40, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    step = _output_scale(model)
    # Outputs are requantized: a float32 rounding on either side of a rounding boundary moves a
    # value by one step, rarely.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    assert np.mean(got != want) < 0.02
    gemms = {n.name for n in model.graph.node if n.op_type == "Gemm"}
    assert len(gemms) == 3 and gemms <= ran
    activations = _activation_dequantizers(model)
    assert len(activations) == 3 and not activations & ran
    # the QuantizeLinear before each of them runs inside the Gemm's call too; the output's pair
    # runs as one fake-quantize call, recorded under its DequantizeLinear's name
    quantizers = {n.name for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert len(quantizers) == 4 and not quantizers & ran and "y_DequantizeLinear" in ran


def _qdq_matmul_model(weight: np.ndarray, weight_zero: int, bias: bool, constant_weight: bool = True,
                      data_type: int = TensorProto.UINT8) -> onnx.ModelProto:
    """Q -> DQ of a 3-D input, DQ of an int8 weight (constant or fed), MatMul, optional bias Add."""
    k, n = weight.shape
    zero_type = np.uint8 if data_type == TensorProto.UINT8 else np.int8
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "sa"),
             numpy_helper.from_array(np.array(7, zero_type), "za"),
             numpy_helper.from_array(np.linspace(0.01, 0.02, n, dtype=np.float32), "sw"),
             numpy_helper.from_array(np.full(n, weight_zero, np.int8), "zw"),
             numpy_helper.from_array(np.linspace(-1, 1, n, dtype=np.float32), "b")]
    inputs = [("x", TensorProto.FLOAT, [2, "S", k])]
    if constant_weight:
        inits.append(numpy_helper.from_array(weight, "wq"))
    else:
        inputs.append(("wq", TensorProto.INT8, [k, n]))
    nodes = [helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], name="dqw", axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["mm" if bias else "y"], name="mm")]
    if bias:
        nodes.append(helper.make_node("Add", ["b", "mm"], ["y"], name="bias"))
    return make_model(nodes, inputs, [("y", TensorProto.FLOAT, [2, "S", n])], inits, opset=13)


def _matmul_feeds(weight: np.ndarray, rows: int, fed_weight: bool) -> dict[str, np.ndarray]:
    feeds = {"x": np.random.default_rng(9).standard_normal((2, rows, weight.shape[0])).astype(np.float32)}
    return {**feeds, "wq": weight} if fed_weight else feeds


@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
@pytest.mark.parametrize("bias", [False, True])
def test_qdq_matmul_with_bias_fuses_and_matches_onnx_runtime(core: ov.Core, data_type: int,
                                                            bias: bool) -> None:
    weight = np.random.default_rng(8).integers(-128, 128, (256, 24), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, bias, data_type=data_type)
    feeds = _matmul_feeds(weight, 5, False)
    got, ran = _run(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert "mm" in ran and not {"qx", "dqx", "bias"} & ran


@pytest.mark.parametrize(("weight_zero", "constant_weight"), [(3, True), (0, False)])
def test_qdq_matmul_that_must_not_fuse_still_matches(core: ov.Core, weight_zero: int,
                                                     constant_weight: bool) -> None:
    weight = np.random.default_rng(10).integers(-100, 100, (64, 16), dtype=np.int8)
    model = _qdq_matmul_model(weight, weight_zero, True, constant_weight)
    feeds = _matmul_feeds(weight, 3, not constant_weight)
    got, records = _profiled(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # the activation is quantized and dequantized (as one call) and the MatMul runs in float
    assert records["dqx"] == "FakeQuantize" and "qx" not in records


def test_dequantized_activation_read_elsewhere_keeps_its_value(core: ov.Core) -> None:
    weight = np.random.default_rng(17).integers(-128, 128, (32, 8), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, False)
    model.graph.output.append(helper.make_tensor_value_info("xd", TensorProto.FLOAT, [2, "S", 32]))
    feeds = _matmul_feeds(weight, 4, False)
    compiled = core.compile_model(model, "GPU.0")
    results = compiled(feeds)
    want = _ort_unfused(model, feeds)
    np.testing.assert_allclose(np.asarray(results[0]), want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(results[1]), want[1])
    _, ran = _run(core, model, feeds)
    assert {"qx", "dqx"} <= ran


def test_qdq_matmul_depth_not_multiple_of_8_is_not_fused(core: ov.Core) -> None:
    weight = np.random.default_rng(12).integers(-128, 128, (20, 16), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, False)
    feeds = _matmul_feeds(weight, 4, False)
    got, ran = _run(core, model, feeds)
    np.testing.assert_allclose(got, _ort_unfused(model, feeds)[0], rtol=1e-5, atol=1e-4)
    assert "dqx" in ran


@pytest.mark.parametrize(("trans_b", "alpha", "fused"), [(0, 1.0, True), (1, 1.0, True), (1, 0.5, False)])
def test_qdq_gemm_fuses_where_it_is_a_plain_product(core: ov.Core, trans_b: int, alpha: float,
                                                    fused: bool) -> None:
    rng = np.random.default_rng(16)
    weight = rng.integers(-128, 128, (16, 32) if trans_b else (32, 16), dtype=np.int8)
    inits = [numpy_helper.from_array(np.array(0.04, np.float32), "sa"),
             numpy_helper.from_array(np.array(120, np.uint8), "za"),
             numpy_helper.from_array(np.array(0.003, np.float32), "sw"),
             numpy_helper.from_array(weight, "wq"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "c")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "sw"], ["wd"], name="dqw"),
             helper.make_node("Gemm", ["xd", "wd", "c"], ["y"], name="gemm", transB=trans_b, alpha=alpha)]
    model = make_model(nodes, [("x", TensorProto.FLOAT, ["N", 32])], [("y", TensorProto.FLOAT, ["N", 16])],
                       inits, opset=13)
    feeds = {"x": rng.standard_normal((20, 32)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    np.testing.assert_allclose(got, _ort_unfused(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert "gemm" in ran and ("dqx" not in ran) == fused


def test_qdq_model_loaded_from_the_cache_runs_fused_with_the_same_results(core: ov.Core,
                                                                           tmp_path: Any) -> None:
    model = _quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(18).standard_normal((16, 64)).astype(np.float32)}
    config = {**_PROFILED, "CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        compiled = core.compile_model(model, "GPU.0", config)
        request = compiled.create_infer_request()
        runs.append((np.asarray(request.infer(feeds)[0]), {r.node_name for r in request.get_profiling_info()},
                     compiled.get_property("LOADED_FROM_CACHE")))
    (cold, _, cold_cached), (warm, warm_ran, warm_cached) = runs
    assert not cold_cached and warm_cached
    np.testing.assert_array_equal(warm, cold)
    assert not _activation_dequantizers(model) & warm_ran and {"/0/Gemm", "/2/Gemm", "/4/Gemm"} <= warm_ran


def test_static_qdq_mlp_under_f16_hint_stays_close(core: ov.Core, tmp_path: Any) -> None:
    model = _quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(6).standard_normal((32, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = _ort_unfused(model, feeds)
    step = _output_scale(model)
    # float16 values between the layers move some requantized values by a step or two.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
    assert np.abs(got - want).mean() < step / 2
    assert not _activation_dequantizers(model) & ran


@pytest.mark.parametrize(("hidden", "fused"), [(96, True), (20, False)])
def test_dynamic_quantized_mlp_matches_onnx_runtime(core: ov.Core, tmp_path: Any, hidden: int,
                                                    fused: bool) -> None:
    model = _quantized(tmp_path, _mlp(hidden=hidden), False, reduce_range=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulInteger") == 3 and "DynamicQuantizeLinear" in ops
    feeds = {"x": np.random.default_rng(7).standard_normal((24, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    matmuls = {n.name for n in model.graph.node if n.op_type == "MatMulInteger"}
    after = {n.name for n in model.graph.node if n.op_type in ("Cast", "Add")}
    assert matmuls <= ran
    # The Cast, scale Mul and bias Add after each MatMulInteger join its call where K and N allow
    # (a hidden width of 20 is no multiple of 8: every layer reads or writes it and stays as written).
    assert len(after) == 6 and (not after & ran if fused else after <= ran)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("rows", [1, 8, 9, 32])  # 2 x rows: below and above the kernel's 16
def test_qdq_matmul_on_cuda_matches_onnx_runtime_at_any_row_count(tmp_path: Any, rows: int) -> None:
    weight = np.random.default_rng(13).integers(-128, 128, (512, 64), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, True)
    feeds = {"x": np.random.default_rng(14).standard_normal((2, rows, 512)).astype(np.float32)}
    got, ran = _run(ov.Core(), model, feeds)
    (want,) = _ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert "dqx" not in ran


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_static_qdq_mlp_on_cuda_matches_onnx_runtime(tmp_path: Any) -> None:
    model = _quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(15).standard_normal((256, 64)).astype(np.float32)}
    (want,) = _ort_unfused(model, feeds)
    compiled = ov.Core().compile_model(model, "GPU.0")  # not profiled: CUDA graphs replay the calls
    for _ in range(3):
        got = np.asarray(compiled(feeds)[0])
        np.testing.assert_allclose(got, want, rtol=0, atol=_output_scale(model) * 1.01)


# --- QDQ convolutions: activations fake-quantized in one call, weights folded ---------------


def _cnn() -> onnx.ModelProto:
    """Conv-BN-ReLU, a residual block, max pool, a strided 1x1 Conv, global pool and a Linear head."""
    torch.manual_seed(12)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
            self.body = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
            self.down = nn.Conv2d(16, 24, 1, stride=2)
            self.head = nn.Linear(24, 10)

        def forward(self, x: Any) -> Any:
            y = self.stem(x)
            y = torch.nn.functional.max_pool2d(torch.relu(self.body(y) + y), 2)
            return self.head(torch.relu(self.down(y)).mean((2, 3)))

    net = Net()
    with torch.no_grad():  # running statistics that are not the identity
        for bn in (net.stem[1], net.body[1]):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
    return export_onnx(net, (torch.randn(2, 3, 12, 12),), ["x"], {"x": {0: "N"}}, opset=13)


def _cnn_feeds(seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((2, 3, 12, 12)).astype(np.float32)}


def _check_cnn_fused(model: onnx.ModelProto, records: dict[str, str]) -> None:
    """Every QuantizeLinear ran inside a fake-quantize call (recorded as its DequantizeLinear), every
    weight's DequantizeLinear was folded at compile time, and the Convs ran."""
    constants = {i.name for i in model.graph.initializer}
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    pairs = [n.name for n in model.graph.node if n.op_type == "DequantizeLinear"
             and n.input[0] in {q.output[0] for q in quantizers}]
    weights = [n.name for n in model.graph.node
               if n.op_type == "DequantizeLinear" and n.input[0] in constants]
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    assert len(quantizers) >= 5 and len(convs) == 3 and len(weights) >= 6
    assert not {q.name for q in quantizers} & set(records)
    # the head's Gemm quantizes its own input (an int8 matmul): the other pairs run as FakeQuantize
    assert sum(records.get(name) == "FakeQuantize" for name in pairs) >= len(quantizers) - 1
    assert all(records[name] == "constant folded" for name in weights)
    assert all(records[name] == "Conv" for name in convs)


@pytest.mark.parametrize(("per_channel", "activation"),
                         [(True, "QUInt8"), (False, "QUInt8"), (True, "QInt8")])
def test_static_qdq_cnn_matches_onnx_runtime_and_runs_fused(core: ov.Core, tmp_path: Any,
                                                            per_channel: bool, activation: str) -> None:
    model = _quantized(tmp_path, _cnn(), True, per_channel=per_channel,
                       activation_type=getattr(quantization.QuantType, activation))
    feeds = _cnn_feeds(21)
    got, records = _profiled(core, model, feeds)
    (want,) = _ort_unfused(model, feeds)
    step = _output_scale(model)
    # float32 convolutions may sum in another order than ONNX Runtime's: an intermediate value on
    # a rounding boundary would move by one step, rarely, and the output with it.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    assert np.mean(got != want) < 0.02
    _check_cnn_fused(model, records)


def test_static_qdq_cnn_under_f16_hint_stays_close(core: ov.Core, tmp_path: Any) -> None:
    model = _quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(22)
    got, records = _profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = _ort_unfused(model, feeds)
    step = _output_scale(model)
    # f16 activations and weights move some quantized values by a step; the output is handed
    # out from f16 as well.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
    assert np.abs(got - want).mean() < step / 2
    _check_cnn_fused(model, records)


def test_static_qdq_cnn_loaded_from_the_cache_runs_fused(core: ov.Core, tmp_path: Any) -> None:
    model = _quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(23)
    config = {**_PROFILED, "CACHE_DIR": str(tmp_path / "cache")}
    cold, _ = _profiled(core, model, feeds, config)
    warm, records = _profiled(core, model, feeds, config)
    assert core.compile_model(model, "GPU.0", config).get_property("LOADED_FROM_CACHE")
    np.testing.assert_array_equal(warm, cold)
    quantizers = {n.name for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert not quantizers & set(records) and list(records.values()).count("FakeQuantize") >= 4


def _pair_model(data_type: int, scales: tuple[float, float], readers: int) -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> Relu, the quantized data also a graph output
    when ``readers`` is 2; the two nodes' scales may differ."""
    zero_type = np.uint8 if data_type == TensorProto.UINT8 else np.int8
    inits = [numpy_helper.from_array(np.array(scales[0], np.float32), "sq"),
             numpy_helper.from_array(np.array(scales[1], np.float32), "sd"),
             numpy_helper.from_array(np.array(3, zero_type), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sq", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "sd", "z"], ["xd"], name="dq"),
             helper.make_node("Relu", ["xd"], ["y"], name="relu")]
    outputs = [("y", TensorProto.FLOAT, ["N", 8])] + ([("xq", data_type, ["N", 8])] if readers == 2 else [])
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 8])], outputs, inits, opset=13)


def _pair_feeds(scale: float) -> dict[str, np.ndarray]:
    """Random values, exact halves of the scale (ties), and values far beyond the 8-bit range."""
    rng = np.random.default_rng(19)
    ties = (np.arange(-40, 40, dtype=np.float32) + 0.5) * np.float32(scale)
    wide = np.array([-1e3, -300, -129.5, 127.5, 255.5, 256.5, 300, 1e3], np.float32) * np.float32(scale)
    data = np.concatenate([rng.standard_normal(72).astype(np.float32), ties, wide])
    return {"x": data.reshape(-1, 8)}


def _check_pair_exact(core: ov.Core, data_type: int, precision: str) -> None:
    """The fused pair gives ONNX Runtime's values to the bit: at ties and saturation under either
    precision (a power-of-two scale, whose halves f16 holds exactly), and for any scale at f32."""
    config = {"INFERENCE_PRECISION_HINT": precision}
    scale = 0.0625  # a power of two: x / scale is exact, so the halves are exact ties
    model = _pair_model(data_type, (scale, scale), 1)
    feeds = _pair_feeds(scale)
    got, records = _profiled(core, model, feeds, config)
    np.testing.assert_array_equal(got, _ort_unfused(model, feeds)[0])
    assert records["dq"] == "FakeQuantize" and "q" not in records
    if precision == "f32":
        model = _pair_model(data_type, (0.0237, 0.0237), 1)
        feeds = {"x": np.random.default_rng(20).standard_normal((4096, 8)).astype(np.float32) * 2}
        np.testing.assert_array_equal(_profiled(core, model, feeds, config)[0], _ort_unfused(model, feeds)[0])


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_quantize_dequantize_pair_is_exact_at_ties_and_saturation(core: ov.Core, data_type: int,
                                                                  precision: str) -> None:
    _check_pair_exact(core, data_type, precision)


@pytest.mark.parametrize(("scales", "readers"), [((0.05, 0.05), 2), ((0.05, 0.04), 1)])
def test_quantize_dequantize_pair_that_must_not_fuse_still_matches(core: ov.Core,
                                                                   scales: tuple[float, float],
                                                                   readers: int) -> None:
    model = _pair_model(TensorProto.UINT8, scales, readers)
    feeds = _pair_feeds(0.05)
    compiled = core.compile_model(model, "GPU.0", _PROFILED)
    request = compiled.create_infer_request()
    results = request.infer(feeds)
    for got, want in zip([np.asarray(results[i]) for i in range(readers)], _ort_unfused(model, feeds),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    records = {r.node_name: r.node_type for r in request.get_profiling_info()}
    assert records["q"] == "QuantizeLinear" and records["dq"] == "DequantizeLinear"


def _conv_integer_model(weight: np.ndarray) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(131, np.uint8), "zx")]
    nodes = [helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    return make_model(nodes, [("x", TensorProto.UINT8, ["N", weight.shape[1], 9, 9])],
                      [("y", TensorProto.INT32, ["N", weight.shape[0], 9, 9])], inits, opset=13)


def test_conv_integer_sums_exactly(core: ov.Core) -> None:
    # 32 x 3 x 3 products of up to 124 x 255: sums near 2**23, beyond what float16 or TF32 hold
    rng = np.random.default_rng(24)
    weight = rng.integers(0, 256, (8, 32, 3, 3), dtype=np.uint8)
    model = _conv_integer_model(weight)
    feeds = {"x": rng.integers(0, 256, (2, 32, 9, 9), dtype=np.uint8)}
    feeds["x"][0] = 255  # every product of the first item at its largest
    compiled = core.compile_model(model, "GPU.0")
    got = np.asarray(compiled(feeds)[0])
    want = _ort_unfused(model, feeds)[0]
    assert got.dtype == np.int32 and np.abs(want).max() < 2**24
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamic_quantized_cnn_matches_onnx_runtime(core: ov.Core, tmp_path: Any, precision: str) -> None:
    model = _quantized(tmp_path, _cnn(), False, reduce_range=True)
    convs = [n.name for n in model.graph.node if n.op_type == "ConvInteger"]
    nodes = model.graph.node
    sums = {o for n in nodes if n.op_type == "ConvInteger" for o in n.output}
    casts = {n.output[0]: n.name for n in nodes if n.op_type == "Cast" and n.input[0] in sums}
    scaled = {o for n in nodes if n.op_type == "Mul" and set(n.input) & set(casts) for o in n.output}
    chains = {*casts.values(), *(n.name for n in nodes if n.op_type == "Add" and set(n.input) & scaled)}
    assert len(convs) == 3 and len(chains) == 6
    feeds = _cnn_feeds(25)
    got, records = _profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    want = _ort_unfused(model, feeds)[0]
    if precision == "f32":  # integer sums, then the Cast, Mul and Add's float32 arithmetic
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:  # f16 activations quantize on a slightly different scale, and each sum rounds to f16
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-2 * np.abs(want).max())
    # each ConvInteger's Cast, scale Mul and bias Add run inside its call
    assert all(records[name] == "ConvInteger" for name in convs) and not chains & set(records)


def _conv_integer_chain(weight: np.ndarray, weight_zero: np.ndarray | None) -> onnx.ModelProto:
    """DynamicQuantizeLinear, ConvInteger (zero points of both), Cast, Mul by the scales' product,
    Add of a per-channel bias: ``quantize_dynamic``'s Conv written out."""
    channels = weight.shape[0]
    bias = np.linspace(-1, 1, channels, dtype=np.float32).reshape(1, -1, 1, 1)
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(bias, "b")]
    conv_inputs = ["xq", "w", "xz"]
    if weight_zero is not None:
        inits.append(numpy_helper.from_array(weight_zero, "wz"))
        conv_inputs.append("wz")
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
             helper.make_node("Mul", ["xs", "ws"], ["scale"], name="scales"),
             helper.make_node("ConvInteger", conv_inputs, ["acc"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "scale"], ["scaled"], name="mul"),
             helper.make_node("Add", ["scaled", "b"], ["y"], name="bias")]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", weight.shape[1], 10, 10])],
                      [("y", TensorProto.FLOAT, ["N", channels, 10, 10])], inits, opset=13)


def _conv_integer_chain_reference(x: np.ndarray, weight: np.ndarray, weight_zero: np.ndarray,
                                  bias: np.ndarray) -> np.ndarray:
    """:func:`_conv_integer_chain` in numpy (float64 sums of the ONNX ops' integers), for a weight
    zero point per output channel, which ONNX Runtime's ConvInteger refuses."""
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = np.float32((high - low) / 255)
    zero = np.clip(np.round(-low / scale), 0, 255)
    data = np.clip(np.round(x / scale) + zero, 0, 255) - zero
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1))),
                                                       (3, 3), axis=(2, 3))
    centered = weight.astype(np.float64) - weight_zero.reshape(-1, 1, 1, 1)
    sums = np.einsum("nchwij,ocij->nohw", windows, centered).astype(np.float32)
    return sums * (scale * np.float32(0.01)) + bias


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("zero", ["none", "tensor", "channel"])
def test_conv_integer_chain_fuses_and_matches_onnx_runtime(core: ov.Core, zero: str, precision: str) -> None:
    _check_conv_integer_chain(core, zero, precision)


def _check_conv_integer_chain(core: ov.Core, zero: str, precision: str) -> None:
    """:func:`_conv_integer_chain` runs as one call and matches ONNX Runtime (numpy for a weight zero
    point per channel)."""
    rng = np.random.default_rng(28)
    weight = rng.integers(0, 256, (12, 16, 3, 3), dtype=np.uint8)
    weight_zero = {"none": None, "tensor": np.array(128, np.uint8),
                   "channel": rng.integers(100, 156, 12, dtype=np.uint8)}[zero]
    model = _conv_integer_chain(weight, weight_zero)
    feeds = {"x": rng.standard_normal((2, 16, 10, 10)).astype(np.float32)}
    got, records = _profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    if zero == "channel":
        bias = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "b"))
        want = _conv_integer_chain_reference(feeds["x"], weight, weight_zero, bias)  # type: ignore[arg-type]
    else:
        want = _ort_unfused(model, feeds)[0]
    if precision == "f32":  # sums below 2**24: the integer sums, scaled and biased as ONNX Runtime does
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    else:  # f16 data quantizes on a slightly different scale, and each sum rounds to f16
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert records["conv"] == "ConvInteger" and not {"cast", "mul", "bias"} & set(records)


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamically_quantized_data_read_elsewhere_keeps_its_value(core: ov.Core, precision: str) -> None:
    weight = np.random.default_rng(29).integers(0, 256, (8, 16, 3, 3), dtype=np.uint8)
    model = _conv_integer_chain(weight, np.array(120, np.uint8))
    model.graph.output.append(helper.make_tensor_value_info("xq", TensorProto.UINT8, ["N", 16, 10, 10]))
    feeds = {"x": np.random.default_rng(30).standard_normal((2, 16, 10, 10)).astype(np.float32)}
    results = core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})(feeds)
    got, data = np.asarray(results[0]), np.asarray(results[1])
    want = _ort_unfused(model, feeds)
    largest = np.abs(want[0]).max()
    if precision == "f32":
        np.testing.assert_allclose(got, want[0], rtol=1e-6, atol=1e-6 * largest)
        np.testing.assert_array_equal(data, want[1])
    else:  # f16 data quantizes on a slightly different scale: a few values move by a step
        np.testing.assert_allclose(got, want[0], rtol=0, atol=1e-2 * largest)
        assert data.dtype == np.uint8 and np.abs(data.astype(int) - want[1]).max() <= 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_quantize_dequantize_pair_on_cuda_is_exact(data_type: int, precision: str) -> None:
    _check_pair_exact(ov.Core(), data_type, precision)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_static_qdq_cnn_on_cuda_matches_onnx_runtime(tmp_path: Any, precision: str) -> None:
    model = _quantized(tmp_path, _cnn(), True, per_channel=True)
    feeds = _cnn_feeds(26)
    (want,) = _ort_unfused(model, feeds)
    step = _output_scale(model)
    config = {"INFERENCE_PRECISION_HINT": precision}
    compiled = ov.Core().compile_model(model, "GPU.0", config)  # not profiled: CUDA graphs replay the calls
    for _ in range(3):
        got = np.asarray(compiled(feeds)[0])
        # cuDNN sums in its own order (f16 besides rounds): intermediate values on a rounding
        # boundary move by a step, and the output by a step or two where two such moves meet
        np.testing.assert_allclose(got, want, rtol=0, atol=step * (2.01 if precision == "f32" else 3.01))
        assert np.abs(got - want).mean() < step / 2
    _check_cnn_fused(model, _profiled(ov.Core(), model, feeds, config)[1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_conv_integer_chain_on_cuda_fuses_and_matches_onnx_runtime(precision: str) -> None:
    _check_conv_integer_chain(ov.Core(), "tensor", precision)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_conv_integer_on_cuda_sums_exactly() -> None:
    rng = np.random.default_rng(27)
    weight = rng.integers(0, 256, (16, 32, 3, 3), dtype=np.uint8)
    model = _conv_integer_model(weight)
    feeds = {"x": rng.integers(0, 256, (4, 32, 9, 9), dtype=np.uint8)}
    got = np.asarray(ov.Core().compile_model(model, "GPU.0")(feeds)[0])
    np.testing.assert_array_equal(got, _ort_unfused(model, feeds)[0])
