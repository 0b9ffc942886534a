"""``get_dtype``: the numpy dtype of an element type, as ``openvino.utils.types`` has it.

OpenVINO's samples fill request tensors with
``rs.uniform(...).astype(get_dtype(tensor.element_type))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferplex.errors import InputError

__all__ = ["get_dtype"]


def get_dtype(element_type: Any) -> np.dtype[Any]:
    """The numpy dtype of ``element_type`` (an ``ov.Type`` or a port's element type).

    >>> get_dtype(compiled.input(0).element_type)                 # doctest: +SKIP
    dtype('float32')
    """
    to_dtype = getattr(element_type, "to_dtype", None)
    if not callable(to_dtype):
        raise InputError(f"get_dtype takes an element type (ov.Type), got {type(element_type).__name__}")
    return np.dtype(to_dtype())
