"""Reading OpenVINO IR models (``.xml`` with its ``.bin``), so OpenVINO programs that read them run.

OpenVINO reads the IR (:mod:`.source`; the ``openvino`` package is imported only then), and the
``openvino.Model`` it gives is rebuilt op by op with inferplex's OpenVINO-style builders
(:mod:`.graph`, each op type in :mod:`.ops`, constants and types in :mod:`.constants`) into an
inferplex Model: an ONNX graph with the IR's tensor names, friendly names, element types, dynamic
dims, layouts and weights.  :func:`inferplex._model_io.load_model` calls :func:`read_ir` for a
source :func:`looks_like_ir` recognizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferplex._model import Model
from inferplex.api.ir.source import looks_like_ir, open_buffer, open_path

__all__ = ["looks_like_ir", "read_ir"]


def read_ir(source: Path | bytes | str, weights: Any = None) -> Model:
    """The Model of an IR: ``source`` is the .xml's path, or its content (bytes or text) with
    ``weights`` the .bin's bytes or an ``ov.Tensor`` of them; for a path, ``weights`` is the .bin's
    path (None: ``<name>.bin`` beside the .xml)."""
    from inferplex.api.ir.graph import rebuild

    if isinstance(source, Path):
        what = f"OpenVINO IR {str(source)!r}"
        return rebuild(open_path(source, weights), what)
    return rebuild(open_buffer(source, weights), "the given OpenVINO IR")
