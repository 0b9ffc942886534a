"""The Triton kernels of QDQ transformers on CUDA against what a float16 model runs in their place.

Each call is timed as CUDA-graph replays (20 calls a graph, the best of 5 replays, µs per call) on
BERT-base's shapes (batch 32, sequence 128, hidden 768, 12 heads):

* ``int8 linear``: the GPU device's int8 matmul (``devices/gpu/ops/_quantized_triton.int8_linear``)
  with int8 rows (``quantize_static``'s QDQ matmuls) and uint8 rows (``quantize_dynamic``'s), against
  ``F.linear`` in float16 (the f16 model) and ``torch._int_mm`` (cuBLASLt's int8 matmul, int32 out);
* ``attention``: the QDQ attention kernel (``ops/_qdq_attention.py``, a pair after the scores, the
  scale, the softmax and the context) against ``F.scaled_dot_product_attention`` in float16 (the f16
  model's attention) and against the same chain as separate ATen calls (what ran before); the
  kernel writing its output projection's 8-bit input in place of the context; and both with a
  padding mask (one row per sequence, broadcast over heads and query rows);
* ``gelu``: the QDQ GELU kernel (``ops/_qdq_gelu.py``, pairs after the erf, the sum and the product)
  against ``F.gelu`` in float16 and the same formula as separate ATen calls; and, as an int8
  matmul's input, the kernel followed by QuantizeLinear's pass against the kernel writing the 8-bit
  data itself;
* ``layer norm``: the QDQ residual Add, pair, LayerNormalization, its pair and the next int8 matmul's
  QuantizeLinear as one kernel (``ops/_residual_layer_norm.py``) against the f16 model's Add and
  ``F.layer_norm``, and against the same chain as separate calls (what ran before: the Add, a
  fake-quantize, ``F.layer_norm``, a fake-quantize and QuantizeLinear's pass); and the same kernel's
  float form (a float model's Add and normalization), alone and writing the partial minima and
  maxima a dynamic matmul's quantizer reads.

* ``dynamic feed-forward``: ``quantize_dynamic``'s up projection and the quantizer of its GELU
  (4096 x 768 -> 3072): the int8 matmul, ``F.gelu``, a range pass and DynamicQuantizeLinear's pass,
  against the matmul recording what the GELU's quantizer needs and that quantizer computing the
  GELU itself (``ops/_gelu_levels.py``); the f16 model's ``F.linear`` and ``F.gelu`` the baseline.

``--tilings`` adds the int8 kernel's tilings (128 x 128 x 128 tiles with 4 or 8 warps, 3 or 4
stages, for int8 and uint8 rows, with pointer loads and with Hopper's tensor copies, one program a
tile or, with tensor copies, 2 or 3 persistent programs a multiprocessor) and the
attention kernel's query rows per program, at sequences of 128, 256 and 512 (the batch smaller in
proportion).  Values are random: only the time is measured (the tests
check the numbers against ONNX Runtime).  JSON goes to
``$OUT/gpu_qdq_kernels.json`` when ``OUT`` is set.

    python bench/gpu_qdq_kernels.py
    python bench/gpu_qdq_kernels.py --tilings
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_output import write_json
from cuda_graph_timing import graph_us

LINEAR_SHAPES = ((4096, 768, 2304), (4096, 768, 768), (4096, 768, 3072), (4096, 3072, 768))
"""(rows, depth, outputs) of BERT-base's four matmuls at batch 32, sequence 128."""

BATCH, HEADS, LENGTH, WIDTH = 32, 12, 128, 64


def _graph_us(fn: Callable[[], Any]) -> float:
    return graph_us(lambda _: fn())


def _step(scale: float, zero: int, low: int, high: int) -> tuple[Any, ...]:
    import torch

    return torch.tensor(scale, device="cuda"), scale, zero, low, high


_PAIR = [0.05, 3, -128, 127]
"""A fake-quantize step (scale, zero point, low, high) as a QDQ model's matmul epilogue runs it."""


def _linear_rows(tilings: bool) -> list[dict[str, Any]]:
    return [_linear_row(m, k, n, tilings) for m, k, n in LINEAR_SHAPES]


def _linear_row(m: int, k: int, n: int, tilings: bool) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    weight = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda")
    signed = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    unsigned = torch.randint(0, 256, (m, k), dtype=torch.uint8, device="cuda")
    scales = torch.rand(n, device="cuda") * 1e-3
    columns = weight.sum(dim=1, dtype=torch.int32).reshape(1, -1)
    zero = torch.tensor(7, dtype=torch.uint8, device="cuda")
    bias = torch.randn(n, device="cuda").half()
    a16, w16 = signed.half(), weight.half()
    row = {"shape": f"{m} x {k} x {n}",
           "f16 linear": _graph_us(lambda: F.linear(a16, w16)),
           "_int_mm": _graph_us(lambda: torch._int_mm(signed, weight.t())),
           "int8 rows": _graph_us(lambda: kernels.int8_linear(signed, weight, None, None, 0, scales, None,
                                                              torch.float16)),
           "int8 rows, bias and pairs": _graph_us(lambda: kernels.int8_linear(
               signed, weight, None, None, 0, scales, bias, torch.float16, _PAIR, _PAIR)),
           "uint8 rows": _graph_us(lambda: kernels.int8_linear(unsigned, weight, columns, zero, 128, scales,
                                                               None, torch.float16))}
    if tilings:
        row.update(_tilings(kernels, signed, unsigned, weight, columns, zero, scales, bias))
    return row


def _tilings(kernels: Any, signed: Any, unsigned: Any, weight: Any, columns: Any, zero: Any,
             scales: Any, bias: Any) -> dict[str, float]:
    """The int8 kernel with 128 x 128 x 128 tiles under each warp and stage count, for both row types,
    with pointer loads and (on GPUs that have them) Hopper's tensor copies, one program a tile or
    persistent programs."""
    import torch

    m, k = signed.shape
    n = weight.shape[0]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = (m + 127) // 128 * ((n + 127) // 128)
    out = torch.empty((m, n), dtype=torch.float16, device="cuda")
    found = {}
    for name, rows in (("int8", signed), ("uint8", unsigned), ("int8 with bias and pairs", signed)):
        epilogue = name.endswith("pairs")
        descriptors = kernels._tensor_descriptors(rows, weight, 128, 128, 128)
        for loads, sources in (("pointers", (rows, weight)), ("tensor copies", descriptors)):
            if sources is None:
                continue
            # one program a tile; with tensor copies also 2 and 3 persistent programs a multiprocessor
            persistent = (2, 3) if loads == "tensor copies" else ()
            for warps, stages, per_sm in ((4, 4, 0), (8, 3, 0), (4, 3, 0), *((4, 3, p) for p in persistent)):
                programs = min(tiles, per_sm * sms) if per_sm else tiles

                def run(rows: Any = rows, sources: Any = sources, tma: bool = loads == "tensor copies",
                        warps: int = warps, stages: int = stages, epilogue: bool = epilogue,
                        programs: int = programs) -> None:
                    # the table, the data's scale and the value range are not read (TABLE,
                    # X_SCALE and GELU_RANGE off)
                    kernels._triton().linear[(programs,)](
                        *sources, out, columns, zero, scales, bias, scales, scales, scales, m, n, k,
                        rows.stride(0), weight.stride(0), out.stride(0),
                        128 if rows.dtype == torch.uint8 else 0,
                        *kernels.step_arguments(_PAIR if epilogue else None),
                        *kernels.step_arguments(_PAIR if epilogue else None), 0.0, 0.0,
                        A_UINT8=rows.dtype == torch.uint8, COLUMNS=rows.dtype == torch.uint8,
                        ZERO=rows.dtype == torch.uint8, SCALES=True, BIAS=epilogue, EVEN_K=k % 128 == 0,
                        MID=epilogue, LAST=epilogue, TABLE=False, X_SCALE=False, LEVELS=False,
                        GELU_RANGE=False, DIVIDE=False, TMA=tma, BM=128,
                        BN=128, BK=128, GROUP=8, FLATTEN=programs < tiles, num_warps=warps,
                        num_stages=stages)
                label = f" {per_sm} a multiprocessor" if per_sm else ""
                found[f"{name} {loads} {warps}w{stages}s{label}"] = _graph_us(run)
    return found


def _attention_row(tilings: bool, length: int = LENGTH) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _qdq_attention as attention

    batch = BATCH * LENGTH // length  # the same number of query rows at every length
    # Q, K and V as views of one QKV projection's output, as a model's Reshape and Transpose leave them
    packed = torch.randn(batch, length, 3, HEADS, WIDTH, device="cuda").half()
    query, key, value = (packed[:, :, i].permute(0, 2, 1, 3) for i in range(3))
    key_t = key.transpose(-1, -2)
    steps = (_step(0.05, 3, -128, 127), _step(0.01, 0, -128, 127), None, _step(1 / 255, 0, 0, 255),
             _step(0.004, -2, -128, 127))
    numbers = [attention.step_numbers(step) for step in steps]
    row = {"shape": f"{batch} x {HEADS} x {length} x {WIDTH}",
           "sdpa f16": _graph_us(lambda: F.scaled_dot_product_attention(query, key, value)),
           "separate calls": _graph_us(lambda: attention._aten(query, key_t, value, None, 8.0, True, steps)),
           "kernel": _graph_us(lambda: attention._run_kernel(query, key_t, value, None, 8.0, True, numbers)),
           # the output projection's 8-bit input written in place of the context
           "kernel writing 8-bit data": _graph_us(lambda: attention._run_kernel(
               query, key_t, value, None, 8.0, True, numbers, [0.004, 0, -128, 127]))}
    # BERT's padding mask: one row of values per sequence, broadcast over the heads and query rows
    padding = torch.zeros(batch, 1, 1, length, device="cuda").half()
    padding[::2, ..., length * 3 // 4:] = -1e4
    row["sdpa f16, padding mask"] = _graph_us(
        lambda: F.scaled_dot_product_attention(query, key, value, attn_mask=padding))
    row["kernel, padding mask"] = _graph_us(
        lambda: attention._run_kernel(query, key_t, value, padding, 8.0, True, numbers))
    if tilings:
        for block_m in (16, 32, 64, 128):
            original = attention._rows_per_program
            attention._rows_per_program = lambda keys, block_m=block_m: block_m  # type: ignore[assignment]
            try:
                row[f"kernel, {block_m} rows"] = _graph_us(
                    lambda: attention._run_kernel(query, key_t, value, None, 8.0, True, numbers))
            finally:
                attention._rows_per_program = original  # type: ignore[assignment]
    return row


def _gelu_row() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _qdq_gelu as gelu
    from inferplex.devices.gpu.ops import _quantized_triton as kernels

    x = (torch.randn(BATCH, LENGTH, 4 * HEADS * WIDTH, device="cuda") * 3).half()
    steps = (_step(2 / 255, 0, -128, 127), _step(2 / 255, -128, -128, 127), _step(0.05, 5, -128, 127))
    scale = torch.tensor(0.0123, device="cuda")
    zero = torch.tensor(3, dtype=torch.uint8, device="cuda")

    def then_quantize() -> Any:
        value = gelu._run_kernel(x, 1.4140625, True, 1.0, 0.5, steps, None)
        return kernels.quantize(value, scale, zero, torch.uint8)

    return {"shape": f"{BATCH} x {LENGTH} x {4 * HEADS * WIDTH}",
            "F.gelu f16": _graph_us(lambda: F.gelu(x)),
            "separate calls": _graph_us(lambda: gelu._aten(x, 1.4140625, True, 1.0, 0.5, steps)),
            "kernel": _graph_us(lambda: gelu._run_kernel(x, 1.4140625, True, 1.0, 0.5, steps, None)),
            # an int8 matmul's input: the kernel, then QuantizeLinear's pass; or the kernel writing it
            "kernel, then quantize": _graph_us(then_quantize),
            "quantizing kernel": _graph_us(lambda: gelu._run_kernel(x, 1.4140625, True, 1.0, 0.5, steps,
                                                                     (0.0123, 3, torch.uint8)))}


def _layer_norm_row() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops import _quantized_triton as kernels
    from inferplex.devices.gpu.ops import _residual_layer_norm as norm
    from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize

    hidden = HEADS * WIDTH
    a, b = ((torch.randn(BATCH, LENGTH, hidden, device="cuda") * 2).half() for _ in range(2))
    weight, bias = torch.rand(hidden, device="cuda").half() + 0.5, torch.randn(hidden, device="cuda").half()
    steps = (_step(0.06, 2, -128, 127), _step(0.04, -3, -128, 127))
    quantize = (0.04, -3, torch.int8)
    scale, zero = torch.tensor(0.04, device="cuda"), torch.tensor(-3, dtype=torch.int8, device="cuda")

    def separate_calls() -> Any:  # as the program ran them: the int8 matmul's quantizing pass last
        y = F.layer_norm(quantize_dequantize(a + b, *steps[0]), (hidden,), weight, bias)
        return quantize_dequantize(y, *steps[1]), kernels.quantize(y, scale, zero, torch.int8)

    return {"shape": f"{BATCH} x {LENGTH} x {hidden}",
            "add + F.layer_norm f16": _graph_us(lambda: F.layer_norm(a + b, (hidden,), weight, bias)),
            "separate calls": _graph_us(separate_calls),
            "kernel": _graph_us(lambda: norm.residual_layer_norm(a, b, weight, bias, 1e-5, *steps,
                                                                   quantize)),
            # a float model's: the Add and the normalization, and with the partial minima and maxima
            # a dynamic matmul's quantizer reads
            "float kernel": _graph_us(lambda: norm.residual_layer_norm(a, b, weight, bias, 1e-5, None, None,
                                                                         None)),
            "float kernel with partials": _graph_us(lambda: norm.layer_norm_with_partials(a, b, weight, bias,
                                                                                          1e-5))}


def _dynamic_feed_forward_row() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops._fused_quantized import dynamic_quantize_rows, dynamic_quantized_linear
    from inferplex.devices.gpu.ops._gelu_levels import gelu_band, gelu_quantize_rows
    from inferplex.devices.gpu.ops._quantized_triton import fresh_value_range

    rows, depth, width = BATCH * LENGTH, HEADS * WIDTH, 4 * HEADS * WIDTH
    levels, _, zero = dynamic_quantize_rows(torch.randn(rows, depth, device="cuda").half())
    weight = torch.randint(-127, 128, (width, depth), dtype=torch.int8, device="cuda")
    sums = weight.t().sum(dim=0, dtype=torch.int32).reshape(1, -1)
    scale = torch.full((width,), 2e-4, device="cuda")
    bias, x_scale = torch.randn(width, device="cuda") * 0.1, torch.tensor(0.02, device="cuda")
    band = gelu_band(torch.float16, "none")
    x16 = torch.randn(rows, depth, device="cuda").half()
    w16, b16 = (weight.half() * 2e-4), bias.half()

    def matmul(gelu_range: Any = None) -> Any:
        return dynamic_quantized_linear(levels, zero, weight, sums, scale, bias, torch.float16, x_scale, True,
                                        gelu_range)

    def recorded() -> Any:
        value_range = fresh_value_range(torch.device("cuda"))
        return gelu_quantize_rows(matmul((value_range, band.low, band.high)), "none", value_range)

    return {"shape": f"{rows} x {depth} -> {width}",
            "f16 linear + F.gelu": _graph_us(lambda: F.gelu(F.linear(x16, w16, b16))),
            "separate calls": _graph_us(lambda: dynamic_quantize_rows(F.gelu(matmul()))),
            "recorded, GELU in the quantizer": _graph_us(recorded)}


def _print(title: str, rows: list[dict[str, Any]], baseline: str) -> None:
    print(f"\n{title} (µs; ratio: {baseline} / column)")
    for row in rows:
        cells = [f"{name} {value:.1f} ({row[baseline] / value:.2f}x)" for name, value in row.items()
                 if name != "shape"]
        print(f"  {row['shape']}: " + " | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilings", action="store_true",
                        help="the int8 kernel's and the attention's tilings")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    lengths = (LENGTH, 256, 512) if args.tilings else (LENGTH,)
    results = {"linear": _linear_rows(args.tilings),
               "attention": [_attention_row(args.tilings, length) for length in lengths],
               "gelu": [_gelu_row()], "layer norm": [_layer_norm_row()],
               "dynamic feed-forward": [_dynamic_feed_forward_row()]}
    _print("int8 linear", results["linear"], "f16 linear")
    _print("attention", results["attention"], "sdpa f16")
    _print("gelu", results["gelu"], "F.gelu f16")
    _print("layer norm", results["layer norm"], "add + F.layer_norm f16")
    _print("dynamic feed-forward", results["dynamic feed-forward"], "f16 linear + F.gelu")
    write_json("gpu_qdq_kernels.json", {"device": torch.cuda.get_device_name(), **results})


if __name__ == "__main__":
    main()
