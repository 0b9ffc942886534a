"""``openvino.tools.ovc``'s Python API: :func:`convert_model`, the same function as
``inferplex.convert_model`` (ONNX and PyTorch sources), for programs that import it from here."""

from __future__ import annotations

from inferplex.api.convert import convert_model

__all__ = ["convert_model"]
