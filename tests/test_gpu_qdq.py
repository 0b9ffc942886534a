"""QDQ and dynamically quantized matmul models on the GPU device, through the public API.

A MatMul or Gemm of two DequantizeLinear outputs (``quantize_static`` with the QDQ
format) runs as one int8 matmul.  Results are compared with ONNX Runtime running
each op as written (see :mod:`quantized_models`); the fusion is seen in the
profiling records, where the activations' QuantizeLinear and DequantizeLinear
nodes no longer run (the output's pair runs as one FakeQuantize call, see
``test_gpu_qdq_conv.py``).  Models it must not fuse (a weight computed at run time,
a weight zero point other than 0) stay right.

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
from quantized_models import PROFILED, ort_unfused, output_scale, profiled, quantized
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _mlp(features: int = 64, hidden: int = 96, out: int = 32) -> onnx.ModelProto:
    torch.manual_seed(11)
    net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                        nn.Linear(hidden, out))
    return export_onnx(net, (torch.randn(4, features),), ["x"], {"x": {0: "N"}}, opset=13)


def _run(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any],
         config: dict[str, Any] | None = None) -> tuple[np.ndarray, set[str]]:
    """The first output on GPU.0 and the names of the nodes that ran (profiling records)."""
    result, records = profiled(core, model, feeds, config)
    return result, {name for name, kind in records.items() if kind != "constant folded"}


def _activation_dequantizers(model: onnx.ModelProto) -> set[str]:
    """DequantizeLinear nodes of run-time data that feed a Gemm (those the fusion absorbs)."""
    constants = {i.name for i in model.graph.initializer}
    gemm_inputs = {i for n in model.graph.node if n.op_type == "Gemm" for i in n.input}
    return {n.name for n in model.graph.node if n.op_type == "DequantizeLinear"
            and n.input[0] not in constants and n.output[0] in gemm_inputs}


@pytest.mark.parametrize(("per_channel", "activation"),
                         [(False, "QUInt8"), (True, "QUInt8"), (True, "QInt8")])
def test_static_qdq_mlp_matches_onnx_runtime_and_runs_fused(core: ov.Core, tmp_path: Any,
                                                            per_channel: bool, activation: str) -> None:
    model = quantized(tmp_path, _mlp(), True, per_channel=per_channel,
                       activation_type=getattr(quantization.QuantType, activation))
    feeds = {"x": np.random.default_rng(5).standard_normal((40, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    # Outputs are requantized: a float32 rounding on either side of a rounding boundary moves a
    # value by one step, rarely.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    assert np.mean(got != want) < 0.02
    gemms = {n.name for n in model.graph.node if n.op_type == "Gemm"}
    assert len(gemms) == 3 and gemms <= ran
    activations = _activation_dequantizers(model)
    assert len(activations) == 3 and not activations & ran
    # the QuantizeLinear before each of them runs inside the Gemm's call too, and so does the
    # output's pair, in the last Gemm's epilogue
    quantizers = {n.name for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert len(quantizers) == 4 and not quantizers & ran and "y_DequantizeLinear" not in ran


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
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert "mm" in ran and not {"qx", "dqx", "bias"} & ran


@pytest.mark.parametrize(("weight_zero", "constant_weight"), [(3, True), (0, False)])
def test_qdq_matmul_that_must_not_fuse_still_matches(core: ov.Core, weight_zero: int,
                                                     constant_weight: bool) -> None:
    weight = np.random.default_rng(10).integers(-100, 100, (64, 16), dtype=np.int8)
    model = _qdq_matmul_model(weight, weight_zero, True, constant_weight)
    feeds = _matmul_feeds(weight, 3, not constant_weight)
    got, records = profiled(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
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
    want = ort_unfused(model, feeds)
    np.testing.assert_allclose(np.asarray(results[0]), want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(results[1]), want[1])
    _, ran = _run(core, model, feeds)
    # the int8 matmul quantizes x itself; the dequantized activation, a graph output, is one
    # fake-quantize call of x, so the QuantizeLinear has no reader left
    assert "dqx" in ran and "qx" not in ran


def test_qdq_matmul_depth_not_multiple_of_8_is_not_fused(core: ov.Core) -> None:
    weight = np.random.default_rng(12).integers(-128, 128, (20, 16), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, False)
    feeds = _matmul_feeds(weight, 4, False)
    got, ran = _run(core, model, feeds)
    np.testing.assert_allclose(got, ort_unfused(model, feeds)[0], rtol=1e-5, atol=1e-4)
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
    np.testing.assert_allclose(got, ort_unfused(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert "gemm" in ran and ("dqx" not in ran) == fused


def test_qdq_model_loaded_from_the_cache_runs_fused_with_the_same_results(core: ov.Core,
                                                                           tmp_path: Any) -> None:
    model = quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(18).standard_normal((16, 64)).astype(np.float32)}
    config = {**PROFILED, "CACHE_DIR": str(tmp_path / "cache")}
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
    model = quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(6).standard_normal((32, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f16"})
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    # float16 values between the layers move some requantized values by a step or two.
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
    assert np.abs(got - want).mean() < step / 2
    assert not _activation_dequantizers(model) & ran


@pytest.mark.parametrize(("hidden", "fused"), [(96, True), (20, False)])
def test_dynamic_quantized_mlp_matches_onnx_runtime(core: ov.Core, tmp_path: Any, hidden: int,
                                                    fused: bool) -> None:
    model = quantized(tmp_path, _mlp(hidden=hidden), False, reduce_range=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulInteger") == 3 and "DynamicQuantizeLinear" in ops
    feeds = {"x": np.random.default_rng(7).standard_normal((24, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    matmuls = {n.name for n in model.graph.node if n.op_type == "MatMulInteger"}
    after = {n.name for n in model.graph.node if n.op_type in ("Cast", "Add")}
    assert matmuls <= ran
    # The Cast, scale Mul and bias Add after each MatMulInteger join its call where K and N allow
    # (a hidden width of 20 is no multiple of 8: every layer reads or writes it and stays as written).
    assert len(after) == 6 and (not after & ran if fused else after <= ran)


def _gelu_mlp() -> onnx.ModelProto:
    torch.manual_seed(12)
    net = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64), nn.GELU(approximate="tanh"),
                        nn.Linear(64, 32))
    return export_onnx(net, (torch.randn(4, 64),), ["x"], {"x": {0: "N"}}, opset=17)


def test_dynamic_quantized_linear_multiplies_the_data_scale_itself(core: ov.Core, tmp_path: Any) -> None:
    model = quantized(tmp_path, _gelu_mlp(), False)
    feeds = {"x": np.random.default_rng(9).standard_normal((24, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # the Mul of the data's scale (a DynamicQuantizeLinear's second output) and the weight's joins
    # each MatMulInteger's call
    data_scales = {n.output[1] for n in model.graph.node if n.op_type == "DynamicQuantizeLinear"}
    scale_products = {n.name for n in model.graph.node if n.op_type == "Mul" and data_scales & set(n.input)}
    assert len(scale_products) == 3 and not scale_products & ran


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("rows", [24, 300])  # the kernel's small-row form and its tensor-copy form
def test_dynamic_quantized_gelu_mlp_on_cuda_matches_onnx_runtime(tmp_path: Any, precision: str,
                                                                        rows: int) -> None:
    model = quantized(tmp_path, _gelu_mlp(), False)
    feeds = {"x": np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)}
    (want,) = ort_unfused(model, feeds)
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    got = np.asarray(compiled(feeds)[0], dtype=np.float32)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=(1e-2 if precision == "f32" else 3e-2) * scale)
    assert np.abs(got - want).mean() < (1e-4 if precision == "f32" else 3e-3) * scale


@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_dynamic_quantized_layers_left_unfused_keep_their_sums_in_a_reduced_precision(
        core: ov.Core, tmp_path: Any, precision: str) -> None:
    # a width of 20 keeps each MatMulInteger -> Cast -> Mul as written: its int32 sums (here past
    # 65504) must not pass through float16 on their way to the scale
    model = quantized(tmp_path, _mlp(features=256, hidden=20, out=10), False)
    feeds = {"x": (np.random.default_rng(8).standard_normal((16, 256)) * 4).astype(np.float32)}
    got, _ = _run(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-2 * np.abs(want).max())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("rows", [1, 8, 9, 32])  # 2 x rows: below and above the kernel's 16
def test_qdq_matmul_on_cuda_matches_onnx_runtime_at_any_row_count(tmp_path: Any, rows: int) -> None:
    weight = np.random.default_rng(13).integers(-128, 128, (512, 64), dtype=np.int8)
    model = _qdq_matmul_model(weight, 0, True)
    feeds = {"x": np.random.default_rng(14).standard_normal((2, rows, 512)).astype(np.float32)}
    got, ran = _run(ov.Core(), model, feeds)
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert "dqx" not in ran


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_static_qdq_mlp_on_cuda_matches_onnx_runtime(tmp_path: Any) -> None:
    model = quantized(tmp_path, _mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(15).standard_normal((256, 64)).astype(np.float32)}
    (want,) = ort_unfused(model, feeds)
    compiled = ov.Core().compile_model(model, "GPU.0")  # not profiled: CUDA graphs replay the calls
    for _ in range(3):
        got = np.asarray(compiled(feeds)[0])
        np.testing.assert_allclose(got, want, rtol=0, atol=output_scale(model) * 1.01)


def _dynamic_quantize_model(shape: list[int]) -> onnx.ModelProto:
    """DynamicQuantizeLinear of ``-x`` (computed on the device, so the quantizer reads device data)."""
    nodes = [helper.make_node("Neg", ["x"], ["d"]),
             helper.make_node("DynamicQuantizeLinear", ["d"], ["y", "scale", "zero"])]
    return make_model(nodes, [("x", TensorProto.FLOAT, shape)],
                      [("y", TensorProto.UINT8, shape), ("scale", TensorProto.FLOAT, []),
                       ("zero", TensorProto.UINT8, [])], opset=13, ir_version=10)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("count", [1, 5000, 3 * 4096 + 7, 600 * 4096 + 123, 3_000_001])
@pytest.mark.parametrize("extreme_at", ["first", "last", "middle"])
def test_dynamic_quantize_on_cuda_matches_onnx_runtime_over_many_slices(count: int, extreme_at: str) -> None:
    """The minimum and maximum are found slice by slice and reduced again: an extreme value in the
    first, the last or a middle element of a tensor of one to several hundred slices is found."""
    x = np.random.default_rng(count).standard_normal(count).astype(np.float32)
    where = {"first": 0, "last": count - 1, "middle": count // 2}[extreme_at]
    x[where] = 37.5  # the minimum of -x
    x[(where + 1) % count] = -50.25  # its maximum
    feeds = {"x": x}
    model = _dynamic_quantize_model([count])
    want = _ort(model, feeds)
    got = ov.Core().compile_model(model, "GPU.0")(feeds)
    for index in range(3):
        np.testing.assert_array_equal(np.asarray(got[index]), want[index])


def _ort(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _token_mlp(features: int = 64, hidden: int = 96) -> onnx.ModelProto:
    """Linear layers on (batch, tokens, features): each exports as a MatMul and a bias Add, which
    ``quantize_static`` writes MatMul -> pair -> Add -> pair, as in a transformer's layers."""
    torch.manual_seed(12)
    net = nn.Sequential(nn.Linear(features, hidden), nn.GELU(), nn.Linear(hidden, features))
    return export_onnx(net, (torch.randn(2, 8, features),), ["x"], {"x": {0: "N", 1: "S"}}, opset=13)


def _epilogue_nodes(model: onnx.ModelProto) -> tuple[set[str], set[str]]:
    """The bias Adds that read a DequantizeLinear of a MatMul's quantized output, and the
    QuantizeLinear and DequantizeLinear nodes of the pairs on either side of them."""
    producer = {out: n for n in model.graph.node for out in n.output}
    adds, pairs = set(), set()
    for add in (n for n in model.graph.node if n.op_type == "Add"):
        for name in add.input:
            dq = producer.get(name)
            q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
            source = producer.get(q.input[0]) if q is not None and q.op_type == "QuantizeLinear" else None
            if source is not None and source.op_type == "MatMul":
                adds.add(add.name)
                pairs.update((dq.name, q.name))
                after_q = next(n for n in model.graph.node if add.output[0] in n.input)
                pairs.add(after_q.name)
                pairs.update(n.name for n in model.graph.node if after_q.output[0] in n.input)
    return adds, pairs


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_qdq_linear_bias_and_its_pairs_run_in_the_matmul_epilogue(core: ov.Core, tmp_path: Any,
                                                                  precision: str) -> None:
    model = quantized(tmp_path, _token_mlp(), True, per_channel=True)
    adds, pairs = _epilogue_nodes(model)
    assert len(adds) == 2 and len(pairs) >= 8
    feeds = {"x": np.random.default_rng(16).standard_normal((3, 20, 64)).astype(np.float32)}
    got, ran = _run(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    step = output_scale(model)
    if precision == "f32":
        np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
        assert np.mean(got != want) < 0.02
    else:  # float16 values between the layers move some requantized values by a step or two
        np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
        assert np.abs(got - want).mean() < step / 2
    matmuls = {n.name for n in model.graph.node if n.op_type == "MatMul"}
    assert len(matmuls) == 2 and matmuls <= ran
    assert not (adds | pairs) & ran


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("tokens", [5, 300])  # the kernel's small and large tiles
def test_qdq_linear_epilogue_on_cuda_matches_onnx_runtime(tmp_path: Any, precision: str, tokens: int) -> None:
    model = quantized(tmp_path, _token_mlp(), True, per_channel=True)
    feeds = {"x": np.random.default_rng(17).standard_normal((2, tokens, 64)).astype(np.float32)}
    (want,) = ort_unfused(model, feeds)
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    step = output_scale(model)
    for _ in range(3):  # the first run, then CUDA-graph replays
        got = np.asarray(compiled(feeds)[0])
        if precision == "f32":
            np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=step * (3.01 if precision == "f16" else 9.01))
            assert np.abs(got - want).mean() < step / 2
