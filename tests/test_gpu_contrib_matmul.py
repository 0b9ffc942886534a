"""ONNX Runtime's quantized matmul contrib ops (domain ``com.microsoft``) on the GPU device: QGemm,
MatMulIntegerToFloat, DynamicQuantizeMatMul and MatMulNBits
(:mod:`inferplex.devices.gpu.ops._contrib_matmul`).

Each runs on ``GPU.0`` (emulated on torch's CPU here; the ``gpu`` tests need CUDA) against ONNX
Runtime's CPU kernel: single ops built by hand, ``quantize_dynamic`` models as ONNX Runtime's
optimizer fuses and saves them, and MatMulNBitsQuantizer's block-wise weights.  Weights are 7-bit
where ONNX Runtime's uint8 x int8 kernel would saturate 16-bit pair sums of full-range ones (x86
without VNNI); the sums here are exact.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
import pytest
from contrib_models import (
    I8,
    MS,
    NUMPY,
    U8,
    check,
    ms_model,
    param,
    qparams,
    random_ints,
    run_on_gpu,
)
from onnx import TensorProto, helper, numpy_helper
from quantized_models import ort_unfused

import inferplex as ov

quantization = pytest.importorskip("onnxruntime.quantization")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


# --- matmuls ---------------------------------------------------------------------------------------


def _qgemm_model(a_elem: int, float_out: bool, per_column: bool, trans_b: int,
                 m: int = 5, k: int = 24, n: int = 7) -> onnx.ModelProto:
    """QGemm with alpha 0.75 and an int32 C, quantized or float (no y_scale) output."""
    rng = np.random.default_rng(4)
    # 7-bit weights: ORT's uint8 x int8 kernel saturates 16-bit pair sums of full-range ones
    weight = rng.integers(-64, 64, size=(n, k) if trans_b else (k, n)).astype(np.int8)
    b_scale = rng.uniform(0.01, 0.05, size=n if per_column else ()).astype(np.float32)
    inits = [*qparams("a", 0.02, 3 if a_elem == I8 else 131, a_elem), numpy_helper.from_array(weight, "b"),
             param("b_s", b_scale), param("b_z", np.zeros(b_scale.shape), np.int8),
             param("c", rng.integers(-2000, 2000, size=n), np.int32)]
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c"]
    if not float_out:
        inits += qparams("y", 0.3 * np.sqrt(k / 24), 0 if a_elem == I8 else 128, a_elem)
        names += ["y_s", "y_z"]
    node = helper.make_node("QGemm", names, ["y"], name="qgemm", domain=MS, transB=trans_b, alpha=0.75)
    out = TensorProto.FLOAT if float_out else a_elem
    return ms_model([node], [("a", a_elem, [m, k])], [("y", out, None)], inits)


@pytest.mark.parametrize(("a_elem", "float_out", "per_column", "trans_b"), [
    (U8, False, False, 0), (U8, False, True, 1), (U8, True, True, 0), (I8, False, True, 1),
    (I8, True, False, 1)])
def test_qgemm_matches_onnx_runtime(core: ov.Core, a_elem: int, float_out: bool, per_column: bool,
                                    trans_b: int) -> None:
    model = _qgemm_model(a_elem, float_out, per_column, trans_b)
    check(core, model, {"a": random_ints((5, 24), a_elem, 6)})


@pytest.mark.parametrize("a_elem", [U8, I8])
def test_matmul_integer_to_float_matches_onnx_runtime(core: ov.Core, a_elem: int) -> None:
    rng = np.random.default_rng(7)
    weight = rng.integers(-64, 64, size=(32, 12)).astype(np.int8)
    inits = [numpy_helper.from_array(weight, "b"), param("a_s", 0.015),
             param("b_s", rng.uniform(0.01, 0.03, 12)),
             param("a_z", 5 if a_elem == I8 else 120, NUMPY[a_elem]), param("b_z", np.zeros(12), np.int8),
             param("bias", rng.standard_normal(12))]
    node = helper.make_node("MatMulIntegerToFloat", ["a", "b", "a_s", "b_s", "a_z", "b_z", "bias"], ["y"],
                            name="mm", domain=MS)
    model = ms_model([node], [("a", a_elem, [2, 3, 32])], [("y", TensorProto.FLOAT, None)], inits)
    check(core, model, {"a": random_ints((2, 3, 32), a_elem, 8)})


def test_dynamic_quantize_matmul_matches_onnx_runtime(core: ov.Core) -> None:
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.integers(-64, 64, size=(16, 10)).astype(np.int8), "b"),
             param("b_s", rng.uniform(0.01, 0.03, 10)), param("b_z", np.zeros(10), np.int8),
             param("bias", rng.standard_normal(10))]
    node = helper.make_node("DynamicQuantizeMatMul", ["a", "b", "b_s", "b_z", "bias"], ["y"], name="mm",
                            domain=MS)
    model = ms_model([node], [("a", TensorProto.FLOAT, [4, 16])], [("y", TensorProto.FLOAT, None)], inits)
    check(core, model, {"a": rng.standard_normal((4, 16)).astype(np.float32)})


def _float_mlp(features: int, hidden: int) -> onnx.ModelProto:
    """x @ w1 + b1 -> Relu -> @ w2: two MatMuls with constant weights, what the block quantizer takes."""
    rng = np.random.default_rng(3)
    inits = [param("w1", rng.standard_normal((features, hidden)) * 0.1),
             param("b1", rng.standard_normal(hidden)),
             param("w2", rng.standard_normal((hidden, 16)) * 0.1)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="up"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["a"], name="relu"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="down")]
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _block_quantized(features: int, hidden: int, **options: Any) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(_float_mlp(features, hidden), **options)
    quantizer.process()
    model = quantizer.model.model
    model.ir_version = 10
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    assert sum(n.op_type == "MatMulNBits" and n.domain == MS for n in model.graph.node) == 2
    return model


@pytest.mark.parametrize(("bits", "block", "symmetric"), [(4, 32, False), (4, 16, True), (8, 32, False)])
def test_matmul_nbits_from_the_block_quantizer(core: ov.Core, bits: int, block: int, symmetric: bool) -> None:
    """MatMulNBitsQuantizer's weights, K not a multiple of the block (a padded last block)."""
    model = _block_quantized(72, 40, bits=bits, block_size=block, is_symmetric=symmetric)
    x = np.random.default_rng(1).standard_normal((3, 72)).astype(np.float32)
    actual, expected = run_on_gpu(core, model, {"x": x})[0], ort_unfused(model, {"x": x})[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """MatMulNBits' packing: ``8 // bits`` values a byte along the last axis, lowest bits first
    (the last byte padded with zeros)."""
    per = 8 // bits
    pad = (-values.shape[-1]) % per
    values = np.concatenate([values, np.zeros((*values.shape[:-1], pad), values.dtype)], -1)
    grouped = values.reshape(*values.shape[:-1], -1, per).astype(np.uint16)
    return (grouped << (np.arange(per) * bits)).sum(-1).astype(np.uint8)


def _packed_model(bits: int, elem: int, zeros: str | None, bias: bool, k: int, n: int, block: int,
                  rows: Any = None) -> onnx.ModelProto:
    """One MatMulNBits of hand-packed random weights: zero points packed, one float per block
    (HQQ's), or the default ``2**(bits - 1)``; an optional bias; input ``a`` of (``rows``, K)."""
    rng = np.random.default_rng(bits)
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float16
    blocks = -(-k // block)
    weights = rng.integers(0, 1 << bits, size=(n, blocks, block)).astype(np.uint8)
    names = ["a", "b", "s"]
    inits = [numpy_helper.from_array(_pack(weights, bits), "b"),
             numpy_helper.from_array(rng.uniform(0.01, 0.1, size=(n, blocks)).astype(dtype), "s")]
    if zeros == "packed":
        points = rng.integers(0, 1 << bits, size=(n, blocks)).astype(np.uint8)
        inits.append(numpy_helper.from_array(_pack(points, bits), "z"))
    elif zeros == "float":
        inits.append(numpy_helper.from_array(rng.uniform(0, (1 << bits) - 1, (n, blocks)).astype(dtype), "z"))
    if zeros:
        names.append("z")
    if bias:
        names += [""] * (5 - len(names)) + ["bias"]
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(dtype), "bias"))
    node = helper.make_node("MatMulNBits", names, ["y"], name="mm", domain=MS, K=k, N=n, bits=bits,
                            block_size=block)
    return ms_model([node], [("a", elem, [*(rows or [2, 3]), k])], [("y", elem, None)], inits)


def _assert_nbits_close(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same type; float32 close to float32 sums, float16 within float16 rounding of the output."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    tolerance = 1e-5 if actual.dtype == np.float32 else 2e-3
    scale = max(1.0, float(np.abs(expected.astype(np.float32)).max()))
    np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32), rtol=tolerance,
                               atol=tolerance * scale)


@pytest.mark.parametrize(("bits", "elem", "zeros", "bias"), [
    (4, TensorProto.FLOAT, "packed", True), (2, TensorProto.FLOAT, "packed", False),
    (8, TensorProto.FLOAT16, "packed", True), (4, TensorProto.FLOAT16, None, False),
    (4, TensorProto.FLOAT, "float", False), (4, TensorProto.FLOAT16, "float", True)])
def test_matmul_nbits_packing_matches_onnx_runtime(core: ov.Core, bits: int, elem: int, zeros: str | None,
                                                   bias: bool) -> None:
    """2/4/8 bits, the three zero-point forms, a bias, float16 data; K = 50 leaves the last block
    of 16 partly padding (and an odd block count for the packed zero points)."""
    model = _packed_model(bits, elem, zeros, bias, k=50, n=12, block=16)
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float16
    x = np.random.default_rng(bits).standard_normal((2, 3, 50)).astype(dtype)
    _assert_nbits_close(run_on_gpu(core, model, {"a": x})[0], ort_unfused(model, {"a": x})[0])


@pytest.mark.parametrize(("name", "shape", "named"), [
    ("s", (12, 3), "scales holds 36 values; K=50, N=12, bits=4 and block_size=16 make 48"),
    ("b", (12, 4, 4), "B (the packed weight) holds 192 values"),
    ("z", (12, 1), "zero_points holds 12 values")])
def test_matmul_nbits_with_inputs_of_the_wrong_size_is_refused_by_name(
        core: ov.Core, name: str, shape: tuple[int, ...], named: str) -> None:
    """Weights, scales or zero points of other sizes than K, N, bits and block_size make: the GPU
    refuses the node at compile time and says which input and what size (its kernels would read
    past them), as ONNX Runtime refuses the model."""
    model = _packed_model(4, TensorProto.FLOAT, "packed", False, k=50, n=12, block=16)
    tensor = next(t for t in model.graph.initializer if t.name == name)
    array = numpy_helper.to_array(tensor)
    tensor.CopyFrom(numpy_helper.from_array(np.resize(array, shape), name))
    with pytest.raises(ov.errors.UnsupportedOpError, match=re.escape(named)):
        core.compile_model(model, "GPU.0")


def test_matmul_nbits_weight_fed_at_run_time_of_the_wrong_size_fails_its_request(core: ov.Core) -> None:
    """A packed weight fed as an input: its size is checked when the request runs, which fails with
    an inference error naming it, and the next request with the right size runs."""
    model = _packed_model(4, TensorProto.FLOAT, None, False, k=50, n=12, block=16)
    packed = next(t for t in model.graph.initializer if t.name == "b")
    right = numpy_helper.to_array(packed)
    model.graph.initializer.remove(packed)
    model.graph.input.append(helper.make_tensor_value_info("b", TensorProto.UINT8, [12, None, 8]))
    compiled = core.compile_model(model, "GPU.0")
    x = np.random.default_rng(5).standard_normal((2, 3, 50)).astype(np.float32)
    with pytest.raises(ov.errors.InferenceError, match=re.escape("B (the packed weight) holds 96 values")):
        compiled({"a": x, "b": right[:, :1]})
    expected = ort_unfused(model, {"a": x, "b": right})[0]
    _assert_nbits_close(np.asarray(compiled({"a": x, "b": right})[0]), expected)


@pytest.mark.parametrize(("shared", "fused"),
                         [(False, "DynamicQuantizeMatMul"), (True, "MatMulIntegerToFloat")])
def test_onnx_runtime_optimized_dynamic_model_runs_whole_on_the_gpu(core: ov.Core, tmp_path: Any,
                                                                    shared: bool, fused: str) -> None:
    """``quantize_dynamic``'s chains as ONNX Runtime's graph optimizer fuses and saves them: one
    DynamicQuantizeMatMul per MatMul, or, where two MatMuls read one quantized input,
    DynamicQuantizeLinear and MatMulIntegerToFloat."""
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    inits = [param(name, rng.standard_normal((64, 32)) * 0.1) for name in ("w1", "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="m1"),
             helper.make_node("MatMul", ["x", "w2"] if shared else ["a", "w3"], ["b"], name="m2"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    if not shared:
        inits.append(param("w3", rng.standard_normal((32, 32)) * 0.1))
    float_model = ms_model(nodes, [("x", TensorProto.FLOAT, ["N", 64])],
                           [("y", TensorProto.FLOAT, ["N", 32])], inits)
    onnx.save(float_model, tmp_path / "float.onnx")
    quantization.quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dynamic.onnx"),
                                  reduce_range=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(tmp_path / "dynamic.onnx"), options, providers=["CPUExecutionProvider"])
    model = onnx.load(tmp_path / "optimized.onnx")
    model.ir_version = 10
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    assert fused in {n.op_type for n in model.graph.node if n.domain == MS}
    check(core, model, {"x": rng.standard_normal((5, 64)).astype(np.float32)})


# --- on CUDA ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("bits", [4, 8])
def test_matmul_nbits_on_cuda_matches_onnx_runtime(bits: int) -> None:
    model = _block_quantized(256, 128, bits=bits, block_size=32)
    x = np.random.default_rng(1).standard_normal((24, 256)).astype(np.float32)
    actual, expected = run_on_gpu(ov.Core(), model, {"x": x})[0], ort_unfused(model, {"x": x})[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-3)  # TF32 may run the float matmul


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("a_elem", "float_out"), [(U8, False), (I8, True)])
def test_qgemm_on_cuda_int8_kernel_matches_onnx_runtime(a_elem: int, float_out: bool) -> None:
    """M > 16 and K, N multiples of 8: the product runs on torch's int8 kernel."""
    model = _qgemm_model(a_elem, float_out, per_column=True, trans_b=1, m=40, k=64, n=48)
    check(ov.Core(), model, {"a": random_ints((40, 64), a_elem, 6)})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("bits", "elem", "zeros", "bias", "rows"), [
    (4, TensorProto.FLOAT16, "packed", True, [1, 1]), (4, TensorProto.FLOAT16, None, False, [3, 5]),
    (2, TensorProto.FLOAT16, "float", True, [2, 150]), (8, TensorProto.FLOAT16, "packed", False, [1, 700]),
    (4, TensorProto.FLOAT, "packed", True, [1, 1]), (2, TensorProto.FLOAT, None, False, [2, 7]),
    (4, TensorProto.FLOAT, "float", True, [4, 64])])
@pytest.mark.parametrize("torch_compile", ["NO", "YES"])
def test_matmul_nbits_kernel_on_cuda_matches_onnx_runtime(bits: int, elem: int, zeros: str | None, bias: bool,
                                                          rows: list[int], torch_compile: str) -> None:
    """The packed-weight kernel on CUDA: one token (split depth), a few, and prompt-sized row
    counts; float16 data, and float32 data with few rows (float32 products) and many (ATen);
    K = 300 with blocks of 32 and 64 (a padded last block); on the eager tier and under
    torch.compile."""
    block = 64 if bits == 2 else 32
    model = _packed_model(bits, elem, zeros, bias, k=300, n=200, block=block, rows=rows)
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float16
    x = np.random.default_rng(7).standard_normal((*rows, 300)).astype(dtype)
    compiled = ov.Core().compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT",
                                                        "TORCH_COMPILE": torch_compile})
    request = compiled.create_infer_request()
    for _ in range(3):  # past the eager tier's first runs, and the compiled tier once ready
        actual = np.asarray(request.infer({"a": x})[0])
    _assert_nbits_close(actual, ort_unfused(model, {"a": x})[0])

