"""MaxPool and AveragePool of channels-last data on CUDA (the Triton passes of
``devices/gpu/ops/_pooling``): whole models against ONNX Runtime over ONNX's window forms, and the
passes against ATen's pools bit for bit (NaNs included for the max)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

_WINDOWS: list[dict[str, Any]] = [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [0, 1, 2, 0], "dilations": [2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [1, 5], "pads": [0, 2, 0, 2]},
]


_AVERAGE_WINDOWS: list[dict[str, Any]] = [
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 2], "ceil_mode": 1, "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [2, 0, 1, 1], "dilations": [2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER", "count_include_pad": 1},
]


def _conv_pool_model(channels: int, window: dict[str, Any], pool: str = "MaxPool") -> onnx.ModelProto:
    weight = np.random.default_rng(1).standard_normal((channels, 3, 3, 3)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(pool, ["c"], ["y"], **window)]
    graph = helper.make_graph(nodes, "conv_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [None, 3, 19, 23])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


@pytest.mark.parametrize(("pool", "window"), [("MaxPool", w) for w in _WINDOWS]
                         + [("AveragePool", w) for w in _AVERAGE_WINDOWS],
                         ids=lambda w: w if isinstance(w, str) else "-".join(f"{k}{v}" for k, v in w.items()))
@pytest.mark.parametrize("channels", [5, 64, 160])
def test_channels_last_pool_matches_onnx_runtime(channels: int, pool: str, window: dict[str, Any]) -> None:
    import onnxruntime as ort

    import inferplex as ov

    model = _conv_pool_model(channels, window, pool)
    x = np.random.default_rng(0).standard_normal((3, 3, 19, 23)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    core = ov.Core()
    for precision, layout, tolerance in (("f32", "YES", 1e-4), ("f16", "AUTO", 2e-2), ("bf16", "AUTO", 1e-1)):
        config = {"INFERENCE_PRECISION_HINT": precision, "GPU_CHANNELS_LAST": layout}
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "GPU.0", config)
        request = compiled.create_infer_request()
        for _ in range(2):  # capture, then replay
            got = request.infer({"x": x})[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, err_msg=precision)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_max_pool_pass_equals_aten_with_nans(dtype: torch.dtype) -> None:
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _pooling

    class Window:  # the strides and dilations the pass reads from the node's window
        def __init__(self, strides: list[int], dilations: list[int]) -> None:
            self.strides, self.dilations = strides, dilations

    cases = [((4, 64, 56, 56), (3, 3), (2, 2), (1, 1), (1, 1), False),
             ((2, 3, 17, 19), (3, 3), (2, 2), (1, 1), (1, 1), True),
             ((2, 200, 9, 10), (3, 2), (1, 2), (1, 0), (2, 1), False),
             ((3, 130, 7, 7), (5, 5), (1, 1), (2, 2), (1, 1), False)]
    generator = torch.Generator(device="cuda").manual_seed(0)
    for shape, kernel, strides, pads, dilations, ceil in cases:
        x = torch.randn(shape, device="cuda", dtype=dtype, generator=generator)
        x = x.contiguous(memory_format=torch.channels_last)
        x[0, 1, 2, 3] = float("nan")
        x[-1, -1, 0, 0] = float("-inf")
        onnx_pads = [pads[0], pads[1], pads[0], pads[1]]
        ends = []
        for axis, size in enumerate(shape[2:]):
            out = _pooling._pool_output(size, pads[axis], pads[axis], kernel[axis], strides[axis],
                                        dilations[axis], ceil)
            reach = (out - 1) * strides[axis] + dilations[axis] * (kernel[axis] - 1) + 1
            ends.append(reach - size - pads[axis])
        got = _pooling._channels_last_max_pool(x, kernel, Window(list(strides), list(dilations)),  # type: ignore[arg-type]
                                               onnx_pads, ends)
        want = F.max_pool2d(x, kernel, strides, pads, dilations, ceil)
        assert got.shape == want.shape and got.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("scale", "zero", "low", "high"), [(0.05, 0, 0, 255), (0.0123, -128, -128, 127),
                                                            (0.2, 3, -128, 127)])
def test_fake_quantized_max_pool_pass_equals_the_pool_then_the_fake_quantize(
        dtype: torch.dtype, scale: float, zero: int, low: int, high: int) -> None:
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _pooling
    from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize

    class Window:
        strides, dilations = [2, 2], [1, 1]

    generator = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn((4, 96, 33, 35), device="cuda", dtype=dtype, generator=generator)
    x = (x * 3).contiguous(memory_format=torch.channels_last)
    got = _pooling._channels_last_max_pool(x, (3, 3), Window(), [1, 1, 1, 1], [1, 1],  # type: ignore[arg-type]
                                           [scale, zero, low, high])
    scale_tensor = torch.tensor(scale, dtype=torch.float32, device="cuda")
    want = quantize_dequantize(F.max_pool2d(x, 3, 2, 1), scale_tensor, scale, zero, low, high)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_average_pool_pass_equals_aten(dtype: torch.dtype) -> None:
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _pooling

    class Window:
        def __init__(self, strides: list[int]) -> None:
            self.strides, self.dilations = strides, [1, 1]

    cases = [((4, 64, 28, 28), (3, 3), (1, 1), (1, 1)), ((2, 96, 17, 19), (3, 3), (2, 2), (1, 1)),
             ((2, 130, 9, 10), (2, 2), (2, 2), (0, 0)), ((3, 7, 11, 11), (5, 3), (2, 1), (2, 1))]
    generator = torch.Generator(device="cuda").manual_seed(2)
    for shape, kernel, strides, pads in cases:
        x = torch.randn(shape, device="cuda", dtype=dtype, generator=generator)
        x = x.contiguous(memory_format=torch.channels_last)
        for ceil in (False, True):
            for count_pads in (False, True):
                onnx_pads = [pads[0], pads[1], pads[0], pads[1]]
                ends = []
                for axis, size in enumerate(shape[2:]):
                    out = _pooling._pool_output(size, pads[axis], pads[axis], kernel[axis], strides[axis], 1,
                                                ceil)
                    ends.append((out - 1) * strides[axis] + kernel[axis] - size - pads[axis])
                got = _pooling._channels_last_average_pool(x, kernel, Window(list(strides)),  # type: ignore[arg-type]
                                                           onnx_pads, ends, count_pads)
                want = F.avg_pool2d(x, kernel, strides, pads, ceil, count_pads)
                assert got.shape == want.shape and torch.equal(got, want), (shape, kernel, ceil, count_pads)
