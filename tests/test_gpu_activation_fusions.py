"""GELU written out as elementwise ops, and arithmetic by one-value constants, on the GPU device.

Exporters write GELU as its formula (erf or tanh form); the GPU device runs each such
formula as one call, so its nodes but the last no longer run (the profiling records
show it), with results equal to ONNX Runtime's up to float32 rounding (absolute: where
x << 0, ``1 + erf(x / sqrt 2)`` cancels, and an ulp of erf is all that is left).  Formulas that
differ in a constant, or whose steps are read elsewhere, run as written.  Add, Sub and
Mul by a one-value constant (and Div by a power of two) give ONNX Runtime's numbers bit
for bit, with the shape broadcasting gives.  The emulated GPU runs on torch's CPU.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quantized_models import profiled
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model, ort_run

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _ran(records: dict[str, str]) -> set[str]:
    return {name for name, kind in records.items() if kind != "constant folded"}


class _NewGelu(nn.Module):
    """GPT-2's ``gelu_new``: the tanh form with ``torch.pow(x, 3.0)``."""

    def forward(self, x: Any) -> Any:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _mlp(activation: Any) -> onnx.ModelProto:
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(32, 64), activation, nn.Linear(64, 16))
    return export_onnx(net, (torch.randn(4, 32),), ["x"], {"x": {0: "N"}}, opset=17)


@pytest.mark.parametrize(("activation", "formula_op"), [(nn.GELU(), "Erf"), (_NewGelu(), "Tanh")])
def test_exported_gelu_runs_as_one_call_and_matches_onnx_runtime(core: ov.Core, activation: Any,
                                                                 formula_op: str) -> None:
    model = _mlp(activation)
    assert any(n.op_type == formula_op for n in model.graph.node)
    feeds = {"x": np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32) * 3}
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f32"})
    (want,) = ort_run(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    inner = {n.name for n in model.graph.node if n.op_type == formula_op}
    assert not inner & _ran(records), "the formula's Erf/Tanh still runs on its own"


def _erf_gelu_nodes(variant: str) -> list[onnx.NodeProto]:
    """``y = gelu(x)`` written out: ``"div"`` (x / sqrt 2, then (x * a) * 0.5), ``"mul"``
    (x * (1 / sqrt 2)), ``"half_first"`` ((x * 0.5) * a, constants first)."""
    scale = helper.make_node("Div", ["x", "root_two"], ["s"]) if variant != "mul" \
        else helper.make_node("Mul", ["inv_root_two", "x"], ["s"])
    nodes = [scale, helper.make_node("Erf", ["s"], ["e"], name="erf"),
             helper.make_node("Add", ["one", "e"], ["a"])]
    if variant == "half_first":
        return [*nodes, helper.make_node("Mul", ["half", "x"], ["h"]),
                helper.make_node("Mul", ["h", "a"], ["y"])]
    return [*nodes, helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]


def _constants(root_two: float = math.sqrt(2.0)) -> list[onnx.TensorProto]:
    values = {"root_two": root_two, "inv_root_two": 1.0 / root_two, "one": 1.0, "half": 0.5}
    return [numpy_helper.from_array(np.array(v, dtype=np.float32), name) for name, v in values.items()]


def _model(nodes: list[onnx.NodeProto], outputs: list[str], initializers: list[onnx.TensorProto]
           ) -> onnx.ModelProto:
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 24])],
                      [(name, TensorProto.FLOAT, ["N", 24]) for name in outputs], initializers,
                      opset=13, ir_version=10)


@pytest.mark.parametrize("variant", ["div", "mul", "half_first"])
def test_gelu_formula_forms_run_as_one_call(core: ov.Core, variant: str) -> None:
    model = _model(_erf_gelu_nodes(variant), ["y"], _constants())
    feeds = {"x": np.linspace(-6, 6, 5 * 24, dtype=np.float32).reshape(5, 24)}
    got, records = profiled(core, model, feeds, {"INFERENCE_PRECISION_HINT": "f32"})
    # 1 + erf(x / sqrt 2) cancels for x << 0: an ulp of 1 (6e-8) in erf is the absolute error there
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)
    assert "erf" not in _ran(records)


def test_formula_read_elsewhere_or_with_another_constant_runs_as_written(core: ov.Core) -> None:
    feeds = {"x": np.random.default_rng(2).standard_normal((3, 24)).astype(np.float32)}
    # the Erf's output is a graph output too: the steps must run
    read_elsewhere = _model(_erf_gelu_nodes("div"), ["y", "e"], _constants())
    got = core.compile_model(read_elsewhere, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})(feeds)
    for index, want in enumerate(ort_run(read_elsewhere, feeds)):
        np.testing.assert_allclose(got[index], want, rtol=1e-6, atol=1e-7)
    # x / 1.5 is not GELU's
    other = _model(_erf_gelu_nodes("div"), ["y"], _constants(root_two=1.5))
    result, records = profiled(core, other, feeds, {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_allclose(result, ort_run(other, feeds)[0], rtol=1e-6, atol=1e-7)
    assert "erf" in _ran(records)


def test_gelu_under_f16_stays_close(core: ov.Core) -> None:
    model = _mlp(nn.GELU())
    feeds = {"x": np.random.default_rng(4).standard_normal((8, 32)).astype(np.float32)}
    got = np.asarray(core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"})(feeds)[0])
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("constant_first", [False, True])
@pytest.mark.parametrize("constant_shape", [[], [1], [1, 1, 1]])
def test_arithmetic_by_one_value_constant_matches_onnx_runtime_exactly(core: ov.Core, op_type: str,
                                                                        constant_first: bool,
                                                                        constant_shape: list[int]) -> None:
    """Bit for bit, with the output shape broadcasting gives (a [1, 1, 1] constant makes a rank-2
    input rank 3); Div by 0.25 (a power of two) and by 3 (not)."""
    for value in (0.25, 3.0):
        constant = numpy_helper.from_array(np.full(constant_shape, value, dtype=np.float32), "c")
        inputs = ["c", "x"] if constant_first else ["x", "c"]
        rank = max(2, len(constant_shape))
        model = make_model([helper.make_node(op_type, inputs, ["y"])], [("x", TensorProto.FLOAT, [3, 5])],
                           [("y", TensorProto.FLOAT, [1] * (rank - 2) + [3, 5])], [constant], opset=13,
                           ir_version=10)
        x = np.random.default_rng(5).standard_normal((3, 5)).astype(np.float32) * 7
        x[0, 0], x[0, 1] = 0.0, np.float32(1e-39)  # a zero and a subnormal
        feeds = {"x": x}
        got = np.asarray(core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})(feeds)[0])
        (want,) = ort_run(model, feeds)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("activation", [nn.GELU(), _NewGelu()], ids=["erf", "tanh"])
def test_gelu_on_cuda_matches_onnx_runtime(activation: Any) -> None:
    model = _mlp(activation)
    feeds = {"x": np.random.default_rng(6).standard_normal((64, 32)).astype(np.float32) * 3}
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    (want,) = ort_run(model, feeds)
    for _ in range(3):  # the first run, then CUDA-graph replays
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=1e-4, atol=1e-5)
