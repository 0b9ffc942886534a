"""``quantize_dynamic`` models under the GPU's compiled tier, through the public API.

The lowered forward of a dynamically quantized CNN (DynamicQuantizeLinear +
ConvInteger chains, run as float convolutions) and MLP (MatMulInteger on the int8
matmul kernel) compiles as one graph: no graph-break warning is logged, the
compiled tier serves, and its results equal ONNX Runtime running each op as
written, as the eager tier's do (see :mod:`quantized_models`).  A model that does
break (Ifs on computed conditions) names the break in a warning and is still
compiled, the one function the breaks fall in (the If's lowering) run outside
torch.compile rather than compiled per If and per shape.  Under
``TORCH_COMPILE=AUTO`` on CUDA the compiled tier replaces the eager one only where
it measures faster: one made slower on purpose leaves the eager tier serving
(``KEPT_EAGER``).  AUTO leaves emulated GPUs eager, so the emulated check of that
switch makes its program with the plan AUTO gives on CUDA, through the GPU
device's own modules (``GpuProgram``; no private attribute).

The emulated tests run on ``GPU.0`` on torch's CPU (inductor compiles C++: a few
seconds per model); the ``gpu`` ones need CUDA.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from quantized_models import ort_unfused, quantized
from torch_export import export_onnx

import inferplex as ov

from conftest import make_model, ort_run, queued_results

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime.quantization")
nn = torch.nn

_SWITCH_DEADLINE = 240.0
"""Seconds a test waits for the compiled tier (a cold inductor compile on a loaded CPU)."""

_BREAK_WARNING = "does not compile as one graph"


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _cnn(batch: int, side: int = 8) -> onnx.ModelProto:
    """Two padded 3x3 Convs with Relu, a strided 1x1 Conv, a residual Add, global pool, a Linear
    head: ConvInteger chains of three shapes (static input shape, so the compile is tiered)."""
    torch.manual_seed(21)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.body = nn.Conv2d(16, 16, 3, padding=1)
            self.down = nn.Conv2d(16, 32, 1, stride=2)
            self.head = nn.Linear(32, 8)

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.stem(x))
            y = torch.relu(self.body(y) + y)
            return self.head(torch.relu(self.down(y)).mean((2, 3)))

    return export_onnx(Net(), (torch.randn(batch, 3, side, side),), ["x"], opset=13)


def _mlp(rows: int) -> onnx.ModelProto:
    torch.manual_seed(22)
    net = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 32))
    return export_onnx(net, (torch.randn(rows, 64),), ["x"], opset=13)


def _feeds(shape: tuple[int, ...], seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def _wait_for_switch(compiled: ov.CompiledModel, deadline: float = _SWITCH_DEADLINE) -> str:
    """The COMPILED_TIER once it is no longer COMPILING (or when the deadline passes)."""
    end = time.monotonic() + deadline
    while (tier := compiled.get_property("COMPILED_TIER")) == "COMPILING" and time.monotonic() < end:
        time.sleep(0.1)
    return str(tier)


def _break_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if _BREAK_WARNING in r.getMessage()]


def _check_compiled_equals_onnx_runtime(core: ov.Core, model: onnx.ModelProto, shape: tuple[int, ...],
                                        config: dict[str, Any], caplog: pytest.LogCaptureFixture,
                                        tolerance: float = 1e-5, tier: str = "COMPILED") -> None:
    """Eager tier, then compiled tier (``tier`` expected), each equal to ONNX Runtime; no graph break."""
    compiled = core.compile_model(model, "GPU.0", config)
    first = _feeds(shape, 0)
    want = ort_unfused(model, first)[0]
    bound = tolerance * np.abs(want).max()
    np.testing.assert_allclose(np.asarray(compiled(first)[0]), want, rtol=0, atol=bound)  # eager tier
    assert _wait_for_switch(compiled) == tier
    for seed in range(1, 4):
        feeds = _feeds(shape, seed)
        want = ort_unfused(model, feeds)[0]
        np.testing.assert_allclose(np.asarray(compiled(feeds)[0]), want, rtol=0,
                                   atol=tolerance * np.abs(want).max())
    assert not _break_warnings(caplog)
    compiled.release()


def test_dynamic_quantized_cnn_compiles_as_one_graph_and_equals_onnx_runtime(
        core: ov.Core, tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = quantized(tmp_path, _cnn(2), False, reduce_range=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("ConvInteger") == 3 and "DynamicQuantizeLinear" in ops
    # integer sums, then the Cast, Mul and Add's float32 arithmetic, as the eager tier's
    _check_compiled_equals_onnx_runtime(core, model, (2, 3, 8, 8),
                                        {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT"}, caplog)


def test_dynamic_quantized_mlp_compiles_as_one_graph_and_equals_onnx_runtime(
        core: ov.Core, tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = quantized(tmp_path, _mlp(24), False, reduce_range=True)
    assert [n.op_type for n in model.graph.node].count("MatMulInteger") == 3
    _check_compiled_equals_onnx_runtime(core, model, (24, 64), {"TORCH_COMPILE": "YES"}, caplog)


@pytest.mark.parametrize("values", ["mixed", "positive", "negative", "narrow", "wide"])
def test_dynamic_quantize_linear_equals_onnx_runtime_bit_for_bit(core: ov.Core, values: str) -> None:
    """Scale, zero point and data of DynamicQuantizeLinear, one side of zero or both, a range
    that rounds the zero point at the top, one far wider than the data's spacing."""
    rng = np.random.default_rng(23)
    data = {"mixed": rng.standard_normal((6, 7)), "positive": rng.uniform(0.5, 3.0, (6, 7)),
            "negative": -rng.uniform(0.5, 3.0, (6, 7)), "narrow": rng.uniform(-1e-3, 1e-6, (6, 7)),
            "wide": rng.standard_normal((6, 7)) * 1e4}[values].astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql")
    model = make_model([node], [("x", TensorProto.FLOAT, [6, 7])],
                       [("y", TensorProto.UINT8, [6, 7]), ("s", TensorProto.FLOAT, []),
                        ("z", TensorProto.UINT8, [])], opset=11)
    got = [np.asarray(value) for value in core.compile_model(model, "GPU.0")({"x": data}).values()]
    for mine, want in zip(got, ort_run(model, {"x": data}), strict=True):
        assert mine.dtype == want.dtype
        np.testing.assert_array_equal(mine, want)


def _data_dependent_ifs(count: int = 3) -> onnx.ModelProto:
    """``count`` times: Relu or Neg of the running value, chosen by the sign of its sum (a branch
    torch.compile cannot trace), then a Pad by one column that changes the next If's shape."""
    nodes, inits = [], [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                        helper.make_tensor("pads", TensorProto.INT64, [4], [0, 0, 0, 1])]
    value = "x"
    for i in range(count):
        side = 4 + i
        then = helper.make_graph([helper.make_node("Relu", [value], [f"t{i}"])], f"then{i}", [],
                                 [helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, [4, side])])
        other = helper.make_graph([helper.make_node("Neg", [value], [f"e{i}"])], f"else{i}", [],
                                  [helper.make_tensor_value_info(f"e{i}", TensorProto.FLOAT, [4, side])])
        nodes += [helper.make_node("ReduceSum", [value], [f"s{i}"], keepdims=0, name=f"sum{i}"),
                  helper.make_node("Greater", [f"s{i}", "zero"], [f"c{i}"], name=f"positive{i}"),
                  helper.make_node("If", [f"c{i}"], [f"b{i}"], then_branch=then, else_branch=other,
                                   name=f"branch{i}"),
                  helper.make_node("Pad", [f"b{i}", "pads"], [f"p{i}"], name=f"pad{i}")]
        value = f"p{i}"
    nodes.append(helper.make_node("Identity", [value], ["y"], name="out"))
    ports = [("x", TensorProto.FLOAT, [4, 4])], [("y", TensorProto.FLOAT, [4, 4 + count])]
    return make_model(nodes, *ports, inits, opset=13)


def test_a_graph_break_is_named_and_its_function_runs_outside_the_compile(
        core: ov.Core, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="inferplex")
    model = _data_dependent_ifs()
    compiled = core.compile_model(model, "GPU.0", {"TORCH_COMPILE": "YES"})
    feeds = [_feeds((4, 4), seed) for seed in range(6)]
    np.testing.assert_allclose(compiled(feeds[0])[0], ort_run(model, feeds[0])[0], rtol=1e-6)
    assert _wait_for_switch(compiled) == "COMPILED"
    for f in feeds:
        np.testing.assert_allclose(compiled(f)[0], ort_run(model, f)[0], rtol=1e-6)
    (warning,) = _break_warnings(caplog)
    assert "GPU.0" in warning and "control_flow.py" in warning  # where dynamo met the break
    # the If's lowering (one function for the three Ifs) runs outside torch.compile: dynamo does
    # not compile it per If and per shape
    outside = [r.getMessage() for r in caplog.records if "for their graph breaks" in r.getMessage()]
    assert len(outside) == 1 and "run_if" in outside[0]
    compiled.release()


def test_measured_switch_keeps_the_eager_tier_where_the_compiled_one_is_slower(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # TORCH_COMPILE=AUTO (the measured switch) leaves emulated GPUs eager, so the program is made
    # here with the plan AUTO gives on CUDA; torch.compile is stood in for by a slower forward.
    import onnx_ir as ir

    from inferplex.devices.gpu.lower import lower_model
    from inferplex.devices.gpu.program import GpuProgram
    from inferplex.devices.gpu.tiers import CompilePlan

    def slow_compile(module: Any, **options: Any) -> Any:
        def slowed(*args: Any) -> Any:
            time.sleep(0.005)
            return module(*args)

        return slowed

    monkeypatch.setattr(torch, "compile", slow_compile)
    model = quantized(tmp_path, _cnn(2), False, reduce_range=True)
    lowered = lower_model(ir.serde.deserialize_model(model), "cpu", "f32")
    plan = CompilePlan("tiered", "default", measured=True)
    program = GpuProgram(lowered, "GPU.0", torch.device("cpu"), 2, {}, {}, plan=plan)
    try:
        program.start_compiled_tier()
        end = time.monotonic() + _SWITCH_DEADLINE
        while program.compiled_tier == "COMPILING" and time.monotonic() < end:
            time.sleep(0.05)
        assert program.compiled_tier == "KEPT_EAGER"
        for seed in range(3):
            feeds = _feeds((2, 3, 8, 8), seed)
            want = ort_unfused(model, feeds)[0]
            got = np.asarray(program.run(feeds)[lowered.output_names[0]])
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    finally:
        program.close()


# --- on CUDA -------------------------------------------------------------------------

_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@_cuda
@pytest.mark.parametrize(("precision", "tolerance"), [("f32", 1e-5), ("f16", 2e-2)])
def test_cuda_dynamic_quantized_cnn_compiles_as_one_graph_and_equals_onnx_runtime(
        tmp_path: Any, caplog: pytest.LogCaptureFixture, precision: str, tolerance: float) -> None:
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = quantized(tmp_path, _cnn(8, 16), False, reduce_range=True)
    config = {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": precision}
    _check_compiled_equals_onnx_runtime(ov.Core(), model, (8, 3, 16, 16), config, caplog, tolerance)


@pytest.mark.gpu
@_cuda
def test_cuda_dynamic_quantized_mlp_compiles_as_one_graph_and_equals_onnx_runtime(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = quantized(tmp_path, _mlp(32), False, reduce_range=True)
    config = {"TORCH_COMPILE": "YES", "PERFORMANCE_HINT": "THROUGHPUT"}
    _check_compiled_equals_onnx_runtime(ov.Core(), model, (32, 64), config, caplog)


@pytest.mark.gpu
@_cuda
@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_cuda_auto_throughput_keeps_the_faster_tier_for_a_dynamic_cnn(
        tmp_path: Any, caplog: pytest.LogCaptureFixture, precision: str) -> None:
    caplog.set_level(logging.WARNING, logger="inferplex")
    model = quantized(tmp_path, _cnn(8, 16), False, reduce_range=True)
    compiled = ov.Core().compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT",
                                                         "INFERENCE_PRECISION_HINT": precision})
    assert compiled.get_property("TORCH_COMPILE") is True  # AUTO: batch 8 under THROUGHPUT
    assert _wait_for_switch(compiled) in ("COMPILED", "KEPT_EAGER")  # whichever measured faster
    _check_async_results(compiled, model, (8, 3, 16, 16), 1e-5 if precision == "f32" else 2e-2)
    assert not _break_warnings(caplog)


def _check_async_results(compiled: ov.CompiledModel, model: onnx.ModelProto, shape: tuple[int, ...],
                         tolerance: float) -> None:
    """32 requests through an AsyncInferQueue (every worker serves) equal ONNX Runtime."""
    feeds = [_feeds(shape, seed) for seed in range(4)]
    wants = [ort_unfused(model, f)[0] for f in feeds]
    for job, result in queued_results(compiled, feeds).items():
        want = wants[job % 4]
        np.testing.assert_allclose(result, want, rtol=0, atol=tolerance * np.abs(want).max())


@pytest.mark.gpu
@_cuda
def test_cuda_compiled_tier_slower_than_the_eager_one_is_not_taken(tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real_compile = torch.compile

    def slow_compile(module: Any, **options: Any) -> Any:
        forward = real_compile(module, **options)
        ballast = torch.randn(1024, 1024, device="cuda")

        def slowed(*args: Any) -> Any:
            for _ in range(50):  # device work the CUDA graph captures and every replay repeats
                torch.mm(ballast, ballast)
            return forward(*args)

        return slowed

    monkeypatch.setattr(torch, "compile", slow_compile)
    model = quantized(tmp_path, _cnn(8, 16), False, reduce_range=True)
    compiled = ov.Core().compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert _wait_for_switch(compiled) == "KEPT_EAGER"
    _check_async_results(compiled, model, (8, 3, 16, 16), 1e-5)
