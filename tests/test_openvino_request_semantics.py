"""InferRequest and AsyncInferQueue details as OpenVINO's Python API has them.

What a callback's exception does (InferRequest: ``wait``/``wait_for`` raise an
error chained to it until the next run; AsyncInferQueue: the next
``start_async``, ``get_idle_request_id``, ``is_ready`` or ``wait_all`` raises
it as it is, once), which userdata a callback gets, results indexed from the
end, results and ``wait_for`` of a request that never ran.  Numbers are
compared with raw ONNX Runtime.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex import errors, opset
from inferplex.errors import InferenceError

from conftest import make_model, ort_run

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def _model(batch: int | str = 2) -> onnx.ModelProto:
    """x [batch,3] -> r = Relu(x), n = Neg(x) (float), c = Cast(Relu(x)) to int64."""
    return make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["x"], ["n"], name="neg"),
         helper.make_node("Cast", ["r"], ["c"], name="cast", to=INT64)],
        [("x", FLOAT, [batch, 3])],
        [("r", FLOAT, [batch, 3]), ("n", FLOAT, [batch, 3]), ("c", INT64, [batch, 3])])


STATIC, DYNAMIC = _model(), _model("N")


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(STATIC, "CPU")


def _x(seed: int, batch: int = 2) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((batch, 3)) * 4).astype(np.float32)


def _assert_matches(results: Any, x: np.ndarray, model: onnx.ModelProto = STATIC) -> None:
    for got, want in zip(results.to_tuple(), ort_run(model, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _fail(userdata: Any) -> None:
    raise ZeroDivisionError(f"callback failed on {userdata!r}")


# --- an InferRequest whose callback raises -------------------------------------------------------


@pytest.mark.timeout(30)
def test_wait_raises_what_the_callback_raised_until_the_next_run(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    calls: list[Any] = []

    def failing(userdata: Any) -> None:
        calls.append(userdata)
        _fail(userdata)

    request.set_callback(failing, "ud")
    x = _x(1)
    request.start_async(x)
    for _ in range(2):  # as OpenVINO: every wait raises it, until the request runs again
        with pytest.raises(InferenceError, match="ZeroDivisionError: callback failed on 'ud'") as caught:
            request.wait()
        assert isinstance(caught.value, RuntimeError)
        assert isinstance(caught.value.__cause__, ZeroDivisionError)
    with pytest.raises(InferenceError, match="ZeroDivisionError") as caught:
        request.wait_for(10_000)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    with pytest.raises(InferenceError, match="ZeroDivisionError"):
        request.wait_for(0)  # it has ended: even a zero timeout raises it
    assert calls == ["ud"]  # the callback ran once, and the request ended
    _assert_matches(request.results, x)  # the run itself succeeded

    seen: list[Any] = []
    request.set_callback(seen.append, "fine")
    request.start_async(_x(2))  # not busy: the failed run released the request; this clears the error
    request.wait()
    assert request.wait_for(0) is True and seen == ["fine"]
    _assert_matches(request.results, _x(2))


@pytest.mark.timeout(30)
def test_infer_clears_a_callback_error(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    request.set_callback(_fail, None)
    request.start_async(_x(3))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        request.wait()
    _assert_matches(request.infer(_x(4)), _x(4))
    request.wait()  # infer() ran the request again: nothing left to raise
    assert request.wait_for(0) is True


@pytest.mark.timeout(60)
def test_failing_callbacks_of_many_requests_each_end_once(compiled: ov.CompiledModel) -> None:
    requests = [compiled.create_infer_request() for _ in range(8)]
    counts = [0] * len(requests)
    lock = threading.Lock()

    def failing(index: int) -> None:
        with lock:
            counts[index] += 1
        raise ValueError(f"request {index}")

    for round_ in range(3):
        for index, request in enumerate(requests):
            request.set_callback(failing, index)
            request.start_async(_x(index + round_))
        for index, request in enumerate(requests):
            with pytest.raises(InferenceError, match=f"ValueError: request {index}"):
                request.wait()
            _assert_matches(request.results, _x(index + round_))
    assert counts == [3] * len(requests)


# --- AsyncInferQueue whose callback raises -------------------------------------------------------


@pytest.mark.timeout(30)
def test_queue_raises_a_callback_exception_once_from_wait_all(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 2)
    calls: list[Any] = []

    def callback(request: ov.InferRequest, userdata: Any) -> None:
        calls.append(userdata)
        raise ValueError(f"bad {userdata}")

    queue.set_callback(callback)
    queue.start_async(_x(0), "a")
    with pytest.raises(ValueError, match="bad a"):  # as it was raised, as OpenVINO's wait_all does
        queue.wait_all()
    queue.wait_all()  # raised once
    assert calls == ["a"] and queue.is_ready()
    for request in queue:  # the queue's callback errors are the queue's, not its requests'
        request.wait()
    _assert_matches(queue[queue.userdata.index("a")].results, _x(0))


@pytest.mark.timeout(30)
def test_queue_raises_a_callback_exception_from_the_next_start_async(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 1)
    calls: list[Any] = []

    def callback(request: ov.InferRequest, userdata: Any) -> None:
        calls.append(userdata)
        if userdata == "a":
            raise ValueError("bad a")

    queue.set_callback(callback)
    queue.start_async(_x(0), "a")
    with pytest.raises(ValueError, match="bad a"):  # waits for the idle job, then raises: "b" never runs
        queue.start_async(_x(1), "b")
    queue.start_async(_x(2), "c")
    queue.wait_all()
    assert calls == ["a", "c"] and queue.userdata == ["c"]
    _assert_matches(queue[0].results, _x(2))


@pytest.mark.timeout(30)
def test_queue_raises_a_callback_exception_from_get_idle_request_id_and_is_ready(
        compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 1)
    queue.set_callback(lambda request, userdata: _fail(userdata))
    queue.start_async(_x(0), 1)
    with pytest.raises(ZeroDivisionError, match="on 1"):
        queue.get_idle_request_id()
    assert queue.get_idle_request_id() == 0

    queue.start_async(_x(0), 2)
    deadline = time.monotonic() + 20
    with pytest.raises(ZeroDivisionError, match="on 2"):
        # the exception is kept before the job is idle again: is_ready is False until it raises
        while time.monotonic() < deadline:
            assert queue.is_ready() is False
            time.sleep(0.005)
    assert queue.is_ready() is True
    queue.wait_all()


# --- userdata --------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_start_async_userdata_replaces_the_callbacks_until_set_again(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    seen: list[Any] = []
    request.set_callback(seen.append, "cb")
    assert request.userdata == "cb"
    for userdata in ("start", None, 0, "kw"):
        request.start_async(_x(0), userdata)
        request.wait()
    request.start_async(_x(0))
    request.wait()
    # None keeps the userdata held; anything else (0 included) replaces it
    assert seen == ["start", "start", 0, "kw", "kw"] and request.userdata == "kw"
    request.set_callback(seen.append, "cb2")
    request.start_async(_x(0))
    request.wait()
    assert seen[-1] == "cb2" == request.userdata


def test_start_async_userdata_without_a_callback_is_dropped_with_a_warning(
        compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    with pytest.warns(RuntimeWarning, match="There is no callback function"):
        request.start_async(_x(5), userdata="u")
    request.wait()
    assert request.userdata is None
    _assert_matches(request.results, _x(5))
    with pytest.raises(AttributeError):
        request.userdata = "u"  # type: ignore[misc]  # read-only, as in OpenVINO


@pytest.mark.timeout(30)
def test_queue_userdata_is_the_queues_not_its_requests(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 1)
    seen: list[Any] = []
    queue.set_callback(lambda request, userdata: seen.append(userdata))
    queue.start_async(_x(0), "a")
    queue.wait_all()
    assert queue.userdata == ["a"] and queue[0].userdata is None
    queue.start_async(_x(0))
    queue.wait_all()
    assert queue.userdata == [None] and seen == ["a", None]


# --- results indexed from the end -------------------------------------------------------------------


def test_results_take_negative_indices_as_a_list_does(compiled: ov.CompiledModel) -> None:
    x = _x(6)
    results = compiled(x)
    reference = ort_run(STATIC, {"x": x})
    for index in (-1, -2, -3):
        np.testing.assert_allclose(results[index], reference[index], rtol=1e-6)
        assert results[index] is results[len(reference) + index]
    assert -3 in results and results.get(-1) is results[2]
    for index in (-4, 3):
        with pytest.raises(KeyError, match="out of range"):
            results[index]
        assert index not in results and results.get(index) is None
    request = compiled.create_infer_request()
    request.infer(x)
    np.testing.assert_allclose(request.results[-1], reference[-1])


@pytest.mark.parametrize("key", [2.0, None, (0,), b"y"])
def test_results_refuse_a_key_of_another_type_as_openvino_does(compiled: ov.CompiledModel,
                                                                key: object) -> None:
    results = compiled(_x(6))
    with pytest.raises(TypeError, match="Unknown key type"):
        results[key]
    with pytest.raises(TypeError, match="Unknown key type"):
        _ = key in results


# --- a request that has not run ---------------------------------------------------------------------


def test_results_before_any_run_are_the_output_tensors(compiled: ov.CompiledModel, core: ov.Core) -> None:
    request = compiled.create_infer_request()
    results = request.results
    assert len(results) == 3
    for value, dtype in zip(results.to_tuple(), (np.float32, np.float32, np.int64), strict=True):
        assert value.shape == (2, 3) and value.dtype == dtype and not value.any()
    assert request.get_output_tensor(2).shape == ov.Shape([2, 3])
    _assert_matches(request.infer(_x(7)), _x(7))  # and a run after that writes real results
    _assert_matches(request.results, _x(7))
    _assert_matches(request.infer(_x(8)), _x(8))

    dynamic = core.compile_model(DYNAMIC, "CPU").create_infer_request()
    for value in dynamic.results.to_tuple():  # a dynamic dimension is 0: empty tensors, as in OpenVINO
        assert value.shape == (0, 3) and value.size == 0
    _assert_matches(dynamic.infer(_x(9, batch=5)), _x(9, batch=5), DYNAMIC)


@pytest.mark.timeout(30)
def test_iterating_a_queue_with_idle_jobs_reads_their_results(compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, 4)
    queue.start_async(_x(10), "ran")
    queue.wait_all()
    for request, userdata in zip(queue, queue.userdata, strict=True):
        if userdata == "ran":
            _assert_matches(request.results, _x(10))
        else:
            assert all(not value.any() and value.shape == (2, 3) for value in request.results.to_tuple())
    assert queue.userdata.count("ran") == 1


def test_wait_for_a_request_never_started_is_false(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    assert request.wait_for(0) is False
    assert request.wait_for(100) is False
    assert request.wait_for(-1) is False  # returns at once: there is no run to wait for
    request.wait()  # returns at once too
    request.infer(_x(11))
    assert request.wait_for(0) is True


def test_every_name_of_a_tensor_keys_inputs_results_and_tensors() -> None:
    """A tensor with several names (``set_names``, an IR's extra names) is found by any of them, as
    OpenVINO finds it: ``compiled.input(name)``, the inputs of ``infer``, ``results[name]`` and
    ``get_tensor(name)``; a name no tensor has still raises."""
    x = opset.parameter([2], np.float32, name="x")
    model = ov.Model([opset.result(opset.relu(x), "y")], [x])
    model.input(0).set_names({"x", "pixels"})
    model.output(0).set_names({"y", "probs"})
    compiled = ov.Core().compile_model(model, "CPU")
    assert compiled.input("pixels").get_names() == {"x", "pixels"}
    assert compiled.output("probs").any_name == "y"
    request = compiled.create_infer_request()
    results = request.infer({"pixels": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(results["probs"], [0.0, 2.0])
    np.testing.assert_array_equal(request.get_tensor("pixels").data, [-1.0, 2.0])
    np.testing.assert_array_equal(request.get_tensor("probs").data, [0.0, 2.0])
    with pytest.raises(errors.InputError, match="unknown input 'nope'"):
        request.infer({"nope": np.zeros(2, np.float32)})
    with pytest.raises(KeyError, match="no output 'nope'"):
        results["nope"]
