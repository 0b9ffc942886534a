"""Building models in code (``inferplex.opset``, ``op``, ``ov.Model(results, parameters)``).

The reference is numpy, op by op, and OpenVINO's model_creation sample (LeNet)
rebuilt with inferplex's import and random weights.
"""

from __future__ import annotations

import typing
from functools import reduce

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import inferplex as ov
from inferplex import op, opset, opset1, opset8
from inferplex.errors import InputError, ModelError

RNG = np.random.default_rng(7)


class _Type:
    """Stands in for an element-type object: OpenVINO's ``Type.f32`` is read through ``to_dtype()``."""

    def __init__(self, dtype: str) -> None:
        self._dtype = np.dtype(dtype)

    def to_dtype(self) -> np.dtype[typing.Any]:
        return self._dtype


class _Shape(list):  # type: ignore[type-arg]
    """Stands in for a shape object: iterable into dims, printing ``[1,3,?,?]``."""

    def to_string(self) -> str:
        return "[" + ",".join(str(d) for d in self) + "]"


Type = getattr(ov, "Type", None) or type("Type", (), {"f32": _Type("float32"), "i64": _Type("int64")})
Shape = getattr(ov, "Shape", None) or _Shape


def _run(model: ov.Model, *inputs: np.ndarray) -> list[np.ndarray]:
    results = ov.Core().compile_model(model, "CPU")(list(inputs))
    return list(results.to_tuple())


# --- OpenVINO's model_creation sample ----------------------------------------------------------


def _lenet_weights() -> np.ndarray:
    sizes = [20 * 25, 20, 50 * 20 * 25, 50, 4, 500 * 800, 500, 10 * 500, 10]
    weights = (RNG.standard_normal(sum(sizes)) * 0.05).astype(np.float32)
    offset = sum(sizes[:4])  # the two int64 of the Reshape target: [0, -1] keeps the batch
    weights[offset:offset + 4] = np.array([0, -1], np.int64).view(np.float32)
    return weights


def create_model(weights: np.ndarray) -> ov.Model:
    """The sample's create_model, with the import changed and the weights passed in."""

    def shape_and_length(shape: list) -> typing.Tuple[list, int]:  # noqa: UP006 - as in the sample
        length = reduce(lambda x, y: x * y, shape)
        return shape, length

    weights_offset = 0
    padding_begin = padding_end = [0, 0]
    input_shape = [64, 1, 28, 28]
    param_node = op.Parameter(Type.f32, Shape(input_shape))
    conv_1_kernel_shape, conv_1_kernel_length = shape_and_length([20, 1, 5, 5])
    conv_1_kernel = op.Constant(Type.f32, Shape(conv_1_kernel_shape), weights[0:conv_1_kernel_length].tolist())
    weights_offset += conv_1_kernel_length
    conv_1_node = opset8.convolution(param_node, conv_1_kernel, [1, 1], padding_begin, padding_end, [1, 1])
    add_1_kernel_shape, add_1_kernel_length = shape_and_length([1, 20, 1, 1])
    add_1_kernel = op.Constant(Type.f32, Shape(add_1_kernel_shape),
                               weights[weights_offset: weights_offset + add_1_kernel_length])
    weights_offset += add_1_kernel_length
    add_1_node = opset8.add(conv_1_node, add_1_kernel)
    maxpool_1_node = opset1.max_pool(add_1_node, [2, 2], padding_begin, padding_end, [2, 2], "ceil")
    conv_2_kernel_shape, conv_2_kernel_length = shape_and_length([50, 20, 5, 5])
    conv_2_kernel = op.Constant(Type.f32, Shape(conv_2_kernel_shape),
                                weights[weights_offset: weights_offset + conv_2_kernel_length])
    weights_offset += conv_2_kernel_length
    conv_2_node = opset8.convolution(maxpool_1_node, conv_2_kernel, [1, 1], padding_begin, padding_end, [1, 1])
    add_2_kernel_shape, add_2_kernel_length = shape_and_length([1, 50, 1, 1])
    add_2_kernel = op.Constant(Type.f32, Shape(add_2_kernel_shape),
                               weights[weights_offset: weights_offset + add_2_kernel_length])
    weights_offset += add_2_kernel_length
    add_2_node = opset8.add(conv_2_node, add_2_kernel)
    maxpool_2_node = opset1.max_pool(add_2_node, [2, 2], padding_begin, padding_end, [2, 2], "ceil")
    reshape_1_dims, reshape_1_length = shape_and_length([2])
    dtype_weights = np.frombuffer(weights[weights_offset: weights_offset + 2 * reshape_1_length], dtype=np.int64)
    reshape_1_kernel = op.Constant(Type.i64, Shape(list(dtype_weights.shape)), dtype_weights)
    weights_offset += 2 * reshape_1_length
    reshape_1_node = opset8.reshape(maxpool_2_node, reshape_1_kernel, True)
    matmul_1_kernel_shape, matmul_1_kernel_length = shape_and_length([500, 800])
    matmul_1_kernel = op.Constant(Type.f32, Shape(matmul_1_kernel_shape),
                                  weights[weights_offset: weights_offset + matmul_1_kernel_length])
    weights_offset += matmul_1_kernel_length
    matmul_1_node = opset8.matmul(reshape_1_node, matmul_1_kernel, False, True)
    add_3_kernel_shape, add_3_kernel_length = shape_and_length([1, 500])
    add_3_kernel = op.Constant(Type.f32, Shape(add_3_kernel_shape),
                               weights[weights_offset: weights_offset + add_3_kernel_length])
    weights_offset += add_3_kernel_length
    add_3_node = opset8.add(matmul_1_node, add_3_kernel)
    relu_node = opset8.relu(add_3_node)
    reshape_2_kernel = op.Constant(Type.i64, Shape(list(dtype_weights.shape)), dtype_weights)
    reshape_2_node = opset8.reshape(relu_node, reshape_2_kernel, True)
    matmul_2_kernel_shape, matmul_2_kernel_length = shape_and_length([10, 500])
    matmul_2_kernel = op.Constant(Type.f32, Shape(matmul_2_kernel_shape),
                                  weights[weights_offset: weights_offset + matmul_2_kernel_length])
    weights_offset += matmul_2_kernel_length
    matmul_2_node = opset8.matmul(reshape_2_node, matmul_2_kernel, False, True)
    add_4_kernel_shape, add_4_kernel_length = shape_and_length([1, 10])
    add_4_kernel = op.Constant(Type.f32, Shape(add_4_kernel_shape),
                               weights[weights_offset: weights_offset + add_4_kernel_length])
    weights_offset += add_4_kernel_length
    add_4_node = opset8.add(matmul_2_node, add_4_kernel)
    softmax_axis = 1
    softmax_node = opset8.softmax(add_4_node, softmax_axis)
    return ov.Model(softmax_node, [param_node], "lenet")


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w) + b.reshape(1, -1, 1, 1)


def _pool2(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def _lenet_numpy(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    parts = np.split(weights.astype(np.float64), np.cumsum([500, 20, 25000, 50, 4, 400000, 500, 5000]))
    w1, b1, w2, b2, _, m1, b3, m2, b4 = parts
    h = _pool2(_conv(x.astype(np.float64), w1.reshape(20, 1, 5, 5), b1))
    h = _pool2(_conv(h, w2.reshape(50, 20, 5, 5), b2)).reshape(len(x), -1)
    h = np.maximum(h @ m1.reshape(500, 800).T + b3, 0)
    logits = h @ m2.reshape(10, 500).T + b4
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_model_creation_sample_builds_and_matches_numpy() -> None:
    weights = _lenet_weights()
    model = create_model(weights)
    assert model.get_friendly_name() == "lenet"
    assert model.input().get_shape() == (64, 1, 28, 28)
    assert model.output().get_shape() == (64, 10)
    x = RNG.random((64, 1, 28, 28), dtype=np.float32)
    compiled = ov.Core().compile_model(model, "CPU")
    (probs,) = compiled({0: x}).to_tuple()
    np.testing.assert_allclose(probs, _lenet_numpy(x, weights), rtol=1e-3, atol=1e-5)


def test_model_creation_sample_after_set_batch() -> None:
    """The sample's next steps: a layout on the input, set_batch to the number of images, infer."""
    weights = _lenet_weights()
    model = create_model(weights)
    model.get_parameters()[0].set_layout("NCHW")
    ov.set_batch(model, 3)
    n, c, h, w = model.input().shape
    assert (n, c, h, w) == (3, 1, 28, 28) and model.output().get_shape() == (3, 10)
    x = RNG.random((n, c, h, w), dtype=np.float32)
    (probs,) = ov.Core().compile_model(model, "CPU")({0: x}).to_tuple()
    np.testing.assert_allclose(probs, _lenet_numpy(x, weights), rtol=1e-3, atol=1e-5)
