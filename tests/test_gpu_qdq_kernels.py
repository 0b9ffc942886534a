"""The Triton kernels of QDQ transformers on CUDA (``devices/gpu/ops/_qdq_attention.py``,
``_residual_layer_norm.py``) against their chains as separate ATen calls in float32 on the same
inputs, each pair as the kernel computes it (ONNX's division for float32 data, torch's fake-quantize
for float16 and bfloat16): the attention with and without a mask, writing its result or an int8
matmul's 8-bit input; the residual layer norm with its pairs, one quantizer, and inputs read as
8-bit levels.  ``tests/test_gpu_qdq_transformer.py`` checks whole models against ONNX Runtime."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
def test_qdq_attention_kernels_8_bit_data_is_quantize_linear_of_its_result(kind: str) -> None:
    """The attention kernel writing a QuantizeLinear's data (int8, uint8, and uint8 levels as int8
    less 128) gives, bit for bit, QuantizeLinear's data of its result as it stores it, in
    (batch, row, head, width) order."""
    from inferplex.devices.gpu.ops import _qdq_attention as attention
    from inferplex.devices.gpu.ops._fake_quantize import quantize_linear

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(17)
    packed = (torch.randint(-40, 40, (4, 96, 3, 12, 64), device="cuda", generator=generator) * 0.05).to(dtype)
    query, key, value = (packed[:, :, i].permute(0, 2, 1, 3) for i in range(3))
    key_t = key.transpose(-1, -2)

    def step(scale: float, zero: int, low: int, high: int) -> tuple[torch.Tensor, float, int, int, int]:
        return torch.tensor(scale, device="cuda"), scale, zero, low, high

    steps = (step(0.3, 3, -128, 127), None, None, step(1 / 255, 0, 0, 255), step(0.01, 131, 0, 255))
    result = attention.quantized_attention(query, key_t, value, None, 8.0, True, steps)
    for levels in ((0.01, 131, torch.uint8), (0.01, 3, torch.int8), (0.013, -5, torch.int8)):
        got = attention.quantized_attention(query, key_t, value, None, 8.0, True, steps, levels)
        want = quantize_linear(result.transpose(1, 2), *levels)
        assert got.dtype == levels[2] and got.is_contiguous()
        assert torch.equal(got, want)


def _kernel_pair(x: Any, step: Any, dtype: Any) -> Any:
    """A QDQ kernel's pair on float32 values: divided by the scale for float32 data, as ONNX does;
    times its float32 inverse for float16 and bfloat16 data, as torch's fake-quantize does."""
    from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize

    if step is None:
        return x
    if dtype == torch.float32:
        return quantize_dequantize(x, *step)
    return torch.fake_quantize_per_tensor_affine(x, step[1], step[2], step[3], step[4])


def _attention_in_float32(query: Any, key_t: Any, value: Any, mask: Any, factor: float, divide: bool,
                          steps: Any) -> Any:
    """The QDQ attention chain as separate ATen calls in float32 on the kernel's inputs, each pair
    as the kernel computes it, rounded to the inputs' type at the end (as the kernel stores it)."""
    dtype = query.dtype
    scores = _kernel_pair(query.float() @ key_t.float(), steps[0], dtype)
    scores = _kernel_pair(scores / factor if divide else scores * factor, steps[1], dtype)
    if mask is not None:
        scores = _kernel_pair(scores + mask.float(), steps[2], dtype)
    probabilities = _kernel_pair(torch.softmax(scores, dim=-1), steps[3], dtype)
    return _kernel_pair(probabilities @ value.float(), steps[4], dtype).to(dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("width", [768, 600])
def test_layer_norm_kernel_matches_the_calls_it_fuses(kind: str, width: int) -> None:
    """The one-pass kernel against the Add, fake-quantizes, ``F.layer_norm`` and QuantizeLinear it
    replaces, run in float32 on the same inputs (the kernel's chain runs in float32 and rounds to
    the data's type where it stores): the normalized values within their last place; the 8-bit data
    QuantizeLinear's of those values, and the fake-quantized output their pair's, but for a value
    a step away where the kernel's float32 normalization and ATen's differ in the last place, or
    where float16 and bfloat16 data's quantizers multiply by the scale's inverse and ONNX's divide,
    on a rounding boundary."""
    from inferplex.devices.gpu.ops import _residual_layer_norm as norm
    from inferplex.devices.gpu.ops._fake_quantize import quantize_linear

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(13)
    a, b = ((torch.randn(2048, width, device="cuda", generator=generator) * 2).to(dtype) for _ in range(2))
    weight = (torch.rand(width, device="cuda", generator=generator) + 0.5).to(dtype)
    bias = torch.randn(width, device="cuda", generator=generator).to(dtype)
    first, last = (torch.tensor(0.06, device="cuda"), 0.06, 2, -128, 127), \
        (torch.tensor(0.04, device="cuda"), 0.04, -3, -128, 127)
    step = float(torch.tensor(0.04).to(dtype))
    eps = torch.finfo(dtype).eps

    def in_float32(other: torch.Tensor | None, sum_step: Any) -> torch.Tensor:
        x = a.float() if other is None else a.float() + other.float()
        x = _kernel_pair(x, sum_step, dtype)
        return torch.nn.functional.layer_norm(x, (width,), weight.float(), bias.float(), 1e-5)

    def rarely_apart(got: torch.Tensor, want: torch.Tensor, allowed: torch.Tensor | float) -> None:
        apart = (got.double() - want.double()).abs()
        assert float((apart > allowed).double().mean()) <= 1e-5, float(apart.max())

    plain = norm.residual_layer_norm(a, b, weight, bias, 1e-5, None, None, None)  # a float model's
    want = in_float32(b, None)
    rarely_apart(plain, want.to(dtype), want.double().abs() * eps + 1e-5)
    cases = ((b, first, (0.04, -3, torch.int8)), (None, None, (0.04, 0, torch.uint8)),
             (b, None, (0.05, 7, torch.uint8)))
    for other, sum_step, quantize in cases:
        normalized, data = norm.residual_layer_norm(a, other, weight, bias, 1e-5, sum_step, None, quantize)
        want = in_float32(other, sum_step)
        rarely_apart(normalized, want.to(dtype), want.double().abs() * eps + 1e-5)
        assert data.dtype == quantize[2]
        if dtype == torch.float32:  # QuantizeLinear's data of the kernel's own normalized values
            assert torch.equal(data, quantize_linear(normalized, *quantize))
        levels = data.to(torch.int32) - quantize_linear(want, *quantize).to(torch.int32)
        assert int(levels.abs().max()) <= 1 and float((levels != 0).double().mean()) <= 1e-4
        value, _ = norm.residual_layer_norm(a, other, weight, bias, 1e-5, sum_step, last, quantize)
        wanted = _kernel_pair(want, last, dtype).to(dtype).double()
        apart = (value.double() - wanted).abs()  # a level apart, as the data's type holds the two
        assert bool((apart <= step * 1.01 + wanted.abs() * eps).all())
        assert float((apart > 0).double().mean()) <= 1e-4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
def test_layer_norm_kernel_with_one_quantizer_writes_its_data_and_values_alike(kind: str) -> None:
    """Where the output's pair and the QuantizeLinear are one quantizer (as ``quantize_static`` writes
    them), the fake-quantized output is the 8-bit data dequantized, bit for bit, and both are what
    the pair and the QuantizeLinear give each alone, but for a rare value a step away where the
    kernel's variants round the normalized value differently in its last place."""
    from inferplex.devices.gpu.ops import _residual_layer_norm as norm

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(14)
    a, b = ((torch.randn(1024, 768, device="cuda", generator=generator) * 2).to(dtype) for _ in range(2))
    weight = (torch.rand(768, device="cuda", generator=generator) + 0.5).to(dtype)
    bias = torch.randn(768, device="cuda", generator=generator).to(dtype)
    first = (torch.tensor(0.06, device="cuda"), 0.06, 2, -128, 127)
    for scale, zero, low, high, data_type in ((0.04, -3, -128, 127, torch.int8),
                                              (0.03, 125, 0, 255, torch.uint8)):
        last = (torch.tensor(scale, device="cuda"), scale, zero, low, high)
        quantize = (scale, zero, data_type)
        value, data = norm.residual_layer_norm(a, b, weight, bias, 1e-5, first, last, quantize)
        assert data.dtype == data_type
        dequantized = ((data.to(torch.int32) - zero).to(torch.float32) * scale).to(dtype)
        assert torch.equal(value, dequantized)
        alone = norm.residual_layer_norm(a, b, weight, bias, 1e-5, first, last, None)
        _, data_alone = norm.residual_layer_norm(a, b, weight, bias, 1e-5, first, None, quantize)
        steps = (data.to(torch.int32) - data_alone.to(torch.int32)).abs()
        assert int(steps.max()) <= 1 and float((steps > 0).double().mean()) <= 1e-4
        assert float((value != alone).double().mean()) <= 1e-4


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
def test_layer_norm_kernel_reading_levels_gives_what_it_gives_on_their_values(kind: str) -> None:
    """The normalization reading either input (or both) as a pair's 8-bit levels, as the calls
    before it hand them over, gives what it gives on those levels' values as the pair's call stores
    them (but for a rare value a step away, where the kernel's variants sum a row in another order);
    writing the data alone, it writes the same data."""
    from inferplex.devices.gpu.ops import _residual_layer_norm as norm

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(18)
    a = torch.randint(-128, 128, (1024, 768), device="cuda", generator=generator).to(torch.int8)
    b = torch.randint(0, 256, (1024, 768), device="cuda", generator=generator).to(torch.uint8)
    weight = (torch.rand(768, device="cuda", generator=generator) + 0.5).to(dtype)
    bias = torch.randn(768, device="cuda", generator=generator).to(dtype)
    a_pair = (torch.tensor(0.02, device="cuda"), 0.02, -5, -128, 127)
    b_pair = (torch.tensor(0.015, device="cuda"), 0.015, 120, 0, 255)
    a_values, b_values = (((x.to(torch.int32) - pair[2]).to(torch.float32) * pair[0]).to(dtype)
                          for x, pair in ((a, a_pair), (b, b_pair)))
    sum_step = (torch.tensor(0.05, device="cuda"), 0.05, 1, -128, 127)
    last = (torch.tensor(0.04, device="cuda"), 0.04, -3, -128, 127)
    quantize = (0.04, -3, torch.int8)
    want_value, want_data = norm.residual_layer_norm(a_values, b_values, weight, bias, 1e-5, sum_step, last,
                                                     quantize)
    for first, second, levels in ((a, b_values, (a_pair, None)), (a_values, b, (None, b_pair)),
                                  (a, b, (a_pair, b_pair))):
        value, data = norm.residual_layer_norm(first, second, weight, bias, 1e-5, sum_step, last, quantize,
                                               levels)
        steps = (data.to(torch.int32) - want_data.to(torch.int32)).abs()
        assert int(steps.max()) <= 1 and float((steps > 0).double().mean()) <= 1e-4
        assert torch.equal(value, ((data.to(torch.int32) + 3).to(torch.float32) * 0.04).to(dtype))
        assert float((value != want_value).double().mean()) <= 1e-4
        alone = norm.residual_layer_norm(first, second, weight, bias, 1e-5, sum_step, last, quantize, levels,
                                         value=False)
        assert torch.equal(alone, data)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(("divide", "scaled"), [(True, True), (False, True), (True, False)])
def test_qdq_attention_kernel_matches_the_separate_calls_in_float32(kind: str, divide: bool,
                                                                    scaled: bool) -> None:
    """The attention kernel against its chain as separate ATen calls in float32 on the same inputs
    (the kernel runs the chain in float32 and rounds where it stores), with and without a mask: the
    same values but for a few context values a step or two away, where the two order a sum
    differently, or float16 and bfloat16 data's quantizers multiply by the scale's inverse where
    float32's divide, on a rounding boundary (a probability's level then moves by one)."""
    from inferplex.devices.gpu.ops import _qdq_attention as attention

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(15)
    packed = torch.randint(-40, 40, (8, 128, 3, 12, 64), device="cuda", generator=generator) * 0.05
    packed = packed.to(dtype)
    query, key, value = (packed[:, :, i].permute(0, 2, 1, 3) for i in range(3))
    mask = torch.randn(8, 1, 128, 128, device="cuda", generator=generator).to(dtype)

    def step(scale: float, zero: int, low: int, high: int) -> tuple[torch.Tensor, float, int, int, int]:
        return torch.tensor(scale, device="cuda"), scale, zero, low, high

    steps = (step(0.3, 3, -128, 127), step(0.04, 0, -128, 127) if scaled else None, None,
             step(1 / 255, 0, 0, 255), step(0.01, -2, -128, 127))
    numbers = [attention.step_numbers(one) for one in steps]
    factor = 8.0 if divide else 0.125
    key_t = key.transpose(-1, -2)
    for added in (None, mask):
        got = attention._run_kernel(query, key_t, value, added, factor, divide, numbers)
        want = _attention_in_float32(query, key_t, value, added, factor, divide, steps)
        apart = (got.double() - want.double()).abs()
        moved = float((apart > 0).double().mean())
        assert float(apart.max()) <= 0.0201 and moved <= 1e-3, (float(apart.max()), moved)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
def test_qdq_attention_kernel_with_a_padding_mask_matches_it_with_the_mask_written_out(kind: str) -> None:
    """A padding mask (one row of values per batch, broadcast over the heads and query rows: strides
    of 0) gives what the mask written out per score gives, and what the separate calls give in
    float32 on the same inputs (the kernel's chain runs in float32 and rounds where it stores)."""
    from inferplex.devices.gpu.ops import _qdq_attention as attention

    dtype = getattr(torch, kind)
    generator = torch.Generator(device="cuda").manual_seed(16)
    packed = (torch.randint(-40, 40, (4, 96, 3, 12, 64), device="cuda", generator=generator) * 0.05).to(dtype)
    query, key, value = (packed[:, :, i].permute(0, 2, 1, 3) for i in range(3))
    padding = torch.zeros(4, 1, 1, 96, device="cuda", dtype=dtype)
    padding[1, ..., 70:] = -1e4
    padding[3, ..., 5:] = -1e4

    def step(scale: float, zero: int, low: int, high: int) -> tuple[torch.Tensor, float, int, int, int]:
        return torch.tensor(scale, device="cuda"), scale, zero, low, high

    steps = (step(0.3, 3, -128, 127), None, step(0.5, 10, -128, 127), step(1 / 255, 0, 0, 255),
             step(0.01, -2, -128, 127))
    numbers = [attention.step_numbers(one) for one in steps]
    key_t = key.transpose(-1, -2)
    written = padding.expand(4, 12, 96, 96).contiguous()
    got = attention._run_kernel(query, key_t, value, padding, 8.0, True, numbers)
    want = attention._run_kernel(query, key_t, value, written, 8.0, True, numbers)
    apart = (got.double() - want.double()).abs()
    assert float(apart.max()) <= 0.0201 and float((apart > 0).double().mean()) <= 1e-3
    separate = _attention_in_float32(query, key_t, value, padding, 8.0, True, steps)
    apart = (got.double() - separate.double()).abs()
    assert float(apart.max()) <= 0.0201 and float((apart > 0).double().mean()) <= 1e-2
