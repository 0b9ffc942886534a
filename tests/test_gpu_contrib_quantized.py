"""ONNX Runtime's quantized contrib ops (domain ``com.microsoft``) on the GPU device.

Each op runs alone on ``GPU.0`` (emulated on torch's CPU here; the ``gpu`` tests need CUDA) and is
compared with ONNX Runtime's CPU kernel running the same model, every op as written.  Integer
outputs agree exactly or within one quantization step (where ORT's vectorized kernels round a
float sum in another order); float outputs within float32 rounding.  Whole models come from
``onnxruntime.quantization``: ``quantize_static`` in the QOperator format, QDQ with 16-bit
activations through the domain's own QuantizeLinear/DequantizeLinear, and the block-wise
weight-only quantizer (MatMulNBits).  They must run on ``GPU.0`` with no HETERO split, every node
listed by ``query_model``, and on the CPU device too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quantized_models import ort_unfused, output_scale
from torch_export import export_onnx

import inferplex as ov
from inferplex.errors import UnsupportedOpError

torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")
nn = torch.nn

MS = "com.microsoft"
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
U8, I8 = int(TensorProto.UINT8), int(TensorProto.INT8)
_NUMPY: dict[int, Any] = {U8: np.uint8, I8: np.int8, int(TensorProto.UINT16): np.uint16,
                          int(TensorProto.INT16): np.int16}
Spec = tuple[str, int, Sequence[Any] | None]


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


# --- helpers -----------------------------------------------------------------------------


def _model(nodes: list[onnx.NodeProto], inputs: Sequence[Spec], outputs: Sequence[Spec],
           initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """A model of contrib ops, importing ONNX opset 17 and com.microsoft 1, saved as IR 10."""
    graph = helper.make_graph(nodes, "contrib",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


def _param(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _quant(name: str, scale: float, zero: int, elem: int) -> list[onnx.TensorProto]:
    """A per-tensor scale and zero point named ``<name>_s`` and ``<name>_z``."""
    return [_param(f"{name}_s", scale), _param(f"{name}_z", zero, _NUMPY[elem])]


def _random(shape: tuple[int, ...], elem: int, seed: int = 0) -> np.ndarray:
    info = np.iinfo(_NUMPY[elem])
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=shape).astype(_NUMPY[elem])


def _on_gpu(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    """The outputs on GPU.0, after checking that the device takes every node (no HETERO split)."""
    names = {node.name for node in model.graph.node}
    assert set(core.query_model(model, "GPU")) == names
    compiled = core.compile_model(model, "GPU.0", F32)
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0"]
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(model.graph.output))]


def _assert_within_step(actual: np.ndarray, expected: np.ndarray, steps: int = 1) -> None:
    """Same type and shape; integers equal but for a few values one step apart, floats close."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind in "iu":
        gap = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
        assert gap.max(initial=0) <= steps
        assert (gap == 0).mean() >= 0.97, f"{(gap != 0).sum()} of {gap.size} values differ"
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def _check(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any], steps: int = 1) -> None:
    for actual, expected in zip(_on_gpu(core, model, feeds), ort_unfused(model, feeds), strict=True):
        _assert_within_step(actual, expected, steps)


# --- element-wise ops ---------------------------------------------------------------------


@pytest.mark.parametrize("elem", [U8, I8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_ops_with_broadcasting_match_onnx_runtime(core: ov.Core, op: str, elem: int) -> None:
    zero = 0 if elem == I8 else 128
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"]
    node = helper.make_node(op, names, ["c"], name="op", domain=MS)
    inits = [*_quant("a", 0.05, zero + 3, elem), *_quant("b", 0.031, zero - 7, elem),
             *_quant("c", 0.07 if op == "QLinearAdd" else 0.2, zero + 1, elem)]
    model = _model([node], [("a", elem, [2, 4, 5, 6]), ("b", elem, [1, 4, 1, 6])], [("c", elem, None)], inits)
    _check(core, model, {"a": _random((2, 4, 5, 6), elem, 1), "b": _random((1, 4, 1, 6), elem, 2)})


@pytest.mark.parametrize("elem", [U8, I8])
@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_unary_ops_over_every_input_value_match_onnx_runtime(core: ov.Core, op: str, elem: int) -> None:
    info = np.iinfo(_NUMPY[elem])
    values = np.arange(info.min, info.max + 1).astype(_NUMPY[elem]).reshape(1, 256)
    zero = 0 if elem == I8 else 128
    out_zero = (-128 if elem == I8 else 0) if op == "QLinearSigmoid" else zero
    attrs: dict[str, Any] = {"alpha": 0.13} if op == "QLinearLeakyRelu" else {}
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="op", domain=MS, **attrs)
    inits = [*_quant("x", 0.045, zero - 5, elem),
             *_quant("y", 1 / 255 if op == "QLinearSigmoid" else 0.03, out_zero, elem)]
    _check(core, _model([node], [("x", elem, [1, 256])], [("y", elem, None)], inits), {"x": values})


@pytest.mark.parametrize(("opset", "axis", "shape"),
                         [(13, -1, (3, 5, 40)), (13, 1, (2, 6, 7)), (12, 1, (2, 3, 9))])
@pytest.mark.parametrize("elem", [U8, I8])
def test_softmax_matches_onnx_runtime(core: ov.Core, elem: int, opset: int, axis: int,
                                      shape: tuple[int, ...]) -> None:
    zero = 0 if elem == I8 else 128
    node = helper.make_node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="softmax",
                            domain=MS, opset=opset, axis=axis)
    inits = [*_quant("x", 0.06, zero + 2, elem), *_quant("y", 1 / 256, -128 if elem == I8 else 0, elem)]
    model = _model([node], [("x", elem, list(shape))], [("y", elem, None)], inits)
    _check(core, model, {"x": _random(shape, elem, 5)})


@pytest.mark.parametrize("elem", [U8, I8])
def test_concat_requantizes_each_input(core: ov.Core, elem: int) -> None:
    zero = 0 if elem == I8 else 128
    names = ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z", "c", "y_s", "y_z"]
    node = helper.make_node("QLinearConcat", names, ["y"], name="concat", domain=MS, axis=1)
    inits = [*_quant("y", 0.05, zero, elem), *_quant("a", 0.02, zero + 9, elem),
             *_quant("b", 0.11, zero - 4, elem)]
    inputs = [("a", elem, [2, 3, 4]), ("b", elem, [2, 5, 4]), ("c", elem, [2, 1, 4])]
    feeds = {n: _random(tuple(s), elem, i) for i, (n, _, s) in enumerate(inputs)}
    _check(core, _model([node], inputs, [("y", elem, None)], inits), feeds)


def test_where_requantizes_the_chosen_input(core: ov.Core) -> None:
    names = ["cond", "x", "x_s", "x_z", "y", "y_s", "y_z", "z_s", "z_z"]
    node = helper.make_node("QLinearWhere", names, ["z"], name="where", domain=MS)
    inits = [*_quant("x", 0.02, 120, U8), *_quant("y", 0.09, 131, U8), *_quant("z", 0.05, 128, U8)]
    inputs: list[Spec] = [("cond", TensorProto.BOOL, [4, 6]), ("x", U8, [4, 6]), ("y", U8, [1, 6])]
    feeds = {"cond": np.random.default_rng(0).random((4, 6)) > 0.5, "x": _random((4, 6), U8, 1),
             "y": _random((1, 6), U8, 2)}
    _check(core, _model([node], inputs, [("z", U8, None)], inits), feeds)


# --- pooling and reduction --------------------------------------------------------------------


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("elem", [U8, I8])
def test_global_average_pool_matches_onnx_runtime(core: ov.Core, elem: int, channels_last: int) -> None:
    zero = 0 if elem == I8 else 128
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="gap",
                            domain=MS, channels_last=channels_last)
    inits = [*_quant("x", 0.04, zero + 6, elem), *_quant("y", 0.01, zero - 3, elem)]
    model = _model([node], [("x", elem, [2, 5, 7, 6])], [("y", elem, None)], inits)
    _check(core, model, {"x": _random((2, 5, 7, 6), elem, 7)})


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0},
    {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1, "ceil_mode": 1, "strides": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [1, 1], "channels_last": 1},
])
def test_average_pool_matches_onnx_runtime(core: ov.Core, attrs: dict[str, Any]) -> None:
    node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="pool",
                            domain=MS, **attrs)
    inits = [*_quant("x", 0.03, 125, U8), *_quant("y", 0.025, 130, U8)]
    model = _model([node], [("x", U8, [2, 3, 9, 8])], [("y", U8, None)], inits)
    _check(core, model, {"x": _random((2, 3, 9, 8), U8, 8)})


def test_reduce_mean_matches_the_float_reduction(core: ov.Core) -> None:
    """ONNX Runtime's CPU provider has no QLinearReduceMean kernel: the reference is its spec,
    ``quantize(ReduceMean(dequantize(x)))``, in numpy."""
    node = helper.make_node("QLinearReduceMean", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="mean",
                            domain=MS, axes=[1, -1], keepdims=0)
    inits = [*_quant("x", 0.05, 128, U8), *_quant("y", 0.01, 120, U8)]
    model = _model([node], [("x", U8, [2, 3, 4, 5])], [("y", U8, None)], inits)
    x = _random((2, 3, 4, 5), U8, 9)
    mean = ((x.astype(np.float32) - 128) * np.float32(0.05)).mean(axis=(1, 3))
    expected = np.clip(np.round(mean / np.float32(0.01)) + 120, 0, 255).astype(np.uint8)
    _assert_within_step(_on_gpu(core, model, {"x": x})[0], expected)


# --- matmuls ---------------------------------------------------------------------------------------


def _qgemm_model(a_elem: int, float_out: bool, per_column: bool, trans_b: int,
                 m: int = 5, k: int = 24, n: int = 7) -> onnx.ModelProto:
    """QGemm with alpha 0.75 and an int32 C, quantized or float (no y_scale) output."""
    rng = np.random.default_rng(4)
    # 7-bit weights: ORT's uint8 x int8 kernel saturates 16-bit pair sums of full-range ones
    weight = rng.integers(-64, 64, size=(n, k) if trans_b else (k, n)).astype(np.int8)
    b_scale = rng.uniform(0.01, 0.05, size=n if per_column else ()).astype(np.float32)
    inits = [*_quant("a", 0.02, 3 if a_elem == I8 else 131, a_elem), numpy_helper.from_array(weight, "b"),
             _param("b_s", b_scale), _param("b_z", np.zeros(b_scale.shape), np.int8),
             _param("c", rng.integers(-2000, 2000, size=n), np.int32)]
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c"]
    if not float_out:
        inits += _quant("y", 0.3 * np.sqrt(k / 24), 0 if a_elem == I8 else 128, a_elem)
        names += ["y_s", "y_z"]
    node = helper.make_node("QGemm", names, ["y"], name="qgemm", domain=MS, transB=trans_b, alpha=0.75)
    return _model([node], [("a", a_elem, [m, k])], [("y", TensorProto.FLOAT if float_out else a_elem, None)],
                  inits)


@pytest.mark.parametrize(("a_elem", "float_out", "per_column", "trans_b"), [
    (U8, False, False, 0), (U8, False, True, 1), (U8, True, True, 0), (I8, False, True, 1),
    (I8, True, False, 1)])
def test_qgemm_matches_onnx_runtime(core: ov.Core, a_elem: int, float_out: bool, per_column: bool,
                                    trans_b: int) -> None:
    model = _qgemm_model(a_elem, float_out, per_column, trans_b)
    _check(core, model, {"a": _random((5, 24), a_elem, 6)})


@pytest.mark.parametrize("elem", [TensorProto.UINT16, TensorProto.INT16])
def test_domain_quantize_dequantize_16_bit(core: ov.Core, elem: int) -> None:
    """``UseQDQContribOps``' QuantizeLinear/DequantizeLinear pair, per tensor and per axis."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q", domain=MS),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", domain=MS),
             helper.make_node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], name="qc", domain=MS, axis=1),
             helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["yc"], name="dqc", domain=MS, axis=1)]
    middle = 0 if elem == TensorProto.INT16 else 32768
    inits = [_param("s", 3e-4), _param("z", middle + 11, _NUMPY[elem]),
             _param("sc", [1e-4, 5e-4, 2e-3]),
             _param("zc", [middle, middle - 100, middle + 100], _NUMPY[elem])]
    outputs: list[Spec] = [("q", elem, None), ("y", TensorProto.FLOAT, None), ("qc", elem, None),
               ("yc", TensorProto.FLOAT, None)]
    model = _model(nodes, [("x", TensorProto.FLOAT, [2, 3, 8])], outputs, inits)
    x = np.random.default_rng(2).standard_normal((2, 3, 8)).astype(np.float32) * 4
    _check(core, model, {"x": x}, steps=0)


@pytest.mark.parametrize("a_elem", [U8, I8])
def test_matmul_integer_to_float_matches_onnx_runtime(core: ov.Core, a_elem: int) -> None:
    rng = np.random.default_rng(7)
    weight = rng.integers(-64, 64, size=(32, 12)).astype(np.int8)
    inits = [numpy_helper.from_array(weight, "b"), _param("a_s", 0.015),
             _param("b_s", rng.uniform(0.01, 0.03, 12)),
             _param("a_z", 5 if a_elem == I8 else 120, _NUMPY[a_elem]), _param("b_z", np.zeros(12), np.int8),
             _param("bias", rng.standard_normal(12))]
    node = helper.make_node("MatMulIntegerToFloat", ["a", "b", "a_s", "b_s", "a_z", "b_z", "bias"], ["y"],
                            name="mm", domain=MS)
    model = _model([node], [("a", a_elem, [2, 3, 32])], [("y", TensorProto.FLOAT, None)], inits)
    _check(core, model, {"a": _random((2, 3, 32), a_elem, 8)})


def test_dynamic_quantize_matmul_matches_onnx_runtime(core: ov.Core) -> None:
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.integers(-64, 64, size=(16, 10)).astype(np.int8), "b"),
             _param("b_s", rng.uniform(0.01, 0.03, 10)), _param("b_z", np.zeros(10), np.int8),
             _param("bias", rng.standard_normal(10))]
    node = helper.make_node("DynamicQuantizeMatMul", ["a", "b", "b_s", "b_z", "bias"], ["y"], name="mm",
                            domain=MS)
    model = _model([node], [("a", TensorProto.FLOAT, [4, 16])], [("y", TensorProto.FLOAT, None)], inits)
    _check(core, model, {"a": rng.standard_normal((4, 16)).astype(np.float32)})


def _float_mlp(features: int, hidden: int) -> onnx.ModelProto:
    """x @ w1 + b1 -> Relu -> @ w2: two MatMuls with constant weights, what the block quantizer takes."""
    rng = np.random.default_rng(3)
    inits = [_param("w1", rng.standard_normal((features, hidden)) * 0.1),
             _param("b1", rng.standard_normal(hidden)),
             _param("w2", rng.standard_normal((hidden, 16)) * 0.1)]
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
    actual, expected = _on_gpu(core, model, {"x": x})[0], ort_unfused(model, {"x": x})[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """MatMulNBits' packing: ``8 // bits`` values a byte along the last axis, lowest bits first
    (the last byte padded with zeros)."""
    per = 8 // bits
    pad = (-values.shape[-1]) % per
    values = np.concatenate([values, np.zeros((*values.shape[:-1], pad), values.dtype)], -1)
    grouped = values.reshape(*values.shape[:-1], -1, per).astype(np.uint16)
    return (grouped << (np.arange(per) * bits)).sum(-1).astype(np.uint8)


@pytest.mark.parametrize(("bits", "elem", "zeros", "bias"), [
    (4, TensorProto.FLOAT, "packed", True), (2, TensorProto.FLOAT, "packed", False),
    (8, TensorProto.FLOAT16, "packed", True), (4, TensorProto.FLOAT16, None, False),
    (4, TensorProto.FLOAT, "float", False), (4, TensorProto.FLOAT16, "float", True)])
def test_matmul_nbits_packing_matches_onnx_runtime(core: ov.Core, bits: int, elem: int, zeros: str | None,
                                                   bias: bool) -> None:
    """Hand-packed weights: 2/4/8 bits, zero points packed (an odd block count), one float per block
    (HQQ's) or the default ``2**(bits - 1)``, a bias, float16 data; K = 50 leaves the last block of
    16 partly padding."""
    rng = np.random.default_rng(bits)
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float16
    k, n, block = 50, 12, 16
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
    model = _model([node], [("a", elem, [2, 3, k])], [("y", elem, None)], inits)
    x = rng.standard_normal((2, 3, k)).astype(dtype)
    actual, expected = _on_gpu(core, model, {"a": x})[0], ort_unfused(model, {"a": x})[0]
    assert actual.dtype == expected.dtype
    tolerance = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32), rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize(("shared", "fused"),
                         [(False, "DynamicQuantizeMatMul"), (True, "MatMulIntegerToFloat")])
def test_onnx_runtime_optimized_dynamic_model_runs_whole_on_the_gpu(core: ov.Core, tmp_path: Any,
                                                                    shared: bool, fused: str) -> None:
    """``quantize_dynamic``'s chains as ONNX Runtime's graph optimizer fuses and saves them: one
    DynamicQuantizeMatMul per MatMul, or, where two MatMuls read one quantized input,
    DynamicQuantizeLinear and MatMulIntegerToFloat."""
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    inits = [_param(name, rng.standard_normal((64, 32)) * 0.1) for name in ("w1", "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="m1"),
             helper.make_node("MatMul", ["x", "w2"] if shared else ["a", "w3"], ["b"], name="m2"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    if not shared:
        inits.append(_param("w3", rng.standard_normal((32, 32)) * 0.1))
    float_model = _model(nodes, [("x", TensorProto.FLOAT, ["N", 64])], [("y", TensorProto.FLOAT, ["N", 32])],
                         inits)
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
    _check(core, model, {"x": rng.standard_normal((5, 64)).astype(np.float32)})


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
    _check(core, model, feeds)


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
        assert "QuantizeLinear to 16-bit integers" in compiled.get_property("ENGINE_FALLBACK_REASON")
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
    actual, expected = _on_gpu(core, model, feeds)[0], ort_unfused(model, feeds)[0]
    np.testing.assert_allclose(actual, expected, atol=output_scale(model) * 1.001)  # one step at most


# --- what the device refuses -----------------------------------------------------------------------------


def test_per_channel_parameters_are_refused_by_name(core: ov.Core) -> None:
    """ORT takes per-tensor scales only: a per-channel one leaves the node to another device, and
    compiling on GPU.0 alone says which node and why."""
    node = helper.make_node("QLinearSigmoid", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], name="sigmoid",
                            domain=MS)
    inits = [_param("x_s", [0.1, 0.2]), _param("x_z", 128, np.uint8), *_quant("y", 1 / 255, 0, U8)]
    model = _model([node], [("x", U8, [2, 2])], [("y", U8, None)], inits)
    assert core.query_model(model, "GPU") == {}
    with pytest.raises(UnsupportedOpError, match=r"sigmoid.*2 values; accepted: one"):
        core.compile_model(model, "GPU.0", F32)


# --- on CUDA ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_qoperator_model_on_cuda_matches_onnx_runtime(tmp_path: Any) -> None:
    model = _quantized_cnn(tmp_path, quant_format=quantization.QuantFormat.QOperator)
    feeds = {"x": np.random.default_rng(5).standard_normal((32, 3, 8, 8)).astype(np.float32)}
    _check(ov.Core(), model, feeds)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("bits", [4, 8])
def test_matmul_nbits_on_cuda_matches_onnx_runtime(bits: int) -> None:
    model = _block_quantized(256, 128, bits=bits, block_size=32)
    x = np.random.default_rng(1).standard_normal((24, 256)).astype(np.float32)
    actual, expected = _on_gpu(ov.Core(), model, {"x": x})[0], ort_unfused(model, {"x": x})[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-3)  # TF32 may run the float matmul


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("a_elem", "float_out"), [(U8, False), (I8, True)])
def test_qgemm_on_cuda_int8_kernel_matches_onnx_runtime(a_elem: int, float_out: bool) -> None:
    """M > 16 and K, N multiples of 8: the product runs on torch's int8 kernel."""
    model = _qgemm_model(a_elem, float_out, per_column=True, trans_b=1, m=40, k=64, n=48)
    _check(ov.Core(), model, {"a": _random((40, 64), a_elem, 6)})
