"""LayerNorm and RMSNorm written out as reductions and elementwise ops, on the GPU device.

Models exported before opset 17 (and LLaMA-style models at any opset) hold the norms as
their formulas; the GPU device runs each as one call, so the formula's reductions no
longer run (the profiling records show it), with results equal to ONNX Runtime's up to
float32 rounding.  Formulas over another axis, or whose steps are read elsewhere, run as
written.  The emulated GPU runs on torch's CPU.
"""

from __future__ import annotations

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

_F32 = {"INFERENCE_PRECISION_HINT": "f32"}


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _reductions_ran(model: onnx.ModelProto, records: dict[str, str]) -> set[str]:
    means = {n.name for n in model.graph.node if n.op_type == "ReduceMean"}
    return means & {name for name, kind in records.items() if kind != "constant folded"}


class _RMSNorm(nn.Module):
    """Hugging Face LLaMA's RMSNorm, as it is written there."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(width) + 0.5)

    def forward(self, x: Any) -> Any:
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + 1e-6)
        return self.weight * hidden.to(x.dtype)


class _Block(nn.Module):
    def __init__(self, norm: Any) -> None:
        super().__init__()
        self.up, self.norm, self.down = nn.Linear(16, 32), norm, nn.Linear(32, 8)

    def forward(self, x: Any) -> Any:
        return self.down(self.norm(self.up(x)))


def _layer_norm(affine: bool) -> Any:
    norm = nn.LayerNorm(32, eps=1e-5, elementwise_affine=affine)
    if affine:
        nn.init.uniform_(norm.weight, 0.5, 1.5)
        nn.init.uniform_(norm.bias, -0.5, 0.5)
    return norm


@pytest.mark.parametrize(("norm", "opset"), [("layer", 13), ("layer-plain", 13), ("rms", 13), ("rms", 18)])
def test_exported_norm_runs_as_one_call_and_matches_onnx_runtime(core: ov.Core, norm: str,
                                                                  opset: int) -> None:
    torch.manual_seed(7)
    module = _RMSNorm(32) if norm == "rms" else _layer_norm(norm == "layer")
    model = export_onnx(_Block(module), (torch.randn(2, 3, 16),), ["x"], {"x": {0: "B", 1: "S"}}, opset=opset)
    assert any(n.op_type == "ReduceMean" for n in model.graph.node)  # the formula, not the op
    feeds = {"x": (np.random.default_rng(3).standard_normal((2, 5, 16)) * 4 + 2).astype(np.float32)}
    got, records = profiled(core, model, feeds, _F32)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert not _reductions_ran(model, records), "the norm's reductions still run on their own"


def _rms_nodes(square: str, inverse: str) -> list[onnx.NodeProto]:
    """RMSNorm over the last axis written by hand: ``x * x`` or ``Pow(x, 2)``; ``Reciprocal`` or
    ``Div(1, s)``."""
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]) if square == "mul"
             else helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], name="mean"),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"])]
    nodes.append(helper.make_node("Reciprocal", ["s"], ["r"]) if inverse == "reciprocal"
                 else helper.make_node("Div", ["one", "s"], ["r"]))
    return [*nodes, helper.make_node("Mul", ["r", "x"], ["n"]), helper.make_node("Mul", ["n", "w"], ["y"])]


def _rms_model(nodes: list[onnx.NodeProto], outputs: list[str]) -> onnx.ModelProto:
    values = {"two": np.float32(2), "eps": np.float32(1e-5), "one": np.float32(1),
              "w": np.linspace(0.5, 1.5, 12, dtype=np.float32)}
    initializers = [numpy_helper.from_array(np.asarray(v), name) for name, v in values.items()]
    shapes = {"y": ["N", 12], "n": ["N", 12], "var": ["N", 1]}
    return make_model(nodes, [("x", TensorProto.FLOAT, ["N", 12])],
                      [(name, TensorProto.FLOAT, shapes[name]) for name in outputs], initializers,
                      opset=13, ir_version=10)


@pytest.mark.parametrize(("square", "inverse"), [("mul", "reciprocal"), ("pow", "div")])
def test_hand_written_rms_norm_forms_run_as_one_call(core: ov.Core, square: str, inverse: str) -> None:
    model = _rms_model(_rms_nodes(square, inverse), ["y"])
    feeds = {"x": np.random.default_rng(4).standard_normal((6, 12)).astype(np.float32)}
    got, records = profiled(core, model, feeds, _F32)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-6)
    assert "mean" not in {name for name, kind in records.items() if kind != "constant folded"}


def test_norm_read_midway_or_over_another_axis_runs_as_written(core: ov.Core) -> None:
    feeds = {"x": np.random.default_rng(5).standard_normal((6, 12)).astype(np.float32)}
    # the variance is a graph output too: the reduction must run and keep its value
    read_midway = _rms_model(_rms_nodes("pow", "div"), ["y", "var"])
    got = core.compile_model(read_midway, "GPU.0", _F32)(feeds)
    for index, want in enumerate(ort_run(read_midway, feeds)):
        np.testing.assert_allclose(got[index], want, rtol=1e-5, atol=1e-6)
    # a LayerNorm formula over axis 0 is not the fused call's
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], name="mean"),
             helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Pow", ["d", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["var"], axes=[0]),
             helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]), helper.make_node("Div", ["d", "s"], ["y"])]
    other_axis = _rms_model(nodes, ["y"])
    result, records = profiled(core, other_axis, feeds, _F32)
    np.testing.assert_allclose(result, ort_run(other_axis, feeds)[0], rtol=1e-5, atol=1e-6)
    assert "mean" in {name for name, kind in records.items() if kind != "constant folded"}


def test_norms_under_f16_stay_close(core: ov.Core) -> None:
    torch.manual_seed(8)
    for module in (_layer_norm(True), _RMSNorm(32)):
        model = export_onnx(_Block(module), (torch.randn(2, 3, 16),), ["x"], {"x": {0: "B", 1: "S"}},
                            opset=13)
        feeds = {"x": np.random.default_rng(6).standard_normal((2, 5, 16)).astype(np.float32)}
        got = np.asarray(core.compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f16"})(feeds)[0])
        np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_norms_on_cuda_match_onnx_runtime(norm: str) -> None:
    torch.manual_seed(9)
    module = _RMSNorm(32) if norm == "rms" else _layer_norm(True)
    model = export_onnx(_Block(module), (torch.randn(2, 3, 16),), ["x"], {"x": {0: "B", 1: "S"}}, opset=13)
    feeds = {"x": (np.random.default_rng(7).standard_normal((8, 33, 16)) * 4 + 2).astype(np.float32)}
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": "f32"})
    (want,) = ort_run(model, feeds)
    for _ in range(3):  # the first run, then CUDA-graph replays
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=1e-4, atol=1e-4)


class _Residual(nn.Module):
    """A residual Add then LayerNormalization (opset 17's op): post-norm (BERT's: only the norm reads
    the sum) or pre-norm (the sum is also the block's output)."""

    def __init__(self, post: bool) -> None:
        super().__init__()
        self.post, self.inner, self.down = post, nn.Linear(32, 32), nn.Linear(32, 8)
        self.norm = _layer_norm(True)

    def forward(self, x: Any) -> Any:
        total = x + self.inner(x)
        normalized = self.norm(total)
        return self.down(normalized) if self.post else (self.down(normalized), total)


def _residual_model(post: bool) -> onnx.ModelProto:
    torch.manual_seed(10)
    return export_onnx(_Residual(post), (torch.randn(2, 3, 32),), ["x"], {"x": {0: "B", 1: "S"}}, opset=17)


def _residual_add(model: onnx.ModelProto) -> str:
    norm = next(n for n in model.graph.node if n.op_type == "LayerNormalization")
    return next(n.name for n in model.graph.node if norm.input[0] in n.output)


@pytest.mark.parametrize("post", [True, False])
def test_residual_add_joins_the_layer_norm_only_when_the_norm_alone_reads_it(core: ov.Core,
                                                                             post: bool) -> None:
    model = _residual_model(post)
    feeds = {"x": (np.random.default_rng(8).standard_normal((2, 5, 32)) * 3).astype(np.float32)}
    got, records = profiled(core, model, feeds, _F32)
    np.testing.assert_allclose(got, ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert records.get(next(n.name for n in model.graph.node if n.op_type == "LayerNormalization")) \
        == "LayerNormalization"
    assert (_residual_add(model) in records) is not post


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "f16", "bf16"])
def test_residual_layer_norm_on_cuda_matches_onnx_runtime(precision: str) -> None:
    model = _residual_model(True)
    feeds = {"x": (np.random.default_rng(9).standard_normal((8, 33, 32)) * 3).astype(np.float32)}
    compiled = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    (want,) = ort_run(model, feeds)
    tolerance = {"f32": 1e-4, "f16": 2e-2, "bf16": 1e-1}[precision]
    for _ in range(3):  # the first run, then CUDA-graph replays
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=tolerance, atol=tolerance)


def test_layer_norm_whose_mean_is_a_graph_output_keeps_its_own_lowering(core: ov.Core) -> None:
    """A residual Add before a LayerNormalization whose mean is also a graph output: the fused call
    makes no statistics, so the two run as written, with ONNX Runtime's results."""
    inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32), "scale"),
             numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "bias")]
    nodes = [helper.make_node("Add", ["x", "r"], ["sum"], name="residual"),
             helper.make_node("LayerNormalization", ["sum", "scale", "bias"], ["y", "mean"], name="norm")]
    ports = [("x", TensorProto.FLOAT, [3, 8]), ("r", TensorProto.FLOAT, [3, 8])]
    outputs = [("y", TensorProto.FLOAT, [3, 8]), ("mean", TensorProto.FLOAT, [3, 1])]
    model = make_model(nodes, ports, outputs, inits, opset=17)
    rng = np.random.default_rng(11)
    feeds = {name: rng.standard_normal((3, 8)).astype(np.float32) for name in ("x", "r")}
    got = core.compile_model(model, "GPU.0", _F32)(feeds)
    for value, want in zip((got[0], got[1]), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(np.asarray(value), want, rtol=1e-5, atol=1e-5)
