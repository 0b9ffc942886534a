"""Resizing a request's tensors in place, as OpenVINO's requests allow for a model of dynamic shape.

A tensor the request owns (its input tensor, handed out by ``get_input_tensor``, or its output
tensor) reallocates when given a larger shape; a tensor over a caller's own array
(``Tensor(array, shared_memory=True)``, or an input given with ``share_inputs=True``) cannot grow
past that array, and says so with an InputError (a RuntimeError, as OpenVINO's error is).  The
reference is numpy's ``maximum(x, 0)``: the model is one Relu over a dynamic batch.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InputError

from conftest import make_model

FLOAT = TensorProto.FLOAT


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [("x", FLOAT, ["batch", 3, 4, 4])], [("y", FLOAT, ["batch", 3, 4, 4])])
    return core.compile_model(core.read_model(model), "CPU")


def _images(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, 4, 4)).astype(np.float32)


@pytest.mark.parametrize("resize", ["shape", "set_shape"])
def test_an_input_tensor_of_dynamic_shape_is_resized_in_place_and_run(
        compiled: ov.CompiledModel, resize: str) -> None:
    request = compiled.create_infer_request()
    tensor = request.get_input_tensor()
    assert list(tensor.shape) == [0, 3, 4, 4]  # OpenVINO's empty tensor of a dynamic shape
    if resize == "shape":
        tensor.shape = [3, 3, 4, 4]
    else:
        tensor.set_shape([3, 3, 4, 4])
    x = _images(3)
    tensor.data[:] = x
    request.infer()
    np.testing.assert_array_equal(request.get_output_tensor().data, np.maximum(x, 0))
    assert list(request.get_input_tensor().shape) == [3, 3, 4, 4]


def test_the_input_tensor_grows_after_a_run_on_a_given_array(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    request.infer(_images(1, seed=1))
    tensor = request.get_input_tensor()
    assert list(tensor.shape) == [1, 3, 4, 4]
    tensor.shape = [4, 3, 4, 4]
    x = _images(4, seed=2)
    tensor.data[:] = x
    request.infer()
    np.testing.assert_array_equal(request.get_output_tensor().data, np.maximum(x, 0))
    tensor.shape = [2, 3, 4, 4]  # shrinking keeps the memory
    tensor.data[:] = x[:2]
    request.infer()
    np.testing.assert_array_equal(request.get_output_tensor().data, np.maximum(x[:2], 0))


def test_an_output_tensor_taken_before_a_run_shows_each_run_shape(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    output = request.get_output_tensor()
    assert list(output.shape) == [0, 3, 4, 4]
    for batch in (2, 5, 1):
        x = _images(batch, seed=batch)
        request.infer(x)
        assert list(output.shape) == [batch, 3, 4, 4]
        np.testing.assert_array_equal(output.data, np.maximum(x, 0))


def test_results_of_an_earlier_run_stay_as_they_were(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    first = request.infer(_images(1, seed=3))[0]
    kept = first.copy()
    request.get_output_tensor()
    request.infer(_images(3, seed=4))
    np.testing.assert_array_equal(first, kept)


def test_an_untouched_empty_input_tensor_still_counts_as_missing(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    request.get_input_tensor()
    with pytest.raises(InputError, match="missing input 'x'"):
        request.infer()


def test_a_tensor_over_a_callers_array_cannot_grow_past_it() -> None:
    array = np.zeros((2, 3), np.float32)
    tensor = ov.Tensor(array, shared_memory=True)
    with pytest.raises(RuntimeError, match=r"cannot set shape \[4, 3\].*caller's memory of 6"):
        tensor.shape = [4, 3]
    with pytest.raises(InputError, match=r"ov\.Tensor\(type, shape\)"):
        tensor.set_shape([4, 3])
    tensor.shape = [1, 3]  # fits: the caller's memory, viewed
    tensor.data[:] = 5
    np.testing.assert_array_equal(array, [[5, 5, 5], [0, 0, 0]])


def test_a_tensor_that_owns_its_memory_grows() -> None:
    tensor = ov.Tensor(np.ones((2, 3), np.float32))  # a copy: the tensor's own
    tensor.shape = [4, 3]
    assert tensor.data.shape == (4, 3)
    allocated = ov.Tensor(ov.Type.f32, [1, 2])
    allocated.set_shape([3, 5])
    assert allocated.data.shape == (3, 5)


@pytest.mark.parametrize("how", ["share_inputs", "set_tensor"])
def test_an_input_over_a_callers_array_cannot_grow(compiled: ov.CompiledModel, how: str) -> None:
    request = compiled.create_infer_request()
    x = _images(1, seed=5)
    if how == "share_inputs":
        request.infer(x, share_inputs=True)
    else:
        request.set_input_tensor(ov.Tensor(x, shared_memory=True))
    with pytest.raises(InputError, match="caller's memory"):
        request.get_input_tensor().shape = [3, 3, 4, 4]
