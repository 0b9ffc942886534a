"""torch modules exported to ONNX for the benchmarks (torch's TorchScript exporter, opset 17)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def export_onnx(module: Any, args: tuple[Any, ...], names: list[str], *, path: Path | None = None,
                output_names: list[str] | None = None, dynamic_batch: bool = False, opset: int = 17) -> Any:
    """``module`` (put in eval mode) as an ONNX ModelProto, or saved to ``path`` (then returned).

    ``names``: the inputs' names; ``dynamic_batch``: dim 0 of every input is ``batch``; ``opset``:
    the ONNX opset (below 17, LayerNorm is exported as its formula).
    """
    import onnx
    import torch

    module.eval()
    target: Any = str(path) if path is not None else io.BytesIO()
    dynamic = {name: {0: "batch"} for name in names} if dynamic_batch else None
    with torch.no_grad():
        torch.onnx.export(module, args, target, input_names=names, output_names=output_names,
                          opset_version=opset, dynamic_axes=dynamic, dynamo=False)
    return path if path is not None else onnx.load_from_string(target.getvalue())
