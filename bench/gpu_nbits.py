"""MatMulNBits' kernels on CUDA against the float16 matmul and torch's own 4-bit matmul.

One call of each, timed as CUDA-graph replays (20 calls a graph, the best of 5 replays, µs per
call), on LLaMA-sized matmuls (``M`` rows of activations, depth ``K``, ``N`` outputs).  The calls
of a graph take turns over enough copies of the weights that their float16 bytes pass
:data:`_CACHE_BYTES` (as a model's successive layers do), so that no weight is still in the GPU's
L2 cache when it is read again:

* ``inferplex``: the GPU device's MatMulNBits (4-bit symmetric weights, blocks of 32, float16
  activations) as it runs inside a program: one row on the one-row kernel, up to 32 rows on the
  tiled kernel, more after the unpacking kernel and cuBLAS (``devices/gpu/ops/_nbits_triton.py``);
* ``cublas f16``: ``F.linear`` with the float16 weight (what the float16 model runs);
* ``torch int4``: ``torch._weight_int4pack_mm`` (torch's tinygemm kernel, bfloat16 activations,
  groups of 128: what ``torchao``'s int4 weight-only quantization calls), where this torch has it.

The weights' values are random: only the time is measured (``tests/test_gpu_contrib_matmul.py``
checks the numbers against ONNX Runtime).  JSON goes to ``$OUT/gpu_nbits.json`` when ``OUT`` is set.

    python bench/gpu_nbits.py
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_output import write_json
from cuda_graph_timing import graph_us

SHAPES = ((1, 2048, 5632), (1, 5632, 2048), (1, 4096, 4096), (1, 4096, 14336), (1, 14336, 4096),
          (2, 4096, 4096), (4, 4096, 11008), (8, 4096, 4096), (16, 4096, 11008), (64, 4096, 4096),
          (512, 4096, 11008), (2048, 4096, 4096))


_CACHE_BYTES = 256 * 2**20
"""More than twice the L2 cache of an H100 (50 MB) or H200."""


def _row(m: int, k: int, n: int) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    from inferplex.devices.gpu.ops._nbits_triton import nbits_linear

    block = 32
    copies = max(2, -(-_CACHE_BYTES // (n * k * 2)))
    packed = [torch.randint(0, 256, (n, k // block, block // 2), dtype=torch.uint8, device="cuda")
              for _ in range(copies)]
    scales = [(torch.rand(n, k // block, device="cuda") * 0.01).half() for _ in range(copies)]
    a = torch.randn(m, k, device="cuda").half()
    weights = [torch.randn(n, k, device="cuda").half() for _ in range(copies)]
    row: dict[str, Any] = {
        "m": m, "k": k, "n": n, "weight_copies": copies,
        "inferplex_us": graph_us(lambda i: nbits_linear(a, packed[i], scales[i], None, None, n, k, 4, block),
                                  copies),
        "cublas_f16_us": graph_us(lambda i: F.linear(a, weights[i]), copies)}
    weights.clear()  # the float16 copies are not needed past their row
    try:
        tinygemm = []
        for _ in range(copies):
            values = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
            tinygemm.append(torch._convert_weight_to_int4pack(
                (values[:, ::2] << 4 | values[:, 1::2]).to(torch.uint8), 8))
        scale_zero = [torch.randn(k // 128, n, 2, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        a16 = a.to(torch.bfloat16)
        row["torch_int4_us"] = graph_us(
            lambda i: torch._weight_int4pack_mm(a16, tinygemm[i], 128, scale_zero[i]), copies)
    except (AttributeError, RuntimeError) as error:  # not in this torch, or not for this GPU
        row["torch_int4_error"] = str(error).splitlines()[0][:120]
    return row


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    print(f"{'M':>5}{'K':>7}{'N':>7}{'inferplex us':>14}{'cublas f16 us':>15}{'torch int4 us':>15}"
          f"{'vs f16':>8}{'vs int4':>9}")
    rows = []
    for m, k, n in SHAPES:
        row = _row(m, k, n)
        rows.append(row)
        ours, f16, int4 = row["inferplex_us"], row["cublas_f16_us"], row.get("torch_int4_us")
        print(f"{m:>5}{k:>7}{n:>7}{ours:>14.1f}{f16:>15.1f}{int4 if int4 else float('nan'):>15.1f}"
              f"{f16 / ours:>7.2f}x{(int4 / ours if int4 else float('nan')):>8.2f}x")
    write_json("gpu_nbits.json", {"device": torch.cuda.get_device_name(), "rows": rows})


if __name__ == "__main__":
    main()
