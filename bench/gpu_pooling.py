"""The GPU device's channels-last pooling passes on CUDA against ATen's pools and Inductor's.

Each call is timed as CUDA-graph replays (20 calls a graph, the best of 5 replays, µs per call) on
float16 data:

* ``max 3x3/2``: a CNN's stem max pool (3 x 3 window, stride 2, pads 1; 64 channels of 112 x 112)
  at batch 1, 8, 32 and 64;
* ``avg 3x3/1``: an Inception block's average pool (3 x 3, stride 1, pads 1, the pads not counted;
  192 channels of 35 x 35), batch 32;
* ``avg 2x2/2``: a DenseNet transition's average pool (2 x 2, stride 2; 128 channels of 56 x 56),
  batch 32.

Engines: ``inferplex``, the Triton pass the GPU device's eager tier runs for a 2-D MaxPool or
AveragePool of channels-last float data (``devices/gpu/ops/_pooling.py``); ``ATen CL``,
``F.max_pool2d``/``F.avg_pool2d`` on the same channels-last tensor (what ran before); ``ATen NCHW``,
the same on the contiguous tensor; ``compile``, the channels-last call compiled by Inductor
(``torch.compile``, default mode; the graph replays are the CUDA graphs).  Ratios are the peers'
time over inferplex's.  JSON goes to ``$OUT/gpu_pooling.json`` when ``OUT`` is set.

    python bench/gpu_pooling.py
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_output import write_json

_CASES = [("max 3x3/2", (batch, 64, 112, 112), (3, 3), (2, 2), (1, 1)) for batch in (1, 8, 32, 64)] + [
    ("avg 3x3/1", (32, 192, 35, 35), (3, 3), (1, 1), (1, 1)),
    ("avg 2x2/2", (32, 128, 56, 56), (2, 2), (2, 2), (0, 0))]


def main() -> None:
    import torch
    import torch.nn.functional as F
    from cuda_graph_timing import graph_us

    from inferplex.devices.gpu.ops import _pooling

    if not torch.cuda.is_available():
        print("gpu_pooling.py needs a CUDA GPU")
        return

    class Window:  # the strides and dilations the passes read from the node's window
        def __init__(self, strides: tuple[int, int]) -> None:
            self.strides, self.dilations = list(strides), [1, 1]

    rows: list[dict[str, Any]] = []
    print(f"{'pool':<11}{'input':<22}{'inferplex':>10}{'ATen CL':>10}{'ATen NCHW':>11}{'compile':>10}  "
          f"ATen CL/ours  compile/ours")
    for name, shape, kernel, strides, pads in _CASES:
        average = name.startswith("avg")
        onnx_pads, ends = [*pads, *pads], list(pads)

        def ours(x: torch.Tensor, average: bool = average, kernel: Any = kernel, strides: Any = strides,
                 onnx_pads: Any = onnx_pads, ends: Any = ends) -> torch.Tensor:
            window = Window(strides)
            if average:
                return _pooling._channels_last_average_pool(x, kernel, window, onnx_pads, ends,  # type: ignore[arg-type]
                                                            False)
            return _pooling._channels_last_max_pool(x, kernel, window, onnx_pads, ends)  # type: ignore[arg-type]

        def aten(x: torch.Tensor, average: bool = average, kernel: Any = kernel, strides: Any = strides,
                 pads: Any = pads) -> torch.Tensor:
            if average:
                return F.avg_pool2d(x, kernel, strides, pads, count_include_pad=False)
            return F.max_pool2d(x, kernel, strides, pads)

        compiled = torch.compile(aten)
        x = torch.randn(shape, device="cuda", dtype=torch.float16)
        channels_last = x.contiguous(memory_format=torch.channels_last)
        assert torch.equal(ours(channels_last), aten(channels_last))
        times = {label: graph_us(functools.partial(lambda _, fn, data: fn(data), fn=fn, data=data))
                 for label, fn, data in (("inferplex_us", ours, channels_last),
                                         ("aten_channels_last_us", aten, channels_last),
                                         ("aten_contiguous_us", aten, x),
                                         ("torch_compile_us", compiled, channels_last))}
        rows.append({"pool": name, "shape": list(shape), **times})
        mine = times["inferplex_us"]
        print(f"{name:<11}{tuple(shape)!s:<22}{mine:>10.1f}{times['aten_channels_last_us']:>10.1f}"
              f"{times['aten_contiguous_us']:>11.1f}{times['torch_compile_us']:>10.1f}  "
              f"{times['aten_channels_last_us'] / mine:>11.2f}x {times['torch_compile_us'] / mine:>12.2f}x")
    write_json("gpu_pooling.json", {"device": torch.cuda.get_device_name(), "rows": rows})


if __name__ == "__main__":
    main()
