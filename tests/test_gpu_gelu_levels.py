"""``quantize_dynamic``'s feed-forward on the GPU device: the DynamicQuantizeLinear of a GELU's
output computes the GELU itself, its range known from what the up projection's int8 matmul
recorded of its own output (see ``devices/gpu/ops/_gelu_levels.py``).

The GELU's band (where its float16/bfloat16 output takes its smallest value) is checked against
torch's float32 GELU on the CPU over every value of the type.  On CUDA the quantizer's levels,
scale and zero point are checked against DynamicQuantizeLinear in numpy of ``F.gelu``'s output and
against the separate calls (``F.gelu``, then the quantizer), exactly, where the record gives the
range (large and small largest inputs) and where it does not (nothing recorded, no input in the
band, a NaN); whole models against ONNX Runtime and, bit for bit, against the same model with the GELU
run on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from quantized_models import dynamic_quantize_linear, ort_unfused, profiled, quantized
from test_gpu_dynamic_rows import _encoder_layer

import inferplex as ov

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
F = torch.nn.functional

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_TYPES = [torch.float16, torch.bfloat16]
_TYPE_IDS = ["f16", "bf16"]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", _TYPES, ids=_TYPE_IDS)
def test_gelu_band_holds_the_smallest_output_of_every_value(dtype: torch.dtype, approximate: str) -> None:
    from inferplex.devices.gpu.ops._gelu_levels import gelu_band

    band = gelu_band(dtype, approximate)
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype).float()
    x = x[x.isfinite()]
    stored = F.gelu(x, approximate=approximate).to(dtype).float()
    assert stored.min().item() == band.minimum
    inside = (x >= band.low) & (x <= band.high)
    assert int(inside.sum()) > 10 and bool((stored[inside] == band.minimum).all())


def _recorded_matmul(dtype: torch.dtype, approximate: str, scale: float, rows: int = 1000,
                     nan: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """An int8 matmul's output (rows x 768) with what it recorded for the GELU quantizer."""
    from inferplex.devices.gpu.ops._gelu_levels import gelu_band
    from inferplex.devices.gpu.ops._quantized_triton import fresh_value_range, int8_linear

    generator = torch.Generator().manual_seed(7)
    a = torch.randint(-128, 128, (rows, 256), dtype=torch.int8, generator=generator).cuda()
    weight = torch.randint(-128, 128, (768, 256), dtype=torch.int8, generator=generator).cuda()
    scales = torch.full((768,), scale, dtype=torch.float32, device="cuda")
    bias = torch.randn(768, generator=generator).cuda()
    if nan:
        bias[5] = float("nan")
    band = gelu_band(dtype, approximate)
    value_range = fresh_value_range(torch.device("cuda"))
    out = int8_linear(a, weight, None, None, 0, scales, bias, dtype,
                      gelu_range=(value_range, band.low, band.high))
    plain = int8_linear(a, weight, None, None, 0, scales, bias, dtype)  # recording changes no value
    torch.testing.assert_close(out, plain, rtol=0, atol=0, equal_nan=True)
    exact = (a.cpu().double() @ weight.cpu().double().T) * np.float32(scale) + bias.cpu().double()
    torch.testing.assert_close(out.cpu().double(), exact, rtol=2**-7, atol=1e-3, equal_nan=True)
    return out, value_range


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", _TYPES, ids=_TYPE_IDS)
def test_int8_matmul_records_its_largest_output_the_band_and_nan(dtype: torch.dtype,
                                                                  approximate: str) -> None:
    from inferplex.devices.gpu.ops._gelu_levels import gelu_band

    band = gelu_band(dtype, approximate)
    for scale, nan in ((1e-3, False), (2e-6, False), (1e-3, True)):
        out, value_range = _recorded_matmul(dtype, approximate, scale, nan=nan)
        values = out.float().cpu()
        finite = values[values == values]
        in_band = float(((finite >= band.low) & (finite <= band.high)).any())
        assert value_range.cpu().tolist()[0] == in_band
        assert value_range.cpu().tolist()[2] == float(nan)
        if not nan:
            assert value_range.cpu().tolist()[1] == max(0.0, float(values.max()))


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("case", ["recorded", "nothing recorded", "small", "no band", "nan", "negative"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", _TYPES, ids=_TYPE_IDS)
def test_gelu_levels_are_dynamic_quantize_linear_of_the_gelu(dtype: torch.dtype, approximate: str,
                                                              case: str) -> None:
    from inferplex.devices.gpu.ops._fused_quantized import dynamic_quantize_rows
    from inferplex.devices.gpu.ops._gelu_levels import gelu_quantize_rows
    from inferplex.devices.gpu.ops._quantized_triton import fresh_value_range

    scale = {"small": 2e-6, "no band": 1e-3, "negative": 1e-3}.get(case, 1e-3)
    x, value_range = _recorded_matmul(dtype, approximate, scale, nan=case == "nan")
    if case == "nothing recorded":
        value_range = fresh_value_range(torch.device("cuda"))
    elif case == "no band":  # the outputs made non-negative, as recorded of them
        x = x.abs()
        value_range = torch.tensor([0.0, float(x.float().max()), 0.0], device="cuda")
    elif case == "negative":  # every output below the band: the GELU's minimum is not the band's
        x = -x.abs() - 1.0
        value_range = torch.tensor([0.0, 0.0, 0.0], device="cuda")
    levels, got_scale, got_zero = gelu_quantize_rows(x, approximate, value_range)
    want_levels, want_scale, want_zero = dynamic_quantize_rows(F.gelu(x, approximate=approximate))
    assert levels.dtype == torch.int8 and got_zero.dtype == torch.uint8
    torch.testing.assert_close(got_scale, want_scale, rtol=0, atol=0, equal_nan=True)
    assert int(got_zero) == int(want_zero)
    torch.testing.assert_close(levels, want_levels, rtol=0, atol=0)
    if case != "nan":
        reference, reference_scale, reference_zero = dynamic_quantize_linear(
            F.gelu(x, approximate=approximate).float().cpu().numpy())
        assert float(got_scale) == reference_scale and int(got_zero) == reference_zero
        np.testing.assert_array_equal(levels.cpu().to(torch.int32).numpy() + 128, reference)


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_dynamic_feed_forward_on_cuda_matches_onnx_runtime_and_the_gelu_run_on_its_own(
        tmp_path: Any, monkeypatch: Any, precision: str, approximate: str) -> None:
    from inferplex.devices.gpu import _quantized_fusions

    model = quantized(tmp_path, _encoder_layer(hidden=256, approximate=approximate), False)
    feeds = {"x": np.random.default_rng(8).standard_normal((4, 64, 256)).astype(np.float32)}
    config = {"INFERENCE_PRECISION_HINT": precision}
    got, records = profiled(ov.Core(), model, feeds, config)
    (want,) = ort_unfused(model, feeds)
    scale = np.abs(want).max()
    close, mean = {"f16": (3e-2, 3e-3), "bf16": (8e-2, 1e-2)}[precision]
    np.testing.assert_allclose(got, want, rtol=0, atol=close * scale)
    assert np.abs(got - want).mean() < mean * scale
    # the GELU ran in its quantizer: the formula's last Mul (whose call a GELU is) has no call
    producers = {output: n for n in model.graph.node for output in n.output}
    gelu = next(producers[n.input[0]].name for n in model.graph.node
                if n.op_type == "DynamicQuantizeLinear" and producers[n.input[0]].op_type == "Mul")
    assert gelu not in records
    monkeypatch.setattr(_quantized_fusions, "gelu_source", lambda *args: None)
    alone, records = profiled(ov.Core(), model, feeds, config)
    assert gelu in records
    np.testing.assert_array_equal(got, alone)


@pytest.mark.gpu
@cuda
def test_gelu_levels_of_no_values_are_the_quantizers() -> None:
    from inferplex.devices.gpu.ops._fused_quantized import dynamic_quantize_rows
    from inferplex.devices.gpu.ops._gelu_levels import gelu_quantize_rows
    from inferplex.devices.gpu.ops._quantized_triton import fresh_value_range

    x = torch.empty((0, 768), dtype=torch.float16, device="cuda")
    levels, scale, zero = gelu_quantize_rows(x, "none", fresh_value_range(torch.device("cuda")))
    want_levels, want_scale, want_zero = dynamic_quantize_rows(F.gelu(x))
    assert levels.shape == want_levels.shape == (0, 768) and levels.dtype == want_levels.dtype
    assert float(scale) == float(want_scale) and int(zero) == int(want_zero)
