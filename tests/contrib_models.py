"""Models of ONNX Runtime's quantized contrib ops (domain ``com.microsoft``) and the checks the
GPU device's tests of them share: single-op models built by hand, run on ``GPU.0`` (which must
take every node, with no HETERO split) and compared with ONNX Runtime running each op as written
(:func:`quantized_models.ort_unfused`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from quantized_models import ort_unfused

import inferplex as ov

__all__ = ["F32", "I8", "MS", "NUMPY", "U8", "Spec", "assert_within_step", "check",
           "ms_model", "param", "qparams", "random_ints", "run_on_gpu"]

MS = "com.microsoft"
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
U8, I8 = int(TensorProto.UINT8), int(TensorProto.INT8)
NUMPY: dict[int, Any] = {U8: np.uint8, I8: np.int8, int(TensorProto.UINT16): np.uint16,
                         int(TensorProto.INT16): np.int16}
"""ONNX element type -> numpy type of the integer types these tests quantize to."""
Spec = tuple[str, int, Sequence[Any] | None]
"""A model input or output: (name, ONNX element type, shape or None)."""


def ms_model(nodes: list[onnx.NodeProto], inputs: Sequence[Spec], outputs: Sequence[Spec],
             initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """A model of contrib ops, importing ONNX opset 17 and com.microsoft 1, saved as IR 10."""
    graph = helper.make_graph(nodes, "contrib",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


def param(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    """A constant of ``value`` as ``dtype``."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def qparams(name: str, scale: float, zero: int, elem: int) -> list[onnx.TensorProto]:
    """A per-tensor scale and zero point named ``<name>_s`` and ``<name>_z``."""
    return [param(f"{name}_s", scale), param(f"{name}_z", zero, NUMPY[elem])]


def random_ints(shape: tuple[int, ...], elem: int, seed: int = 0) -> np.ndarray:
    """Integers of the whole range of ``elem``'s type."""
    info = np.iinfo(NUMPY[elem])
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=shape).astype(NUMPY[elem])


def run_on_gpu(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    """The outputs on GPU.0, after checking that the device takes every node (no HETERO split)."""
    names = {node.name for node in model.graph.node}
    assert set(core.query_model(model, "GPU")) == names
    compiled = core.compile_model(model, "GPU.0", F32)
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0"]
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(model.graph.output))]


def assert_within_step(actual: np.ndarray, expected: np.ndarray, steps: int = 1) -> None:
    """Same type and shape; integers equal but for a few values one step apart, floats close."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind in "iu":
        gap = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
        assert gap.max(initial=0) <= steps
        assert (gap == 0).mean() >= 0.97, f"{(gap != 0).sum()} of {gap.size} values differ"
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def check(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any], steps: int = 1) -> None:
    """Every output on GPU.0 against ONNX Runtime's (see :func:`assert_within_step`)."""
    for actual, expected in zip(run_on_gpu(core, model, feeds), ort_unfused(model, feeds), strict=True):
        assert_within_step(actual, expected, steps)
