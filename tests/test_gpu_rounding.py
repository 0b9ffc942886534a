"""The QDQ kernels' rounding steps on CUDA: the exact division and rounding of
``devices/gpu/ops/_triton_rounding`` against the GPU's IEEE division (``div_rn``) and ``rint`` over
every float32 bit pattern, and the kernels that use them against their ATen forms, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

_BLOCK = 4096
_HALF = 2**31


@pytest.mark.parametrize("divisor", [3.0, 7.0, 0.1, 0.05, 0.004, 2 / 255, 0.0123456, 1.4142135, 1.4140625,
                                     11.313708, 1.0000001, 1.9999999, 8.0, 0.125, 3e30])
def test_exact_division_is_ieee_division_on_every_float32(divisor: float) -> None:
    from triton_rounding_checks import count_division_mismatches

    d = np.float32(divisor)
    counts = torch.zeros(2, dtype=torch.int32, device="cuda")
    for start in (0, _HALF):
        count_division_mismatches[(_HALF // _BLOCK,)](counts, start, float(d), float(np.float32(1) / d),
                                                      BLOCK=_BLOCK)
    differing, differing_normal = counts.tolist()
    assert differing_normal == 0, f"x / {d!r}: {differing_normal} quotients of normal size differ from div_rn"
    assert differing < 2**32 // 16  # only the tiny ones: under 2**-100 lie about 1/20 of all patterns


def test_rounding_half_to_even_is_rint_on_every_float32() -> None:
    from triton_rounding_checks import count_rounding_mismatches

    counts = torch.zeros(2, dtype=torch.int32, device="cuda")
    for start in (0, _HALF):
        count_rounding_mismatches[(_HALF // _BLOCK,)](counts, start, BLOCK=_BLOCK)
    assert counts.tolist() == [0, 0]


def _near_ties(scale: float, dtype: torch.dtype, count: int = 1 << 18) -> torch.Tensor:
    """Values at (k + 1/2) * scale in ``dtype``, each with its two neighbours, and random ones."""
    generator = torch.Generator(device="cuda").manual_seed(5)
    k = torch.randint(-140, 300, (count,), device="cuda", generator=generator).float()
    ties = ((k + 0.5) * scale).to(dtype)
    wide = ties.float()
    up = torch.nextafter(wide, torch.full_like(wide, float("inf"))).to(dtype)
    down = torch.nextafter(wide, torch.full_like(wide, float("-inf"))).to(dtype)
    noise = (torch.randn(count, device="cuda", generator=generator) * scale * 100).to(dtype)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1e30, -1e30], device="cuda").to(dtype)
    return torch.cat([ties, up, down, noise, specials])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("scale", "zero", "qtype"), [(0.0123456, 3, torch.int8), (2 / 255, 0, torch.uint8),
                                                      (0.03125, 1, torch.int8)])
def test_quantize_kernel_is_onnx_quantize_linear_bit_for_bit(dtype: torch.dtype, scale: float, zero: int,
                                                             qtype: torch.dtype) -> None:
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    x = _near_ties(scale, dtype)
    low, high = (-128, 127) if qtype == torch.int8 else (0, 255)
    scale_tensor = torch.tensor(scale, device="cuda")
    want = torch.clamp(torch.round(x.float() / scale_tensor) + zero, low, high).to(qtype)  # saturates inf too
    got = kernels.quantize(x, scale_tensor, torch.tensor(zero, dtype=qtype, device="cuda"), qtype)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("scale", "zero", "low", "high"), [(0.0123456, 3, -128, 127), (2 / 255, 0, 0, 255),
                                                            (0.05, -7, -128, 127)])
def test_fake_quantize_kernel_matches_its_aten_form_bit_for_bit(dtype: torch.dtype, scale: float, zero: int,
                                                                low: int, high: int) -> None:
    from inferplex.devices.gpu.ops import _fake_quantize
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    x = _near_ties(scale, dtype)
    got = kernels.quantize_dequantize(x, scale, kernels.float32_inverse(scale), zero, low, high)
    want = _fake_quantize._quantize_dequantize_elementwise(x, torch.tensor(scale, device="cuda"), scale, zero,
                                                           low, high)
    inside = x.float().abs() < 1e29  # past int32, the ATen form's integer conversion wraps
    assert torch.equal(got[inside], want[inside])
    top, bottom = (high - zero) * np.float32(scale), (low - zero) * np.float32(scale)
    saturated = torch.where(x[~inside] > 0, top, bottom)
    assert torch.equal(got[~inside], saturated.to(dtype))  # ONNX saturates


@pytest.mark.parametrize("rows_type", [torch.int8, torch.uint8])
@pytest.mark.parametrize(("rows", "depth"), [(4096, 768), (1000, 208), (600, 3072)])
def test_int8_linear_with_tensor_copies_matches_pointer_loads(
        monkeypatch: pytest.MonkeyPatch, rows_type: torch.dtype, rows: int, depth: int) -> None:
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor copies need compute capability 9.0")
    generator = torch.Generator(device="cuda").manual_seed(3)
    low, high = (-128, 128) if rows_type == torch.int8 else (0, 256)
    a = torch.randint(low, high, (rows, depth), device="cuda", generator=generator).to(rows_type)
    weight = torch.randint(-128, 128, (1000, depth), device="cuda", generator=generator).to(torch.int8)
    columns = weight.sum(dim=1, dtype=torch.int32).reshape(1, -1) if rows_type == torch.uint8 else None
    zero = torch.tensor(9, dtype=torch.uint8, device="cuda") if rows_type == torch.uint8 else None
    scales = torch.rand(1000, device="cuda", generator=generator) * 1e-4
    bias = torch.randn(1000, device="cuda", generator=generator).half()
    steps = {}
    if rows_type == torch.int8:  # the QDQ epilogue's two pairs
        steps = {"mid": [0.0123456, 3, -128, 127], "last": [0.05, -7, -128, 127]}
    shift = 128 if rows_type == torch.uint8 else 0
    got = kernels.int8_linear(a, weight, columns, zero, shift, scales, bias, torch.float16, **steps)
    monkeypatch.setattr(kernels, "_tensor_descriptors", lambda *_: None)
    want = kernels.int8_linear(a, weight, columns, zero, shift, scales, bias, torch.float16, **steps)
    assert torch.equal(got, want)


@pytest.mark.parametrize("gelu_range", [False, True], ids=["plain", "recording"])
@pytest.mark.parametrize("rows_type", [torch.int8, torch.uint8])
def test_int8_linear_in_persistent_programs_matches_a_program_a_tile(
        monkeypatch: pytest.MonkeyPatch, rows_type: torch.dtype, gelu_range: bool) -> None:
    """With tensor copies and no pairs in its epilogue, the int8 matmul walks its 512 output tiles
    in a few programs each (two a multiprocessor): the same outputs and the same value range as a
    program a tile, bit for bit."""
    from inferplex.devices.gpu.ops import _quantized_triton as kernels
    from inferplex.devices.gpu.ops._gelu_levels import gelu_band

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor copies need compute capability 9.0")
    generator = torch.Generator(device="cuda").manual_seed(5)
    low, high = (-128, 128) if rows_type == torch.int8 else (0, 256)
    a = torch.randint(low, high, (8192, 768), device="cuda", generator=generator).to(rows_type)
    weight = torch.randint(-128, 128, (1000, 768), device="cuda", generator=generator).to(torch.int8)
    columns = weight.sum(dim=1, dtype=torch.int32).reshape(1, -1)
    zero = torch.tensor(9, dtype=torch.uint8, device="cuda")
    scales = torch.rand(1000, device="cuda", generator=generator) * 1e-4
    bias = torch.randn(1000, device="cuda", generator=generator).half()
    x_scale = torch.tensor(0.5, device="cuda")
    band = gelu_band(torch.float16, "none")

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        found = kernels.fresh_value_range(torch.device("cuda"))
        out = kernels.int8_linear(a, weight, columns, zero, 128, scales, bias, torch.float16, x_scale=x_scale,
                                  gelu_range=(found, band.low, band.high) if gelu_range else None)
        return out, found

    got, got_range = run()
    assert kernels._persistent_programs(a.device) < 512  # fewer programs than tiles
    monkeypatch.setattr(kernels, "_persistent_programs", lambda device: 1 << 30)
    want, want_range = run()
    assert torch.equal(got, want) and torch.equal(got_range, want_range)
    # and they are the matmul's: uint8 levels (int8 rows: moved down by 128) less the zero point 9
    levels = a.double() - 9 if rows_type == torch.uint8 else a.double() + 128 - 9
    exact = levels @ weight.double().T
    reference = (exact.float() * (scales * 0.5) + bias.float()).half()
    torch.testing.assert_close(got, reference, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("last", [[0.05, -7, -128, 127], [0.03, 131, 0, 255]])
def test_int8_linear_writing_levels_gives_the_levels_of_its_values(dtype: torch.dtype,
                                                                   last: list[float]) -> None:
    """An int8 matmul writing its last pair's levels (for the normalization that reads them) gives,
    bit for bit, the levels whose values it writes otherwise: dequantized, each is that value."""
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    generator = torch.Generator(device="cuda").manual_seed(4)
    a = torch.randint(-128, 128, (4096, 768), device="cuda", generator=generator).to(torch.int8)
    weight = torch.randint(-128, 128, (768, 768), device="cuda", generator=generator).to(torch.int8)
    scales = torch.rand(768, device="cuda", generator=generator) * 1e-4
    bias = torch.randn(768, device="cuda", generator=generator).to(dtype)
    mid = [0.0123456, 3, -128, 127]
    values = kernels.int8_linear(a, weight, None, None, 0, scales, bias, dtype, mid, last)
    levels = kernels.int8_linear(a, weight, None, None, 0, scales, bias, dtype, mid, last, levels=True)
    assert levels.dtype == (torch.int8 if last[2] < 0 else torch.uint8)
    scale, zero = last[0], int(last[1])
    assert torch.equal(((levels.to(torch.int32) - zero).to(torch.float32) * scale).to(dtype), values)
    assert int(levels.to(torch.int32).min()) < zero < int(levels.to(torch.int32).max())  # not all saturated


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_conv_quantize_pass_matches_conv2d_and_its_pairs_bit_for_bit(dtype: torch.dtype, channels_last: bool,
                                                                     residual: bool) -> None:
    """The pass after a QDQ convolution (bias, pair, Add, pair) against ``conv2d`` with its bias and
    the pairs as separate ATen calls (``_qdq_conv`` plans this chain for the QDQ ResNets)."""
    from inferplex.devices.gpu.ops import _fake_quantize
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    generator = torch.Generator(device="cuda").manual_seed(8)
    memory = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(4, 32, 28, 28, device="cuda", generator=generator).to(dtype).to(memory_format=memory)
    w = torch.randn(48, 32, 3, 3, device="cuda", generator=generator) * 0.1
    w = w.to(dtype).to(memory_format=memory)
    b = torch.randn(48, device="cuda", generator=generator).to(dtype)
    other = torch.randn(4, 48, 28, 28, device="cuda", generator=generator).to(dtype) if residual else None
    first, second = [0.0123456, 3, -128, 127], [0.05, 0, 0, 255]

    def pair(value: torch.Tensor, step: list[float]) -> torch.Tensor:
        return _fake_quantize.quantize_dequantize(value, torch.tensor(step[0], device="cuda"), *step)

    want = pair(torch.nn.functional.conv2d(x, w, b, padding=1), first)
    if other is not None:
        want = pair(want + other, second)
    got = kernels.conv_quantize(torch.nn.functional.conv2d(x, w, None, padding=1), b, other, first,
                                second if residual else None)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("qtype", [torch.uint8, torch.int8])
def test_quantizing_gelu_kernel_writes_quantize_linears_data_bit_for_bit(dtype: torch.dtype,
                                                                        qtype: torch.dtype) -> None:
    """The QDQ GELU that writes the 8-bit data of the QuantizeLinear after it (an int8 matmul's
    input) against the GELU kernel's value and that QuantizeLinear as an ATen formula."""
    from inferplex.devices.gpu.ops import _qdq_gelu

    generator = torch.Generator(device="cuda").manual_seed(4)
    x = (torch.randn(64, 128, 3072, device="cuda", generator=generator) * 3).to(dtype)

    def step(scale: float, zero: int) -> tuple[torch.Tensor, float, int, int, int]:
        return torch.tensor(scale, device="cuda"), scale, zero, -128, 127

    steps = (step(2 / 255, 0), step(2 / 255, -128), step(0.05, 5))
    quantize = (0.0123456, 3, qtype) if qtype == torch.uint8 else (0.0123456, -7, qtype)
    got = _qdq_gelu._run_kernel(x, 1.4140625, True, 1.0, 0.5, steps, quantize)
    low, high = (0, 255) if qtype == torch.uint8 else (-128, 127)
    value = _qdq_gelu._run_kernel(x, 1.4140625, True, 1.0, 0.5, steps, None)
    want = torch.clamp(torch.round(value.float() / torch.tensor(quantize[0], device="cuda")) + quantize[1],
                       low, high).to(qtype)
    assert torch.equal(got, want)
    assert (want.to(torch.int32) == quantize[1]).float().mean() < 0.5  # the values spread over the range


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("channels_last", "other_channels_last"),
                         [(False, False), (True, True), (True, False)])
def test_conv_epilogue_with_residual_matches_its_separate_calls(dtype: torch.dtype, channels_last: bool,
                                                                other_channels_last: bool) -> None:
    """The dynamic convolution's epilogue with the residual Add and Relu against the epilogue, then
    the Add and the Relu as ATen calls, bit for bit (the residual in either memory layout)."""
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    generator = torch.Generator(device="cuda").manual_seed(6)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    acc = (torch.randn(4, 48, 28, 28, device="cuda", generator=generator) * 3e4).to(dtype)
    acc = acc.contiguous(memory_format=layout)
    other = torch.randn(4, 48, 28, 28, device="cuda", generator=generator).to(dtype)
    other_layout = torch.channels_last if other_channels_last else torch.contiguous_format
    other = other.contiguous(memory_format=other_layout)
    scale = torch.tensor(3e-3, device="cuda")
    bias = torch.randn(1, 48, 1, 1, device="cuda", generator=generator).to(dtype)
    inverse = 2.0 ** 16
    got = kernels.conv_epilogue(acc, scale, inverse, bias, True, other)
    want = torch.relu(kernels.conv_epilogue(acc, scale, inverse, bias, False) + other)
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("quantize", [None, (0.0123456, 3, torch.uint8), (0.03, -7, torch.int8)])
def test_int8_linear_with_gelu_table_matches_the_matmul_then_the_gelu_bit_for_bit(
        dtype: torch.dtype, quantize: tuple[float, int, torch.dtype] | None) -> None:
    """An int8 matmul whose epilogue looks the QDQ GELU up by its last pair's level against the
    matmul writing that pair's values and the GELU kernel reading them (a QDQ feed-forward layer's
    up projection and activation)."""
    from inferplex.devices.gpu.ops import _qdq_gelu
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    generator = torch.Generator(device="cuda").manual_seed(9)
    a = torch.randint(-128, 128, (4096, 768), device="cuda", generator=generator).to(torch.int8)
    weight = torch.randint(-128, 128, (3072, 768), device="cuda", generator=generator).to(torch.int8)
    scales = torch.rand(3072, device="cuda", generator=generator) * 2e-5
    bias = torch.randn(3072, device="cuda", generator=generator).to(dtype)

    def step(scale: float, zero: int) -> tuple[torch.Tensor, float, int, int, int]:
        return torch.tensor(scale, device="cuda"), scale, zero, -128, 127

    last = step(0.06, -4)
    gelu = (1.4140625, True, 1.0, 0.5, (step(2 / 255, 0), step(2 / 255, -128), step(0.05, 5)), quantize)
    table = _qdq_gelu.gelu_table(last, dtype, *gelu)
    numbers = {"mid": [0.0123456, 3, -128, 127], "last": list(last[1:])}
    got = kernels.int8_linear(a, weight, None, None, 0, scales, bias, dtype, **numbers, table=table)
    values = kernels.int8_linear(a, weight, None, None, 0, scales, bias, dtype, **numbers)
    want = _qdq_gelu.quantized_gelu(values, *gelu)
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert torch.unique(values).numel() > 64  # the outputs spread over the pair's levels
