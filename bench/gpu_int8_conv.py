"""The GPU device's int8 convolution of QDQ models on CUDA against cuDNN's float16 convolution.

Each call is timed as CUDA-graph replays (20 calls a graph, the best of 5 replays, µs per call) on
ResNet-18's convolutions at batch 32 (3 x 3 of 64 to 512 channels, stride 1 and 2, and a strided
1 x 1), channels-last:

* ``int8 conv``: ``devices/gpu/ops/_int8_conv.int8_conv`` as a QDQ Conv whose pair holds a Relu runs
  it: the pass that turns the float16 data into its pair's int8 levels (with the pads), then the
  int8 implicit-GEMM kernel with the bias, the Relu and the pair in its epilogue;
* ``kernel``: the kernel alone (the levels made beforehand);
* ``cuDNN f16``: ``F.conv2d`` with the bias on the same float16 channels-last data
  (``cudnn.benchmark`` on): what the float16 model runs, and what ``torch.compile`` lowers a
  convolution to; torch has no int8 convolution on CUDA.

The ratio is cuDNN's time over the int8 convolution's.  JSON goes to ``$OUT/gpu_int8_conv.json``
when ``OUT`` is set.

    python bench/gpu_int8_conv.py
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_output import write_json

_SHAPES = [  # batch, channels, size, out channels, kernel, stride, pad
    (32, 64, 56, 64, 3, 1, 1), (32, 64, 56, 128, 3, 2, 1), (32, 64, 56, 128, 1, 2, 0),
    (32, 128, 28, 128, 3, 1, 1), (32, 128, 28, 256, 3, 2, 1), (32, 256, 14, 256, 3, 1, 1),
    (32, 256, 14, 512, 3, 2, 1), (32, 512, 7, 512, 3, 1, 1)]


def _row(shape: tuple[int, ...]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from cuda_graph_timing import graph_us

    from inferplex.devices.gpu.ops import _int8_conv

    batch, channels, size, out_channels, kernel, stride, pad = shape
    generator = torch.Generator().manual_seed(channels + out_channels)
    levels = torch.randint(-128, 128, (batch, channels, size, size), generator=generator)
    x = (levels.half() * 0.05).cuda().contiguous(memory_format=torch.channels_last)
    weight = torch.randint(-127, 128, (out_channels, channels, kernel, kernel), generator=generator,
                           dtype=torch.int8)
    arrays = _int8_conv.int8_conv_arrays(weight.numpy(), (torch.rand(out_channels) * 1e-3).numpy(), 0.05)
    packed: Any = (*(torch.from_numpy(a).cuda() for a in arrays), 0.05, 0, True)
    bias = torch.randn(out_channels, device="cuda").half()
    w16 = weight.half().cuda().contiguous(memory_format=torch.channels_last)
    pads, strides, dilations = [pad] * 4, [stride] * 2, [1, 1]
    pair = (torch.tensor(0.02, device="cuda"), 0.02, -128, -128, 127)
    assert _int8_conv.takes(x, packed, (kernel, kernel), pads)
    cudnn = graph_us(lambda _: F.conv2d(x, w16, bias, stride, pad))
    ours = graph_us(lambda _: _int8_conv.int8_conv(x, packed, (kernel, kernel), bias, pads, strides,
                                                   dilations, relu=True, first=pair))
    quantized = graph_us(lambda _: _int8_conv.quantize_padded(x, packed, pads))
    return {"convolution": f"{channels}->{out_channels} {kernel}x{kernel}/{stride} at {size}x{size}",
            "cudnn_f16_us": cudnn, "int8_conv_us": ours, "kernel_us": ours - quantized, "ratio": cudnn / ours}


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        print("gpu_int8_conv.py needs a CUDA GPU")
        return
    torch.backends.cudnn.benchmark = True
    rows: list[dict[str, Any]] = []
    print(f"{'convolution (batch 32)':36} {'cuDNN f16':>10} {'int8 conv':>10} {'kernel':>8} {'vs cuDNN':>9}")
    for shape in _SHAPES:
        row = _row(shape)
        rows.append(row)
        print(f"{row['convolution']:36} {row['cudnn_f16_us']:10.1f} {row['int8_conv_us']:10.1f} "
              f"{row['kernel_us']:8.1f} {row['ratio']:8.2f}x", flush=True)
    total_cudnn, total_ours = sum(r["cudnn_f16_us"] for r in rows), sum(r["int8_conv_us"] for r in rows)
    print(f"{'sum':36} {total_cudnn:10.1f} {total_ours:10.1f} {'':8} {total_cudnn / total_ours:8.2f}x")
    write_json("gpu_int8_conv.json", {"device": torch.cuda.get_device_name(), "rows": rows})


if __name__ == "__main__":
    main()
