"""ResNet-50 f32, batch 64, on one GPU: memory layout and torch.compile, side by side.

Checks whether ``GPU_CHANNELS_LAST`` (NHWC convolutions) or ``TORCH_COMPILE``
pays at f32, where TF32 stays off, against torch.compile and eager on the native
module.  Medians of CUDA-event timings; the last column is throughput over
torch.compile's.  Needs CUDA and torchvision.

    python bench/gpu_resnet50_f32_layout.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch
import torchvision

from inferplex.devices.gpu.plugin import GpuPlugin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_export import export_onnx

from gpu_device import median_timer


def _median_ms(fn: Callable[[], Any], iters: int = 20) -> float:
    return median_timer(cuda=True)(fn, 5, iters)


def main() -> None:
    torch.manual_seed(0)
    module = torchvision.models.resnet50(weights=None).eval()
    model = ir.from_proto(export_onnx(module, (torch.randn(1, 3, 224, 224),), ["x"], output_names=["y"],
                                      dynamic_batch=True))
    x = torch.randn(64, 3, 224, 224, device="cuda")
    rows: dict[str, float] = {}
    for layout in ("NO", "YES"):
        for compile_graph in (False, True):
            program = GpuPlugin().compile(model, "GPU.0", {"GPU_CHANNELS_LAST": layout,
                                                           "TORCH_COMPILE": compile_graph})
            label = f"inferplex channels_last={layout} torch_compile={compile_graph}"
            rows[label] = _median_ms(lambda p=program: p.run({"x": x}, keep_on_device={"y"}))
            program.close()
    native = module.cuda()
    with torch.inference_mode():
        compiled = torch.compile(native)
        rows["torch.compile (native)"] = _median_ms(lambda: compiled(x))
        rows["torch eager (native)"] = _median_ms(lambda: native(x))
    base = rows["torch.compile (native)"]
    for label, ms in rows.items():
        print(f"{label:48s} {ms:8.3f} ms  {base / ms:.2f}x torch.compile")


if __name__ == "__main__":
    main()
