"""torch modules exported to ONNX for the GPU tests (torch's TorchScript exporter), output ``y``."""

from __future__ import annotations

import io
from typing import Any

import onnx


def export_onnx(module: Any, args: tuple[Any, ...], names: list[str],
                dynamic: dict[str, Any] | None = None, opset: int = 17) -> onnx.ModelProto:
    """``module`` (put in eval mode) with inputs ``names`` and ``dynamic`` axes, as a ModelProto."""
    import torch

    buffer = io.BytesIO()
    module.eval()
    torch.onnx.export(module, args, buffer, input_names=names, output_names=["y"], opset_version=opset,
                      dynamic_axes=dynamic, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())
