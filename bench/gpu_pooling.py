"""The GPU device's channels-last MaxPool pass on CUDA against ATen's max pool and Inductor's.

A CNN's stem max pool (3 x 3 window, stride 2, pads 1; 64 channels of 112 x 112, float16) at
batch 1, 8, 32 and 64, each call timed as CUDA-graph replays (20 calls a graph, the best of 5
replays, µs per call):

* ``inferplex``: the Triton pass the GPU device's eager tier runs for a 2-D MaxPool of
  channels-last float data (``devices/gpu/ops/_pooling.py``);
* ``ATen channels-last``: ``F.max_pool2d`` on the same channels-last tensor (what ran before);
* ``ATen contiguous``: ``F.max_pool2d`` on the NCHW tensor;
* ``torch.compile``: ``F.max_pool2d`` on the channels-last tensor compiled by Inductor (default
  mode; the graph replays are the CUDA graphs).

Ratios are the peers' time over inferplex's.  JSON goes to ``$OUT/gpu_pooling.json`` when ``OUT`` is
set.

    python bench/gpu_pooling.py
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    import torch
    import torch.nn.functional as F
    from cuda_graph_timing import graph_us

    from inferplex.devices.gpu.ops import _pooling

    if not torch.cuda.is_available():
        print("gpu_pooling.py needs a CUDA GPU")
        return

    class Window:  # the strides and dilations the pass reads from a MaxPool node's window
        strides, dilations = [2, 2], [1, 1]

    compiled = torch.compile(lambda x: F.max_pool2d(x, 3, 2, 1))

    def ours(x: torch.Tensor) -> torch.Tensor:
        return _pooling._channels_last_max_pool(x, (3, 3), Window(), [1, 1, 1, 1], [1, 1])  # type: ignore[arg-type]

    def aten(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 3, 2, 1)

    rows = []
    print(f"{'input':<22}{'inferplex':>10}{'ATen CL':>10}{'ATen NCHW':>11}{'compile':>10}  "
          f"ATen CL/ours  compile/ours  TB/s")
    for batch in (1, 8, 32, 64):
        x = torch.randn(batch, 64, 112, 112, device="cuda", dtype=torch.float16)
        channels_last = x.contiguous(memory_format=torch.channels_last)
        assert torch.equal(ours(channels_last), aten(channels_last))
        times = {name: graph_us(functools.partial(lambda _, fn, data: fn(data), fn=fn, data=data))
                 for name, fn, data in (("inferplex_us", ours, channels_last), ("aten_channels_last_us", aten,
                                                                               channels_last),
                                        ("aten_contiguous_us", aten, x), ("torch_compile_us", compiled,
                                                                          channels_last))}
        moved = x.numel() * 2 * 1.25  # read once, a quarter written
        rows.append({"shape": list(x.shape), **times})
        mine = times["inferplex_us"]
        print(f"{tuple(x.shape)!s:<22}{mine:>10.1f}{times['aten_channels_last_us']:>10.1f}"
              f"{times['aten_contiguous_us']:>11.1f}{times['torch_compile_us']:>10.1f}  "
              f"{times['aten_channels_last_us'] / mine:>11.2f}x {times['torch_compile_us'] / mine:>12.2f}x  "
              f"{moved / mine / 1e6:.2f}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_pooling.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
