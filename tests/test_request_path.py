"""The request path's shortcuts keep the results right: arrays run again in place, inputs keyed in
one pass, results read from the run, requests counted for exit.  Results are checked against
ONNX Runtime on the whole model (or numpy for a Relu)."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.engine import lifecycle
from inferplex.errors import InputError, RequestBusyError

ENGINES = ["OPENVINO", "ONNXRUNTIME"]


def _two_inputs(dims: list[int | str]) -> object:
    """y = relu(a) + b: two inputs, so a run may hold one input's array and get the other anew."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, dims),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _reference(model: object, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(),  # type: ignore[attr-defined]
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _compile(model: object, engine: str) -> ov.CompiledModel:
    return ov.Core().compile_model(model, "CPU", {"ENGINE": engine, "PERFORMANCE_HINT": "THROUGHPUT",
                                                  "NUM_STREAMS": 2})


@pytest.mark.parametrize("engine", ENGINES)
def test_an_array_changed_in_place_between_runs_is_read_anew(engine: str) -> None:
    model = _two_inputs([2, 8])
    compiled = _compile(model, engine)
    request = compiled.create_infer_request()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 8), dtype=np.float32), rng.standard_normal((2, 8), dtype=np.float32)
    for step in range(4):
        a[...] = rng.standard_normal((2, 8), dtype=np.float32)  # the same arrays, new contents
        if step % 2:
            b = rng.standard_normal((2, 8), dtype=np.float32)  # a new array for one input only
        for share in (True, False):
            got = request.infer({"a": a, "b": b}, share_inputs=share)[0]
            np.testing.assert_allclose(got, _reference(model, {"a": a, "b": b}), rtol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_array_reshaped_or_retyped_in_place_runs_as_it_now_is(engine: str) -> None:
    model = _two_inputs(["N", 4])
    compiled = _compile(model, engine)
    request = compiled.create_infer_request()
    a = np.arange(-8, 8, dtype=np.float32).reshape(4, 4)
    b = np.ones((4, 4), np.float32)
    np.testing.assert_allclose(request.infer({"a": a, "b": b}, share_inputs=True)[0],
                               _reference(model, {"a": a, "b": b}))
    a.shape = (2, 8)  # the same object and memory, another shape: refused, as for any array
    with pytest.raises(InputError):
        request.infer({"a": a, "b": b}, share_inputs=True)
    a.shape = (8, 2)
    with pytest.raises(InputError):
        request.infer({"a": a, "b": b}, share_inputs=True)
    a.shape = (4, 4)
    a[...] = -a
    wide = np.ones((2, 4), np.float32)
    a2 = a[:2]  # a view: another object over part of the same memory
    np.testing.assert_allclose(request.infer({"a": a2, "b": wide}, share_inputs=True)[0],
                               _reference(model, {"a": a2, "b": wide}))
    np.testing.assert_allclose(request.infer({"a": a, "b": b}, share_inputs=True)[0],
                               _reference(model, {"a": a, "b": b}))
    a.dtype = np.int32  # type: ignore[misc,assignment]  # the same memory read as another type: converted as that type, not misread
    np.testing.assert_allclose(request.infer({"a": a, "b": b}, share_inputs=True)[0],
                               _reference(model, {"a": a.astype(np.float32), "b": b}))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_non_contiguous_array_and_alternating_arrays_give_their_own_results(engine: str) -> None:
    model = _two_inputs([2, 8])
    compiled = _compile(model, engine)
    queue = ov.AsyncInferQueue(compiled, 3)
    rng = np.random.default_rng(2)
    feeds = [{"a": rng.standard_normal((8, 2), dtype=np.float32).T, "b": np.zeros((2, 8), np.float32)},
             {"a": rng.standard_normal((2, 8), dtype=np.float32), "b": np.ones((2, 8), np.float32)},
             {"a": rng.standard_normal((2, 8), dtype=np.float32), "b": np.full((2, 8), 2, np.float32)}]
    got: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, index: got.__setitem__(index, request.results[0].copy()))
    for index in range(30):
        queue.start_async(feeds[index % 3], index, share_inputs=index % 2 == 0)
    queue.wait_all()
    for index in range(30):
        np.testing.assert_allclose(got[index], _reference(model, feeds[index % 3]), rtol=1e-6)


def test_inputs_by_index_port_and_name_and_unknown_names_take_the_long_way() -> None:
    model = _two_inputs([2, 8])
    compiled = _compile(model, "OPENVINO")
    request = compiled.create_infer_request()
    a, b = np.ones((2, 8), np.float32), np.full((2, 8), 3, np.float32)
    expected = _reference(model, {"a": a, "b": b})
    for inputs in ({0: a, 1: b}, {compiled.inputs[0]: a, "b": b}, {"a": a, 1: b}, [a, b]):
        np.testing.assert_allclose(request.infer(inputs)[0], expected)
    with pytest.raises(InputError, match="unknown input 'c'"):
        request.infer({"a": a, "c": b})


def test_live_requests_count_each_started_request_until_its_callback_returns() -> None:
    compiled = _compile(_two_inputs([2, 8]), "OPENVINO")
    request = compiled.create_infer_request()
    release, inside = threading.Event(), threading.Event()

    def callback(_: object) -> None:
        inside.set()
        release.wait(10)

    request.set_callback(callback)
    before = lifecycle.live_requests()
    request.start_async({"a": np.ones((2, 8), np.float32), "b": np.ones((2, 8), np.float32)})
    assert inside.wait(10)
    assert lifecycle.live_requests() == before + 1
    with pytest.raises(RequestBusyError):
        request.start_async({"a": np.ones((2, 8), np.float32), "b": np.ones((2, 8), np.float32)})
    release.set()
    request.wait()
    assert lifecycle.live_requests() == before
