"""HETERO and PIPELINE_PARALLEL with devices served from worker processes (WORKER_PROCESSES).

Two GPUs in one chain must not serialise on the calling process's GIL, so a
chain's devices can run in worker processes as MULTI's do.  On emulated GPUs
(which do not report GIL_BOUND) ``YES`` asks for it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.devices import remote

from conftest import make_model, ort_run

pytestmark = pytest.mark.skipif(not remote.supported(), reason="worker processes need POSIX")

FLOAT = TensorProto.FLOAT


def _children() -> set[int]:
    """Process ids whose parent is this process."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.add(int(entry.name))
    return found


def _chain() -> object:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{i}")
               for i in range(4)]
    nodes = []
    value = "x"
    for i in range(4):
        nodes.append(helper.make_node("MatMul", [value, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}"))
        value = f"t{i}"
    nodes.append(helper.make_node("Identity", [value], ["y"], name="out"))
    return make_model(nodes, [("x", FLOAT, ["N", 16])], [("y", FLOAT, ["N", 16])], weights)


@pytest.mark.parametrize("config", [
    {"WORKER_PROCESSES": "YES"},
    {"WORKER_PROCESSES": "YES", "MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"},
], ids=["affinity", "pipeline"])
def test_a_chain_over_two_gpus_runs_from_worker_processes(monkeypatch: pytest.MonkeyPatch,
                                                          config: dict[str, str]) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "2")
    core = ov.Core()
    model = core.read_model(_chain())
    if "MODEL_DISTRIBUTION_POLICY" not in config:
        for op in model.get_ops():
            name = op.get_friendly_name()
            op.get_rt_info()["affinity"] = "GPU.0" if name[-1] in "01" else "GPU.1"
    before = _children()
    compiled = core.compile_model(model, "HETERO:GPU.0,GPU.1", config)
    started = _children() - before
    assert len(started) == 2  # one worker process per GPU of the chain
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    expected = ort_run(_chain(), {"x": x})[0]
    np.testing.assert_allclose(compiled({"x": x})["y"], expected, rtol=1e-5, atol=1e-5)
    queue = ov.AsyncInferQueue(compiled, 4)
    outputs: list[np.ndarray] = []
    queue.set_callback(lambda request, _: outputs.append(request.results["y"].copy()))
    for _ in range(8):
        queue.start_async({"x": x})
    queue.wait_all()
    assert len(outputs) == 8
    for output in outputs:
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)
    compiled.release()
    assert not (_children() & started)  # released: the worker processes have ended


def test_no_worker_process_by_default_for_emulated_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "2")
    core = ov.Core()
    before = _children()
    compiled = core.compile_model(_chain(), "HETERO:GPU.0,GPU.1",
                                  {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"})
    assert _children() == before
    compiled.release()
