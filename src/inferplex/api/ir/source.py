"""Reading an OpenVINO IR (``.xml`` with its ``.bin``) into an ``openvino.Model`` with OpenVINO itself.

The ``openvino`` package is imported only here, when an IR is read.  A path reads as OpenVINO's
``read_model(xml_path, bin_path)`` does: without a weights path, ``<name>.bin`` beside the xml.
The buffer forms take the xml as bytes or text and the weights as bytes, a numpy array, an
``ov.Tensor`` (inferplex's or OpenVINO's) or nothing.  What OpenVINO refuses ends as a ModelError
naming the source and OpenVINO's reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from inferplex.errors import InputTypeError, ModelError

__all__ = ["looks_like_ir", "open_buffer", "open_path", "openvino_module"]

_EXPORT_HINT = ("or export the source model to ONNX (torch.onnx.export, tf2onnx, ...) and read the "
                ".onnx file")


def looks_like_ir(head: bytes) -> bool:
    """Whether the first bytes of a source are an OpenVINO IR: XML whose root element is ``<net>``
    (after an optional byte order mark, XML declaration and comments)."""
    rest = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    while rest.startswith((b"<?", b"<!--")):
        close = b"?>" if rest.startswith(b"<?") else b"-->"
        end = rest.find(close)
        if end < 0:
            return False
        rest = rest[end + len(close):].lstrip()
    return rest.startswith(b"<net") and rest[4:5] in (b" ", b">", b"\t", b"\r", b"\n")


def open_path(xml_path: Path, weights: Any) -> Any:
    """The ``openvino.Model`` of the IR at ``xml_path``; ``weights`` is the .bin path, None for
    ``<name>.bin`` beside it, or the weights themselves (bytes, array, tensor)."""
    what = f"OpenVINO IR {str(xml_path)!r}"
    if weights is not None and not isinstance(weights, (str, os.PathLike)):
        return open_buffer(xml_path.read_bytes(), weights, what)
    if weights is not None and not Path(weights).is_file():
        raise ModelError(f"weights file {str(weights)!r} of the {what} does not exist or is not a file; "
                         "read_model(xml_path, bin_path) needs the IR's .bin (or leave bin_path out to use "
                         "<name>.bin beside the .xml)")
    openvino = openvino_module()
    if weights is None:
        bin_path = xml_path.with_suffix(".bin")
        if not bin_path.is_file():
            return _read(lambda: openvino.Core().read_model(str(xml_path)), what,
                         f"; no weights file {str(bin_path)!r} is beside it (an IR with weights needs its "
                         ".bin: give read_model(xml_path, bin_path) or keep <name>.bin next to the .xml)")
    else:
        bin_path = Path(weights)
    return _read(lambda: openvino.Core().read_model(str(xml_path), str(bin_path)), what, "")


def open_buffer(xml: bytes | str, weights: Any, what: str = "the given OpenVINO IR") -> Any:
    """The ``openvino.Model`` of an IR given as its xml (bytes or text) and weights."""
    openvino = openvino_module()
    text = xml.decode("utf-8", errors="replace") if isinstance(xml, (bytes, bytearray, memoryview)) \
        else str(xml)
    data = _weight_bytes(weights)
    # a copy the tensor owns: the model OpenVINO reads keeps the tensor, not the array it came from
    tensor = openvino.Tensor(data, shared_memory=False) if data.size else \
        openvino.Tensor(openvino.Type.u8, [0])
    hint = "" if data.size else "; no weights were given (read_model(xml, weights) takes the .bin's bytes)"
    return _read(lambda: openvino.Core().read_model(text, tensor), what, hint)


def _weight_bytes(weights: Any) -> np.ndarray:
    """The weights as a flat uint8 array: from bytes, a numpy array, a tensor (``.data``) or None."""
    if weights is None:
        return np.zeros(0, np.uint8)
    if isinstance(weights, (str, os.PathLike)):
        path = Path(weights)
        if not path.is_file():
            raise ModelError(f"weights file {str(path)!r} does not exist or is not a file; the weights of "
                             "an OpenVINO IR are its .bin (a path, bytes or an ov.Tensor of them)")
        return np.fromfile(path, np.uint8)
    if hasattr(weights, "read") and callable(weights.read):
        weights = weights.read()
    if isinstance(weights, (bytes, bytearray, memoryview)):
        return np.frombuffer(weights, np.uint8)
    data = weights if isinstance(weights, np.ndarray) else getattr(weights, "data", None)
    if not isinstance(data, np.ndarray):
        raise InputTypeError(f"the weights of an OpenVINO IR are bytes, a numpy array or an ov.Tensor of "
                             f"the .bin's bytes (or its path), not {type(weights).__name__}")
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def _read(read: Any, what: str, weights_hint: str) -> Any:
    """``read()``; what OpenVINO refuses as a ModelError, with ``weights_hint`` where the weights are why."""
    try:
        return read()
    except RuntimeError as error:
        reason = _reason(error)
        hint = weights_hint if "weights" in reason.lower() or "bin file" in reason.lower() else ""
        raise ModelError(f"{what} cannot be read: OpenVINO says: {reason}{hint}") from error


def _reason(error: BaseException) -> str:
    """OpenVINO's message without its source locations (``Exception from ...``, ``Check ... failed at``)."""
    lines = [line.strip() for line in str(error).splitlines()]
    kept = [line for line in lines if line and not line.startswith(("Exception from", "Check '"))]
    return "; ".join(kept) or str(error).strip() or type(error).__name__


def openvino_module(purpose: str = "reading an OpenVINO IR (.xml/.bin)") -> Any:
    """The ``openvino`` package; ModelError naming ``purpose`` where it does not import."""
    from inferplex._openvino_package import openvino_package

    try:
        return openvino_package()
    except ImportError as error:
        raise ModelError(f"{purpose} needs the openvino package (pip install openvino), which does not "
                         f"import here ({error}); install it, {_EXPORT_HINT}") from error
