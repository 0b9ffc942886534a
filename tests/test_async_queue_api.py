"""AsyncInferQueue's OpenVINO surface: iteration, indexing, ids, userdata, preset tensors.

OpenVINO's ``test_async_infer_request.py`` and ``test_infer_request.py`` are
the specification; results are compared with raw ONNX Runtime.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov

from conftest import make_model, ort_run

MODEL: onnx.ModelProto = make_model(
    [helper.make_node("Relu", ["x"], ["r"], name="relu"),
     helper.make_node("Mul", ["r", "k"], ["y"], name="scale")],
    [("x", TensorProto.FLOAT, [2, 3]), ("k", TensorProto.FLOAT, [1])], [("y", TensorProto.FLOAT, [2, 3])])


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(MODEL, "CPU")


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 3), dtype=np.float32)


def _expected(x: np.ndarray, k: float) -> np.ndarray:
    return ort_run(MODEL, {"x": x, "k": np.array([k], np.float32)})[0]


def test_iteration_indexing_and_userdata(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 3)
    assert isinstance(queue, Iterable) and len(queue) == 3
    assert all(isinstance(request, ov.InferRequest) for request in queue)
    assert [queue[i] for i in range(3)] == list(queue)
    assert queue.userdata == [None, None, None]
    assert queue.is_ready()
    with pytest.raises(IndexError):
        queue[3]


def test_jobs_run_with_callback_and_userdata(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 2)
    seen: dict[int, np.ndarray] = {}
    lock = threading.Lock()

    def done(request: ov.InferRequest, userdata: Any) -> None:
        with lock:
            seen[userdata] = request.results[0].copy()

    queue.set_callback(done)
    inputs = {job: _x(job) for job in range(8)}
    for job, x in inputs.items():
        queue.start_async({"x": x, "k": np.array([2.0], np.float32)}, job)
    queue.wait_all()
    assert sorted(seen) == list(range(8))
    for job, x in inputs.items():
        np.testing.assert_allclose(seen[job], _expected(x, 2.0), rtol=1e-6)
    assert 7 in queue.userdata and set(queue.userdata) <= set(inputs)  # each request's last job


def test_get_idle_request_id_names_an_idle_request(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 2)
    for request in queue:
        request.set_tensor("x", _x(0))
        request.set_tensor("k", np.array([1.0], np.float32))
    for _ in range(len(queue)):
        queue.start_async()
    queue.wait_all()
    for request in queue:
        assert request.wait_for(0)
    for _ in range(6):
        idle = queue.get_idle_request_id()
        assert queue[idle].wait_for(0)
        queue.start_async()
    queue.wait_all()
    for request in queue:
        np.testing.assert_allclose(request.results[0], _expected(_x(0), 1.0), rtol=1e-6)


def test_inputs_preset_on_each_request(compiled: ov.CompiledModel) -> None:
    """The benchmark samples' way: set each request's tensors once, then start_async() bare."""
    queue = ov.AsyncInferQueue(compiled, 3)
    for index, request in enumerate(queue):
        request.set_tensor("x", _x(index))
        request.set_tensor(compiled.inputs[1], np.array([index + 1.0], np.float32))
    for _ in range(len(queue)):
        queue.start_async()
    queue.wait_all()
    for index, request in enumerate(queue):
        np.testing.assert_allclose(request.get_output_tensor(0), _expected(_x(index), index + 1.0), rtol=1e-6)
    # a job given only "x" reads the "k" its request holds
    idle = queue.get_idle_request_id()
    queue.start_async({"x": _x(9)})
    queue.wait_all()
    np.testing.assert_allclose(queue[idle].results[0], _expected(_x(9), idle + 1.0), rtol=1e-6)


@pytest.mark.parametrize("share_inputs", [False, True])
def test_share_inputs(compiled: ov.CompiledModel, share_inputs: bool) -> None:
    queue = ov.AsyncInferQueue(compiled, 2)
    outputs: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, job: outputs.__setitem__(job, request.results[0].copy()))
    k = np.array([3.0], np.float32)
    for job in range(4):
        x = _x(job + 20)
        queue.start_async([x, k], job, share_inputs=share_inputs)
        if not share_inputs:
            x[:] = 100.0  # copied: the caller may reuse its array at once
    queue.wait_all()
    for job in range(4):
        np.testing.assert_allclose(outputs[job], _expected(_x(job + 20), 3.0), rtol=1e-6)


def test_a_callback_reads_output_tensors(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 2)
    read: list[np.ndarray] = []
    queue.set_callback(lambda request, _: read.append(np.array(request.get_output_tensor())))
    queue.start_async({0: _x(30), 1: np.array([0.5], np.float32)})
    queue.wait_all()
    np.testing.assert_allclose(read[0], _expected(_x(30), 0.5), rtol=1e-6)
