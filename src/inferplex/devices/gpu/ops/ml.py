"""Lowerings of the ``ai.onnx.ml`` ops that are plain tensor arithmetic: Binarizer and
ArrayFeatureExtractor.  TreeEnsemble is in :mod:`.trees`; the ml ops over strings and maps
stay on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    NUMERIC_DTYPES,
    attrs_reason,
    dtype_reason,
    first_reason,
)
from inferplex.devices.gpu.registry import NodeInfo, register

_ML = "ai.onnx.ml"


@register("Binarizer", domain=_ML,
          supports=lambda info: first_reason(attrs_reason(info, ("threshold",)),
                                             dtype_reason(info, (0,), NUMERIC_DTYPES)))
def _binarizer(info: NodeInfo) -> Callable[..., Any]:
    threshold = float(info.attr("threshold", 0.0))
    return lambda x: (x > threshold).to(x.dtype)


@register("ArrayFeatureExtractor", domain=_ML,
          supports=lambda info: first_reason(attrs_reason(info, ()), dtype_reason(info, (0,), EXACT_DTYPES),
                                             dtype_reason(info, (1,), frozenset({ir.DataType.INT64}))))
def _array_feature_extractor(info: NodeInfo) -> Callable[..., Any]:
    def extract(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        # The selected entries of the last axis; a 1-D input gives one row, as ONNX Runtime does.
        picked = x.index_select(-1, indices.reshape(-1))
        return picked.reshape(1, -1) if x.dim() == 1 else picked

    return extract
