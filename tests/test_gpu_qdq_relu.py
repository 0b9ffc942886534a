"""QDQ convolutions whose QuantizeLinear holds a Relu in its range, on the GPU device.

``quantize_static`` folds the Relu after a Conv into the QuantizeLinear that follows
(zero point at the quantized type's minimum: every value <= 0 saturates to 0).  The
GPU device runs such a Conv (and a residual Add right after it) as its Conv + bias
[+ Add] + Relu call, followed by the pair's fake-quantize, in one call recorded under
the Conv's name: the QuantizeLinear, DequantizeLinear and Add leave the profiling
records.  A pair with another zero point (whose range holds negative values) stays a
FakeQuantize call of its own.

The hand-written models here have exact arithmetic: inputs are multiples of 1/64 (at
most 1, a residual at most 4), 27 weights per output -1, 0 or 1, biases multiples of
1/64 of at most 1/4 and the scale 1/16, so every sum is a multiple of 1/64 below 32,
exact in float32 and float16 whatever order a kernel adds in, and ``y / scale`` is a
multiple of 1/4: ties (.5), ratios in (-0.5, 0) (which round to -0) and values beyond
the 8-bit range (a patch of the input matching the first output channel's weights)
all occur.  Results then equal ONNX Runtime's to the bit under both precisions.  Under
``torch.compile`` the fake-quantize is written as elementwise ops, which must give the
kernel's numbers bit for bit.  ``quantize_static``'s own CNNs, whose stem and strided
Convs take this form, are checked in ``test_gpu_qdq_conv.py``.  The emulated tests run
on ``GPU.0`` on torch's CPU; the ``gpu`` ones need CUDA.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quantized_models import ort_unfused, profiled

import inferplex as ov

from conftest import make_model

torch = pytest.importorskip("torch")

_SCALE = 1.0 / 16
_OUT, _SIDE, _PRODUCTS = 4, 8, 27
_ZERO_TYPES = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _conv_model(data_type: int, zero: int | None, residual: bool, kernel: int = 3,
                extra_output: str | None = None) -> onnx.ModelProto:
    """x -> Conv (bias) [-> Add r] -> QuantizeLinear -> DequantizeLinear -> y on exact numbers (see the
    module docstring); ``zero`` None: the Conv's (or Add's) float output itself is y, with no pair.
    ``extra_output``: a value also made a graph output (so read twice)."""
    weight, bias = _conv_parameters(kernel)
    pad, channels = kernel // 2, weight.shape[1]
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")]
    conv_out = "c" if residual or zero is not None else "y"
    nodes = [helper.make_node("Conv", ["x", "w", "b"], [conv_out], name="conv", pads=[pad] * 4)]
    inputs = [("x", TensorProto.FLOAT, ["N", channels, _SIDE, _SIDE])]
    last = conv_out
    if residual:
        last = "s" if zero is not None else "y"
        nodes.append(helper.make_node("Add", ["c", "r"], [last], name="add"))
        inputs.append(("r", TensorProto.FLOAT, ["N", _OUT, _SIDE, _SIDE]))
    if zero is not None:
        inits += [numpy_helper.from_array(np.array(_SCALE, np.float32), "qs"),
                  numpy_helper.from_array(np.array(zero, _ZERO_TYPES[data_type]), "qz")]
        nodes += [helper.make_node("QuantizeLinear", [last, "qs", "qz"], ["q8"], name="q"),
                  helper.make_node("DequantizeLinear", ["q8", "qs", "qz"], ["y"], name="dq")]
    shape = ["N", _OUT, _SIDE, _SIDE]
    outputs = [("y", TensorProto.FLOAT, shape)]
    if extra_output is not None:
        outputs.append((extra_output, data_type if extra_output == "q8" else TensorProto.FLOAT, shape))
    return make_model(nodes, inputs, outputs, inits, opset=13)


def _conv_parameters(kernel: int) -> tuple[np.ndarray, np.ndarray]:
    """(weight, bias): 27 weights per output channel in {-1, 0, 1} (the first channel's all +-1),
    over 3 input channels of 3x3 or 27 of 1x1; biases multiples of 1/64 of at most 1/4."""
    rng = np.random.default_rng(40 + kernel)
    shape = (_OUT, _PRODUCTS // (kernel * kernel), kernel, kernel)
    weight = rng.integers(-1, 2, shape).astype(np.float32)
    weight[0] = rng.choice([-1.0, 1.0], shape[1:])
    return weight, (rng.integers(-16, 17, _OUT) / 64).astype(np.float32)


def _feeds(seed: int, residual: bool, kernel: int = 3) -> dict[str, np.ndarray]:
    """Multiples of 1/64.  In the first item one window equals the first channel's weights (its
    output is about 27, far beyond the 8-bit range at scale 1/16) and another their negation;
    the second item is zero but for four pixels, 3 apart, that make the first channel's output
    there (the window's centre tap times the pixel, plus the bias) -0.25, -0.5, 0.5 and 2.5
    times the scale: a ratio that rounds to -0, and ties."""
    weight, bias = _conv_parameters(kernel)
    rng = np.random.default_rng(seed)
    x = (rng.integers(-64, 65, (2, weight.shape[1], _SIDE, _SIDE)) / 64).astype(np.float32)
    x[0, :, 1:1 + kernel, 1:1 + kernel] = weight[0]
    x[0, :, 4:4 + kernel, 4:4 + kernel] = -weight[0]
    x[1] = 0
    tap = weight[0, 0, kernel // 2, kernel // 2]
    for index, ratio in enumerate((-0.25, -0.5, 0.5, 2.5)):
        x[1, 0, 1 + 3 * (index // 2), 1 + 3 * (index % 2)] = (ratio * _SCALE - bias[0]) / tap
    feeds = {"x": x}
    if residual:
        feeds["r"] = (rng.integers(-256, 257, (2, _OUT, _SIDE, _SIDE)) / 64).astype(np.float32)
        feeds["r"][1] = 0
    return feeds


def _check_cases_occur(residual: bool, kernel: int, feeds: dict[str, np.ndarray]) -> None:
    """The float model's ``y / scale`` (ONNX Runtime's) holds ties, ratios in (-0.5, 0), values
    below -1 and beyond 255 above the zero point, all exact in float16: the cases where the
    Relu's fold could go wrong are all tested, at both precisions."""
    (y,) = ort_unfused(_conv_model(TensorProto.UINT8, None, residual, kernel), feeds)
    ratio = y / _SCALE
    assert np.any(ratio % 1 == 0.5) and np.any((ratio > -0.5) & (ratio < 0)) and np.any(ratio < -1)
    assert np.any(ratio > 256) and np.array_equal(y.astype(np.float16).astype(np.float32), y)


_MINIMUM = {TensorProto.UINT8: 0, TensorProto.INT8: -128}


def _check_relu_range(core: ov.Core, data_type: int, residual: bool, precision: str, kernel: int = 3) -> None:
    """The Conv [+ Add] -> Q(zero point at the minimum) -> DQ chain runs as one call recorded as the
    Conv and equals ONNX Runtime to the bit."""
    model = _conv_model(data_type, _MINIMUM[data_type], residual, kernel)
    feeds = _feeds(7, residual, kernel)
    _check_cases_occur(residual, kernel, feeds)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got).any()  # every value <= 0 became +0, as the Relu and ONNX make it
    assert records["conv"] == "Conv" and not {"q", "dq", "add"} & set(records)


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_conv_with_relu_range_pair_runs_as_one_call_equal_to_onnx_runtime(core: ov.Core, data_type: int,
                                                                           residual: bool,
                                                                           precision: str) -> None:
    _check_relu_range(core, data_type, residual, precision)


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize(("data_type", "zero"), [(TensorProto.UINT8, 3), (TensorProto.INT8, 0)])
def test_conv_pair_with_another_zero_point_keeps_negative_values(core: ov.Core, data_type: int, zero: int,
                                                                 precision: str) -> None:
    model = _conv_model(data_type, zero, True)
    feeds = _feeds(8, True)
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    np.testing.assert_array_equal(got, want)
    assert (got < 0).any()  # the range reaches below 0: no Relu may run
    assert records["conv"] == "Conv" and records["add"] == "Add" and records["dq"] == "FakeQuantize"
    assert "q" not in records


@pytest.mark.parametrize("read_twice", ["c", "q8"])
def test_conv_pair_whose_values_are_read_elsewhere_keeps_them(core: ov.Core, read_twice: str) -> None:
    model = _conv_model(TensorProto.UINT8, 0, False, extra_output=read_twice)
    feeds = _feeds(9, False)
    compiled = core.compile_model(model, "GPU.0", {"ENABLE_PROFILING": True})
    request = compiled.create_infer_request()
    results = request.infer(feeds)
    for index, want in enumerate(ort_unfused(model, feeds)):
        np.testing.assert_array_equal(np.asarray(results[index]), want)
    records = {r.node_name: r.node_type for r in request.get_profiling_info()}
    assert records["conv"] == "Conv"
    # the Conv's float output read twice: the pair is a fake-quantize call of its own; the 8-bit
    # data read twice: its QuantizeLinear runs for the other reader, and the DequantizeLinear is
    # a fake-quantize call of the Conv's output
    want_records = {"dq": "FakeQuantize"} if read_twice == "c" else {"q": "QuantizeLinear",
                                                                    "dq": "FakeQuantize"}
    assert {name: records.get(name) for name in want_records} == want_records


def test_conv_with_batch_norm_before_the_relu_range_pair_folds_both(core: ov.Core) -> None:
    model = _conv_model(TensorProto.UINT8, 0, False)
    channels = np.arange(_OUT, dtype=np.float32)
    params = {"g": 1 + channels / 8, "bb": channels / 16 - 0.1, "m": channels / 32, "v": 1 + channels / 4}
    model.graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in params.items())
    model.graph.node[0].output[0] = "raw"
    model.graph.node.insert(1, helper.make_node("BatchNormalization", ["raw", *params], ["c"], name="bn"))
    feeds = _feeds(12, False)
    got, records = profiled(core, model, feeds)
    (want,) = ort_unfused(model, feeds)
    # the folded weights sum in another order than the Conv and the normalization: a value on a
    # rounding boundary may move by one step
    np.testing.assert_allclose(got, want, rtol=0, atol=_SCALE * 1.01)
    assert np.mean(got != want) < 0.02 and not np.signbit(got).any()
    assert records["conv"] == "Conv" and not {"bn", "q", "dq"} & set(records)


def test_relu_range_pair_whose_values_an_int8_matmul_reads_keeps_the_conv_output(core: ov.Core) -> None:
    # the DequantizeLinear is read by a MatMul that runs as an int8 matmul, and by the graph's
    # output: the matmul quantizes the Conv's float output itself, so the Conv runs on its own
    # (no Relu folded in), the pair is one fake-quantize call and the QuantizeLinear has no reader
    model = _conv_model(TensorProto.UINT8, 0, False)
    weight = np.random.default_rng(13).integers(-128, 128, (_SIDE, _SIDE), dtype=np.int8)
    model.graph.initializer.extend([numpy_helper.from_array(weight, "mw"),
                                    numpy_helper.from_array(np.array(0.01, np.float32), "ms")])
    model.graph.node.extend([helper.make_node("DequantizeLinear", ["mw", "ms"], ["mwf"], name="dqw"),
                             helper.make_node("MatMul", ["y", "mwf"], ["mm"], name="mm")])
    shape = ["N", _OUT, _SIDE, _SIDE]
    model.graph.output.append(helper.make_tensor_value_info("mm", TensorProto.FLOAT, shape))
    feeds = _feeds(14, False)
    compiled = core.compile_model(model, "GPU.0", {"ENABLE_PROFILING": True})
    request = compiled.create_infer_request()
    results = request.infer(feeds)
    want = ort_unfused(model, feeds)
    np.testing.assert_array_equal(np.asarray(results[0]), want[0])
    np.testing.assert_allclose(np.asarray(results[1]), want[1], rtol=1e-5, atol=1e-5)
    records = {r.node_name: r.node_type for r in request.get_profiling_info()}
    assert records["conv"] == "Conv" and records["dq"] == "FakeQuantize" and "mm" in records
    assert "q" not in records


# --- the fake-quantize under torch.compile ----------------------------------------------------


_PARAMETERS = ((0.0625, 0, 0, 255), (0.0237, -128, -128, 127), (0.031, 0, -128, 127), (0.0173, 131, 0, 255))
"""(scale, zero point, low, high): uint8 and int8 ranges, zero points at the minimum, at 0 inside
the range, elsewhere; a power-of-two scale (exact ties) and others."""


def _fake_quantize_inputs(dtype: Any) -> Any:
    """Random values, exact ties and near-ties of each scale, small ratios either side of 0
    (-0.4 rounds to -0), signed zeros and values far beyond the 8-bit ranges."""
    rng = np.random.default_rng(33)
    parts = [rng.standard_normal(4096).astype(np.float32) * 4, np.array([0.0, -0.0, np.inf, -np.inf],
                                                                        np.float32)]
    for scale, *_ in _PARAMETERS:
        step = np.float32(scale)
        ratios = np.concatenate([np.arange(-300, 300) + 0.5, [-0.4, -0.1, 0.4, -1e-30, 1e5, -1e5]])
        parts.append(ratios.astype(np.float32) * step)
        parts.append(np.nextafter(parts[-1], np.float32(np.inf)))
    return torch.from_numpy(np.concatenate(parts)).to(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fake_quantize_under_torch_compile_equals_the_kernel_bit_for_bit(dtype: str) -> None:
    from torch._inductor.utils import run_and_get_code

    from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize

    x = _fake_quantize_inputs(getattr(torch, dtype))
    scales = [torch.tensor(scale, dtype=torch.float32) for scale, *_ in _PARAMETERS]

    def all_parameters(x: Any, scales: list[Any]) -> tuple[Any, ...]:
        return tuple(quantize_dequantize(x, scale, float(np.float32(value)), zero, low, high)
                     for scale, (value, zero, low, high) in zip(scales, _PARAMETERS, strict=True))

    torch._dynamo.reset()
    compiled, code = run_and_get_code(torch.compile(all_parameters, dynamic=False), x, scales)
    eager = all_parameters(x, scales)
    bits = torch.int32 if dtype == "float32" else torch.int16
    for got, want in zip(compiled, eager, strict=True):
        assert got.dtype == want.dtype
        assert torch.equal(got.view(bits), want.view(bits))  # signed zeros included
    # the elementwise form left no call of the kernel (which Inductor cannot fuse) in the code
    assert not any("fake_quantize" in source for source in code)


def test_compiled_tier_runs_the_relu_range_conv_as_onnx_runtime_does(core: ov.Core) -> None:
    model = _conv_model(TensorProto.INT8, -128, True)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2  # static shapes: the tiered compile
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 2
    config = {"TORCH_COMPILE": "YES", "INFERENCE_PRECISION_HINT": "f16"}
    compiled = core.compile_model(model, "GPU.0", config)
    feeds = _feeds(10, True)
    compiled(feeds)
    end = time.monotonic() + 240
    while compiled.get_property("COMPILED_TIER") == "COMPILING" and time.monotonic() < end:
        time.sleep(0.1)
    assert compiled.get_property("COMPILED_TIER") == "COMPILED"
    for seed in (10, 11):
        feeds = _feeds(seed, True)
        np.testing.assert_array_equal(np.asarray(compiled(feeds)[0]), ort_unfused(model, feeds)[0])


# --- on CUDA -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("data_type", [TensorProto.UINT8, TensorProto.INT8])
def test_relu_range_conv_on_cuda_equals_onnx_runtime(data_type: int, residual: bool, precision: str) -> None:
    # 1x1 kernels: cuDNN may pick a transform-based algorithm (Winograd) for 3x3 ones, whose
    # rounding would make the exact sums inexact
    _check_relu_range(ov.Core(), data_type, residual, precision, kernel=1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_relu_range_conv_on_cuda_replays_and_compiles_as_onnx_runtime(precision: str) -> None:
    model = _conv_model(TensorProto.UINT8, 0, True, kernel=1)
    for port in model.graph.input:
        port.type.tensor_type.shape.dim[0].dim_value = 2
    config = {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": precision}
    compiled = ov.Core().compile_model(model, "GPU.0", config)
    for seed in range(3):  # the eager tier, its CUDA graphs replayed
        feeds = _feeds(seed, True, kernel=1)
        np.testing.assert_array_equal(np.asarray(compiled(feeds)[0]), ort_unfused(model, feeds)[0])
    end = time.monotonic() + 300
    while compiled.get_property("COMPILED_TIER") == "COMPILING" and time.monotonic() < end:
        time.sleep(0.1)
    assert compiled.get_property("COMPILED_TIER") == "COMPILED"
    for seed in range(3, 6):
        feeds = _feeds(seed, True, kernel=1)
        np.testing.assert_array_equal(np.asarray(compiled(feeds)[0]), ort_unfused(model, feeds)[0])
