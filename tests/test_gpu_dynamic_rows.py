"""``quantize_dynamic``'s matmul inputs on the GPU device: a DynamicQuantizeLinear whose data only
fused dynamic matmuls read hands them its levels as the int8 matmul reads them, and takes the
minimum and maximum of its data from the LayerNormalization call before it, which writes them for
each part of its output as it writes the output.

Whole models are compared with ONNX Runtime running each op as written (see
:mod:`quantized_models`), on ``GPU.0`` emulated on torch's CPU and, in the ``gpu`` tests, on CUDA,
where the quantizer's levels, scale and zero point are also checked against DynamicQuantizeLinear
in numpy, exactly, and the model with and without the normalizations' partial results gives the
same output, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from quantized_models import dynamic_quantize_linear, ort_unfused, profiled, quantized
from torch_export import export_onnx

import inferplex as ov

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
nn = torch.nn

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _encoder_layer(hidden: int = 64, approximate: str = "none") -> onnx.ModelProto:
    """A post-norm feed-forward block of BERT's layout: LayerNorm, the up projection, GELU, the down
    projection, the residual Add and LayerNorm, and a last projection reading that normalization."""
    torch.manual_seed(21)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
            self.head = nn.Linear(hidden, 32)

        def forward(self, x: Any) -> Any:
            x = self.first(x)
            x = self.second(x + self.down(nn.functional.gelu(self.up(x), approximate=approximate)))
            return self.head(x)

    return export_onnx(Block(), (torch.randn(2, 8, hidden),), ["x"], {"x": {0: "N", 1: "S"}}, opset=17)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_dynamic_encoder_block_matches_onnx_runtime(core: ov.Core, tmp_path: Any, approximate: str,
                                                    precision: str) -> None:
    model = quantized(tmp_path, _encoder_layer(approximate=approximate), False)
    feeds = {"x": np.random.default_rng(5).standard_normal((3, 16, 64)).astype(np.float32)}
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_unfused(model, feeds)
    scale = np.abs(want).max()
    if precision == "f32":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    else:  # f16 activations: a quantizer may see a value one f16 step away, a level apart
        np.testing.assert_allclose(got, want, rtol=0, atol=3e-2 * scale)
        assert np.abs(got - want).mean() < 3e-3 * scale
    # the MatMulIntegers read the quantizers' data in their calls (their Casts do not run)
    casts = {n.name for n in model.graph.node if n.op_type == "Cast"}
    assert len(casts) == 3 and not casts & set(records)


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=["f16", "bf16", "f32"])
@pytest.mark.parametrize("handed", [False, True], ids=["pass", "partials"])
def test_dynamic_rows_are_dynamic_quantize_linear(dtype: torch.dtype, handed: bool) -> None:
    from inferplex.devices.gpu.ops._fused_quantized import dynamic_quantize_rows

    generator = torch.Generator().manual_seed(3)
    x = ((torch.randn(300, 768, generator=generator) * 3 + 0.5).to(dtype)).cuda()
    parts = x.float().reshape(75, -1)  # the minimum and maximum of each of 75 parts, as a call writes them
    partials = torch.stack([parts.amin(dim=1), parts.amax(dim=1)]) if handed else None
    levels, scale, zero = dynamic_quantize_rows(x, partials)
    want, want_scale, want_zero = dynamic_quantize_linear(x.float().cpu().numpy())
    assert levels.dtype == torch.int8 and zero.dtype == torch.uint8
    assert float(scale) == want_scale and int(zero) == want_zero
    np.testing.assert_array_equal(levels.cpu().to(torch.int32).numpy() + 128, want)


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=["f16", "bf16", "f32"])
@pytest.mark.parametrize("rows", [257, 5000])  # 4 rows a program; 8 where 4 leave more than 1,024 programs
def test_layer_norm_writes_the_partial_minima_and_maxima_of_its_output(dtype: torch.dtype, rows: int) -> None:
    from inferplex.devices.gpu.ops._residual_layer_norm import layer_norm_with_partials, residual_layer_norm

    generator = torch.Generator().manual_seed(4)
    a, b = (torch.randn(rows, 768, generator=generator).to(dtype).cuda() for _ in range(2))
    a[rows // 2, 5] = float("nan")  # that row's output is NaN: so is its part's minimum and maximum
    weight = (torch.rand(768, generator=generator) * 3).to(dtype).cuda()
    bias = torch.randn(768, generator=generator).to(dtype).cuda()
    out, partials = layer_norm_with_partials(a, b, weight, bias, 1e-5)
    plain = residual_layer_norm(a, b, weight, bias, 1e-5, None, None, None)
    assert isinstance(plain, torch.Tensor) and partials is not None
    torch.testing.assert_close(out, plain, rtol=0, atol=0, equal_nan=True)
    lows, highs = partials.cpu()
    per_part = -(-rows // lows.numel())
    assert lows.numel() <= 1024 and per_part == (4 if rows < 4096 else 8)
    values = out.float().cpu()
    for part in range(lows.numel()):
        chunk = values[part * per_part:(part + 1) * per_part]
        if part == rows // 2 // per_part:
            assert lows[part].isnan() and highs[part].isnan()
        else:
            assert lows[part] == chunk.min() and highs[part] == chunk.max()


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("precision", ["f32", "f16", "bf16"])
def test_dynamic_encoder_block_on_cuda_matches_onnx_runtime_and_its_ranges_change_no_value(
        tmp_path: Any, monkeypatch: Any, precision: str) -> None:
    from inferplex.devices.gpu import optimize

    model = quantized(tmp_path, _encoder_layer(hidden=256), False)
    feeds = {"x": np.random.default_rng(6).standard_normal((4, 64, 256)).astype(np.float32)}
    config = {"INFERENCE_PRECISION_HINT": precision}
    recorded = np.asarray(ov.Core().compile_model(model, "GPU.0", config)(feeds)[0], dtype=np.float32)
    (want,) = ort_unfused(model, feeds)
    scale = np.abs(want).max()
    close, mean = {"f32": (1e-2, 1e-4), "f16": (3e-2, 3e-3), "bf16": (8e-2, 1e-2)}[precision]
    np.testing.assert_allclose(recorded, want, rtol=0, atol=close * scale)
    assert np.abs(recorded - want).mean() < mean * scale
    planned = optimize.row_quantizers

    def without_ranges(*args: Any) -> Any:
        found, _ = planned(*args)
        return found, set()

    monkeypatch.setattr(optimize, "row_quantizers", without_ranges)
    # each quantizer then finds its data's range in a pass of its own: the same scale and levels
    alone = np.asarray(ov.Core().compile_model(model, "GPU.0", config)(feeds)[0], dtype=np.float32)
    np.testing.assert_array_equal(alone, recorded)
