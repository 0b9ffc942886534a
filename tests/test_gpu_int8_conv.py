"""QDQ convolutions as int8 convolutions on CUDA (``devices/gpu/ops/_int8_conv``): a quantized
ResNet against ONNX Runtime through the public API, and the kernel against the integer convolution
of the same levels (exact sums in float64) followed by the chain's steps in torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch
from quantized_models import dynamic_quantize_linear, ort_unfused, output_scale, quantized

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

quantization = pytest.importorskip("onnxruntime.quantization")


def _resnet() -> onnx.ModelProto:
    """A stem, a basic block of 64 channels, a downsampling block to 128 (with its 1 x 1
    convolution), a global pool and a Linear head: ResNet's convolution forms."""
    from torch import nn
    from torch_export import export_onnx

    torch.manual_seed(5)

    def block(inputs: int, outputs: int, stride: int) -> nn.Module:
        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.one = nn.Sequential(nn.Conv2d(inputs, outputs, 3, stride, 1), nn.BatchNorm2d(outputs),
                                         nn.ReLU())
                self.two = nn.Sequential(nn.Conv2d(outputs, outputs, 3, 1, 1), nn.BatchNorm2d(outputs))
                self.down = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride), nn.BatchNorm2d(outputs)) \
                    if stride != 1 or inputs != outputs else nn.Identity()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return torch.relu(self.two(self.one(x)) + self.down(x))

        return Block()

    net = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), block(64, 64, 1),
                        block(64, 128, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    for module in net.modules():
        if isinstance(module, nn.BatchNorm2d):  # statistics of a trained model, not the identity
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
    return export_onnx(net.eval(), (torch.randn(2, 3, 24, 24),), ["x"], {"x": {0: "N"}})


@pytest.mark.parametrize(("per_channel", "activation", "config"), [
    (True, "QInt8", {"INFERENCE_PRECISION_HINT": "f16"}),
    (False, "QUInt8", {"INFERENCE_PRECISION_HINT": "f16"}),
    (True, "QUInt8", {"GPU_CHANNELS_LAST": "YES"}),
], ids=["per-channel-int8-f16", "per-tensor-uint8-f16", "per-channel-uint8-f32"])
def test_qdq_resnet_runs_int8_convolutions_and_matches_onnx_runtime(tmp_path: Any, monkeypatch: Any,
                                                                    per_channel: bool, activation: str,
                                                                    config: dict[str, str]) -> None:
    from inferplex.devices.gpu.ops import _qdq_conv

    calls: list[tuple[tuple[int, ...], torch.dtype]] = []
    original = _qdq_conv.int8_conv

    def spy(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append((tuple(x.shape), x.dtype))
        return original(x, *args, **kwargs)

    monkeypatch.setattr(_qdq_conv, "int8_conv", spy)
    model = quantized(tmp_path, _resnet(), True, per_channel=per_channel,
                      activation_type=getattr(quantization.QuantType, activation))
    x = np.random.default_rng(3).standard_normal((4, 3, 24, 24)).astype(np.float32)
    got = _infer(model, config, x)
    (want,) = ort_unfused(model, {model.graph.input[0].name: x})
    step = output_scale(model)
    # every Conv past the stem (3 input channels) ran as an int8 convolution: the block's two,
    # and the downsampling block's two and its 1 x 1; each block's second Conv read the levels
    # its first wrote (int8 data, the pads around it)
    assert len(calls) >= 5 and {dtype for _, dtype in calls} == {torch.int8, _FLOAT[config.get(
        "INFERENCE_PRECISION_HINT", "f32")]}
    assert sum(dtype == torch.int8 for _, dtype in calls) >= 2
    # exact integer sums where ONNX Runtime sums float products; in f16 each step also rounds to
    # f16 and moves some values by a step, as the float convolutions did
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 3.01)
    assert np.abs(got - want).mean() < step / 2


_FLOAT = {"f16": torch.float16, "f32": torch.float32}


def _infer(model: onnx.ModelProto, config: dict[str, str], x: np.ndarray) -> np.ndarray:
    import inferplex as ov

    compiled = ov.Core().compile_model(model, "GPU.0", config)
    return np.asarray(compiled.create_infer_request().infer({compiled.input(0): x})[0], dtype=np.float32)


@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_qdq_resnet_handing_levels_between_convolutions_changes_no_value(tmp_path: Any, monkeypatch: Any,
                                                                        activation: str) -> None:
    from inferplex.devices.gpu import optimize

    model = quantized(tmp_path, _resnet(), True, per_channel=True,
                      activation_type=getattr(quantization.QuantType, activation))
    x = np.random.default_rng(4).standard_normal((4, 3, 24, 24)).astype(np.float32)
    config = {"INFERENCE_PRECISION_HINT": "f16"}
    handed = _infer(model, config, x)
    monkeypatch.setattr(optimize, "level_handoffs", lambda *args: ({}, {}))
    # each Conv then makes its levels from the float values the one before wrote
    np.testing.assert_array_equal(_infer(model, config, x), handed)


def _reference(levels: torch.Tensor, zero: int, weight: torch.Tensor, scale: torch.Tensor,
               bias: torch.Tensor | None, pads: list[int], strides: list[int], dilations: list[int],
               dtype: torch.dtype, residual: torch.Tensor | None, relu: bool, first: Any, other: Any,
               second: Any) -> torch.Tensor:
    """The chain in torch: the integer convolution of ``levels - zero`` (float64, exact), times the
    scale, + bias (+ residual, Relu) in float32, rounded to ``dtype``, then the pairs."""
    from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize

    data = torch.nn.functional.pad(levels.double() - zero, (pads[1], pads[3], pads[0], pads[2]))
    sums = torch.nn.functional.conv2d(data, weight.double(), stride=strides, dilation=dilations)
    values = sums.float() * scale.reshape(1, -1, 1, 1)
    if bias is not None:
        values = values + bias.float().reshape(1, -1, 1, 1)
    if residual is not None:
        values = values + residual.float()
    if relu:
        values = torch.relu(values)
    values = values.to(dtype)
    if first is not None:
        values = quantize_dequantize(values, *first)
    if other is not None:
        values = quantize_dequantize((values.float() + other.float()).to(dtype), *second)
    return values


def _step(scale: float, zero: int, low: int, high: int) -> tuple[Any, ...]:
    return torch.tensor(scale, device="cuda"), scale, zero, low, high


_FORMS = [  # channels, out channels, kernel, pads (begins, ends), strides, dilations
    (64, 64, (3, 3), [1, 1, 1, 1], [1, 1], [1, 1]),
    (64, 96, (3, 3), [1, 1, 1, 1], [2, 2], [1, 1]),
    (128, 128, (1, 1), [0, 0, 0, 0], [2, 2], [1, 1]),
    (128, 64, (3, 2), [2, 0, 1, 1], [1, 2], [2, 1]),
]


@pytest.mark.parametrize("form", _FORMS,
                         ids=lambda f: f"{f[0]}-{f[1]}-{f[2][0]}x{f[2][1]}-s{f[4][0]}-d{f[5][0]}")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["f16", "f32"])
@pytest.mark.parametrize("chain", ["relu-range", "pair-add-pair", "sums"])
@pytest.mark.parametrize("signed", [True, False], ids=["int8", "uint8"])
def test_int8_conv_matches_the_integer_convolution_and_its_chain(form: Any, dtype: torch.dtype, chain: str,
                                                                  signed: bool) -> None:
    from inferplex.devices.gpu.ops._int8_conv import int8_conv, int8_conv_arrays, takes

    channels, out_channels, kernel, pads, strides, dilations = form
    generator = torch.Generator().manual_seed(channels + out_channels)
    low, high = (-128, 127) if signed else (0, 255)
    zero = -3 if signed else 131
    x_scale = 0.037
    levels = torch.randint(low, high + 1, (3, channels, 11, 13), generator=generator, dtype=torch.int32)
    x = ((levels - zero).double() * x_scale).to(dtype)  # the pair's float values, as the data arrives
    weight = torch.randint(-127, 128, (out_channels, channels, *kernel), generator=generator,
                           dtype=torch.int8)
    w_scale = (torch.rand(out_channels, generator=generator) * 0.004 + 0.001).numpy()
    bias = torch.randn(out_channels, generator=generator).to(dtype)
    rows, sums, scale = int8_conv_arrays(weight.numpy(), w_scale, x_scale)
    packed = (torch.from_numpy(rows).cuda(), torch.from_numpy(sums).cuda(), torch.from_numpy(scale).cuda(),
              x_scale, zero, signed)
    cuda_x = x.cuda().contiguous(memory_format=torch.channels_last)
    assert takes(cuda_x, packed, kernel, pads)
    reference_args: dict[str, Any] = {"residual": None, "relu": False, "first": None, "other": None,
                                      "second": None}
    if chain == "relu-range":
        out_size = int8_conv(cuda_x, packed, kernel, None, pads, strides, dilations).shape
        residual = torch.randn(out_size, generator=generator).to(dtype).cuda().contiguous(
            memory_format=torch.channels_last)
        reference_args.update(residual=residual, relu=True,
                              first=_step(0.02, -128 if signed else 0, low, high))
    elif chain == "pair-add-pair":
        out_size = int8_conv(cuda_x, packed, kernel, None, pads, strides, dilations).shape
        other = torch.randn(out_size, generator=generator).to(dtype).cuda().contiguous(
            memory_format=torch.channels_last)
        reference_args.update(first=_step(0.03, 2, low, high), other=other, second=_step(0.05, 7, low, high))
    got = int8_conv(cuda_x, packed, kernel, bias.cuda(), pads, strides, dilations, **reference_args)
    want = _reference(levels.cuda(), zero, weight.cuda(), torch.from_numpy(scale).cuda(), bias.cuda(), pads,
                      strides, dilations, dtype, **reference_args)
    assert got.shape == want.shape and got.dtype == dtype
    assert got.is_contiguous(memory_format=torch.channels_last)
    if chain == "sums":  # the sums are exact; the float32 epilogue may fuse a multiply-add
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-6 if dtype == torch.float32 else 1e-3,
                                   atol=1e-5)
    else:  # a value within float32 rounding of a pair's boundary may land a step away
        step = 0.05 if chain == "pair-add-pair" else 0.02
        difference = (got.float() - want.float()).abs()
        assert difference.max() <= step * 1.01 + 1e-3 and (difference > 1e-3).float().mean() < 1e-3


@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_dynamic_resnet_runs_int8_convolutions_and_matches_onnx_runtime(tmp_path: Any, monkeypatch: Any,
                                                                        precision: str) -> None:
    from inferplex.devices.gpu.ops import _fused_quantized

    calls: list[torch.dtype] = []
    original = _fused_quantized.int8_conv

    def spy(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(x.dtype)
        return original(x, *args, **kwargs)

    monkeypatch.setattr(_fused_quantized, "int8_conv", spy)
    model = quantized(tmp_path, _resnet(), False)
    x = np.random.default_rng(6).standard_normal((4, 3, 24, 24)).astype(np.float32)
    got = _infer(model, {"INFERENCE_PRECISION_HINT": precision}, x)
    (want,) = ort_unfused(model, {model.graph.input[0].name: x})
    # the five Convs past the stem (3 input channels) read their quantizer's levels: the blocks'
    # two each and the downsampling block's 1 x 1, which shares its quantizer with the block's first
    # (each time the program runs)
    assert calls and set(calls) == {torch.int8} and len(calls) % 5 == 0
    # exact integer sums where ONNX Runtime sums them too; each output is rounded to the program's
    # type, and the quantizers then see those values (a level moves where one sits on a boundary)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=(2e-2 if precision == "f16" else 5e-2) * scale)
    assert np.abs(got - want).mean() < (2e-3 if precision == "f16" else 8e-3) * scale


def test_dynamic_resnet_recording_value_ranges_in_the_convolutions_changes_no_value(tmp_path: Any,
                                                                                   monkeypatch: Any) -> None:
    from inferplex.devices.gpu import optimize

    model = quantized(tmp_path, _resnet(), False)
    x = np.random.default_rng(9).standard_normal((4, 3, 24, 24)).astype(np.float32)
    config = {"INFERENCE_PRECISION_HINT": "f16"}
    recorded = _infer(model, config, x)
    planned = optimize.level_quantizers

    def without_ranges(*args: Any) -> Any:
        writes, reads, _ = planned(*args)
        return writes, reads, set()

    monkeypatch.setattr(optimize, "level_quantizers", without_ranges)
    # each quantizer then finds its data's range in a pass of its own: the same scale and levels
    np.testing.assert_array_equal(_infer(model, config, x), recorded)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=["f16", "bf16", "f32"])
@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [2, 0, 1, 3]], ids=["pad1", "asymmetric"])
def test_dynamic_levels_are_dynamic_quantize_linear_with_pads(dtype: torch.dtype, pads: list[int]) -> None:
    from inferplex.devices.gpu.ops._int8_conv import dynamic_takes, quantize_dynamic_padded

    generator = torch.Generator().manual_seed(7)
    x = (torch.randn(3, 128, 9, 11, generator=generator) * 2 + 0.7).to(dtype)
    cuda_x = x.cuda().contiguous(memory_format=torch.channels_last)
    assert dynamic_takes(cuda_x, pads)
    levels, scale, zero = quantize_dynamic_padded(cuda_x, pads)
    want, want_scale, want_zero = dynamic_quantize_linear(x.float().numpy())
    assert levels.dtype == torch.int8 and levels.is_contiguous(memory_format=torch.channels_last)
    assert float(scale) == want_scale and int(zero) == want_zero - 128
    got = levels.cpu().to(torch.int32).numpy() + 128
    inside = got[:, :, pads[0]:pads[0] + 9, pads[1]:pads[1] + 11]
    np.testing.assert_array_equal(inside, want)
    around = np.ones(got.shape, bool)
    around[:, :, pads[0]:pads[0] + 9, pads[1]:pads[1] + 11] = False
    assert (got[around] == want_zero).all()  # the pads hold the level of 0.0


@pytest.mark.parametrize("form", _FORMS,
                         ids=lambda f: f"{f[0]}-{f[1]}-{f[2][0]}x{f[2][1]}-s{f[4][0]}-d{f[5][0]}")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_int8_conv_of_dynamic_levels_matches_the_integer_convolution(form: Any, dtype: torch.dtype) -> None:
    from inferplex.devices.gpu.ops._int8_conv import int8_conv, int8_conv_arrays, quantize_dynamic_padded

    channels, out_channels, kernel, pads, strides, dilations = form
    generator = torch.Generator().manual_seed(channels * 3 + out_channels)
    x = torch.randn(3, channels, 11, 13, generator=generator).to(dtype)
    weight = torch.randint(-127, 128, (out_channels, channels, *kernel), generator=generator,
                           dtype=torch.int8)
    w_scale = np.array([0.0031], np.float32)
    bias = torch.randn(out_channels, generator=generator).to(dtype).cuda()
    rows, sums, weight_scale = int8_conv_arrays(weight.numpy(), w_scale, 1.0)
    packed = (torch.from_numpy(rows).cuda(), torch.from_numpy(sums).cuda(),
              torch.from_numpy(weight_scale).cuda(), 1.0, 0, True)
    wider = [side + 1 for side in pads]  # a quantizer writes the widest of its readers' pads
    levels, x_scale, x_zero = quantize_dynamic_padded(x.cuda().contiguous(memory_format=torch.channels_last),
                                                      wider)
    out_size = int8_conv(levels, packed, kernel, bias, pads, strides, dilations, levels_pads=wider,
                         out_dtype=dtype, x_parameters=(x_scale, x_zero)).shape
    residual = torch.randn(out_size, generator=generator).to(dtype).cuda().contiguous(
        memory_format=torch.channels_last)
    got = int8_conv(levels, packed, kernel, bias, pads, strides, dilations, residual=residual, relu=True,
                    levels_pads=wider, out_dtype=dtype, x_parameters=(x_scale, x_zero))
    inside = levels[:, :, wider[0]:levels.shape[2] - wider[2], wider[1]:levels.shape[3] - wider[3]]
    scale = x_scale.reshape(1) * torch.from_numpy(weight_scale).cuda()  # the Mul of the two scales
    want = _reference(inside.to(torch.int32), int(x_zero), weight.cuda(), scale, bias, pads, strides,
                      dilations, dtype, residual, True, None, None, None)
    assert got.shape == want.shape and got.dtype == dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2 if dtype == torch.bfloat16 else 1e-3,
                               atol=1e-5)
