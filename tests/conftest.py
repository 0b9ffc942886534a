"""Shared fixtures: where the onnx wheel keeps its backend test data, a tiny-model
builder, and ONNX Runtime as the reference engine.

Keep this file small: fixtures used by one test file live in that file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.backend.test.loader
import onnxruntime as ort
import pytest
from cpu_precision import native_default, pin_float32
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

ONNX_BACKEND_DATA = Path(onnx.backend.test.loader.DATA_DIR)
"""``onnx/backend/test/data`` of the installed onnx wheel (simple, pytorch-*, light, real)."""

Shape = Sequence[int | str | None] | None
IOSpec = tuple[str, int, Shape]


pin_float32()


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[IOSpec], outputs: Sequence[IOSpec],
               initializers: Sequence[onnx.TensorProto] = (), opset: int = 17,
               ir_version: int | None = None, name: str = "tiny") -> onnx.ModelProto:
    """A checked ONNX model from nodes and ``(name, onnx elem type, shape)`` inputs/outputs.

    ``make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", FLOAT, ["N", 4])],
    [("y", FLOAT, ["N", 4])])``
    """
    graph = helper.make_graph(
        list(nodes), name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version if ir_version is not None else min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model


def mlp_model(batch: int | str = "N", seed: int = 7) -> onnx.ModelProto:
    """y = softmax(relu(x @ w1 + b) @ w2), x of [batch, 32]: a small float32 model every CPU engine reads."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in (("w1", (32, 64)), ("b", (64,)), ("w2", (64, 16)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="up"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["a"], name="act"),
             helper.make_node("MatMul", ["a", "w2"], ["z"], name="down"),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])
    graph = helper.make_graph(nodes, "mlp", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def transformer_layer_onnx(path: Path, batch_name: str = "batch") -> Path:
    """A torch TransformerEncoderLayer (32 wide, 4 heads, eval mode) exported to ONNX at ``path``:
    input ``src`` and output ``out`` of shape (batch, 5, 32), the batch dynamic."""
    import warnings

    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

        def forward(self, src: Any) -> Any:
            return self.layer(src)

    torch.manual_seed(0)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notes
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder().eval(), (torch.randn(2, 5, 32),), str(path), input_names=["src"],
                          output_names=["out"], dynamic_axes={"src": {0: batch_name}, "out": {0: batch_name}},
                          opset_version=17, dynamo=False)
    return path


def ort_run(model: onnx.ModelProto | str | Path, feeds: Mapping[str, Any]) -> list[Any]:
    """The reference: plain ONNX Runtime (CPU) on the whole model, outputs in model order."""
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, {k: np.asarray(v) for k, v in feeds.items()})


@pytest.fixture(scope="session")
def onnx_backend_data() -> Path:
    return ONNX_BACKEND_DATA


@pytest.fixture(scope="session")
def tiny_model() -> Callable[..., onnx.ModelProto]:
    """The :func:`make_model` builder."""
    return make_model


@pytest.fixture(scope="session")
def ort_reference() -> Callable[[onnx.ModelProto | str | Path, Mapping[str, Any]], list[Any]]:
    """:func:`ort_run`: reference outputs from raw ONNX Runtime."""
    return ort_run


@pytest.fixture
def native_cpu_precision() -> Iterator[None]:
    """The CPU's own default precision for one test (the suite pins f32, see ``cpu_precision``)."""
    with native_default():
        yield


@pytest.fixture(scope="module")
def core() -> ov.Core:
    """A Core with the devices this machine has."""
    return ov.Core()


@pytest.fixture(scope="module")
def emulated_core() -> Iterator[ov.Core]:
    """A Core that also has two emulated GPUs (GPU.0, GPU.1 on torch's CPU), for this module only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core()


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.fixture(params=[pytest.param("emulated", id="emulated"),
                        pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
                            not _has_cuda(), reason="needs a CUDA GPU")])])
def emulated_or_cuda_core(request: Any, emulated_core: ov.Core) -> ov.Core:
    """Each test twice: on the emulated GPU.0, and (``gpu`` marker) on a CUDA GPU.0."""
    return emulated_core if request.param == "emulated" else ov.Core()


def same_on_the_gpu(core: ov.Core, model: ov.Model, feeds: Sequence[Any], atol: float = 1e-5) -> None:
    """``model`` runs whole on ``core``'s GPU.0 (no op left to the CPU), every output equal to the CPU
    device's within ``atol``."""
    want = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(list(feeds)).to_tuple()
    compiled = core.compile_model(model, "GPU.0")
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0"]
    got = compiled(list(feeds)).to_tuple()
    assert len(got) == len(want)
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(have), np.asarray(expected), rtol=atol, atol=atol)

def queued_results(compiled: Any, feeds: Sequence[Mapping[str, Any]], jobs: int = 32) -> dict[int, Any]:
    """``jobs`` requests through an AsyncInferQueue of the compiled model's optimal size (every
    worker serves), feeds taken in turn: each job's first output, every job ended exactly once."""
    queue = ov.AsyncInferQueue(compiled, 0)
    seen: dict[int, Any] = {}
    ended: list[int] = []

    def done(request: Any, job: int) -> None:
        ended.append(job)
        seen[job] = request.results[0].copy()

    queue.set_callback(done)
    for job in range(jobs):
        queue.start_async(feeds[job % len(feeds)], job)
    queue.wait_all()
    assert sorted(ended) == list(range(jobs))  # each job once
    return seen
