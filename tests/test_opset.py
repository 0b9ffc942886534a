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


Type, Shape = ov.Type, ov.Shape


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
    conv_1_kernel = op.Constant(Type.f32, Shape(conv_1_kernel_shape),
                                weights[0:conv_1_kernel_length].tolist())
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
    conv_2_node = opset8.convolution(maxpool_1_node, conv_2_kernel, [1, 1], padding_begin, padding_end,
                                     [1, 1])
    add_2_kernel_shape, add_2_kernel_length = shape_and_length([1, 50, 1, 1])
    add_2_kernel = op.Constant(Type.f32, Shape(add_2_kernel_shape),
                               weights[weights_offset: weights_offset + add_2_kernel_length])
    weights_offset += add_2_kernel_length
    add_2_node = opset8.add(conv_2_node, add_2_kernel)
    maxpool_2_node = opset1.max_pool(add_2_node, [2, 2], padding_begin, padding_end, [2, 2], "ceil")
    _, reshape_1_length = shape_and_length([2])
    dtype_weights = np.frombuffer(weights[weights_offset: weights_offset + 2 * reshape_1_length],
                                  dtype=np.int64)
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


# --- op by op against numpy ----------------------------------------------------------------------


@pytest.mark.parametrize(("build", "reference"), [
    (opset.add, np.add), (opset.subtract, np.subtract), (opset.multiply, np.multiply),
    (opset.divide, np.divide),
])
def test_binary_ops_broadcast_like_numpy(build: typing.Callable[..., typing.Any],
                                         reference: typing.Callable[..., np.ndarray]) -> None:
    a = opset.parameter([2, 3, 4], "f32", name="a")
    b = opset.parameter([3, 1], np.float32, name="b")
    av, bv = RNG.random((2, 3, 4), dtype=np.float32) + 1, RNG.random((3, 1), dtype=np.float32) + 1
    (out,) = _run(ov.Model(build(a, b), [a, b]), av, bv)
    np.testing.assert_allclose(out, reference(av, bv), rtol=1e-6)


def test_python_numbers_take_the_element_type_of_the_other_operand() -> None:
    x = opset.parameter([3], np.float32, name="x")
    node = opset.multiply(opset.add(x, 1), 0.5)
    assert node.get_output_element_type(0) == ov.Type.f32
    xv = np.array([1, 2, 3], np.float32)
    np.testing.assert_allclose(_run(ov.Model(node, [x]), xv)[0], (xv + 1) * 0.5)


def test_activations_softmax_concat_transpose() -> None:
    x = opset.parameter([2, 5], np.float32, name="x")
    outputs = [opset.relu(x), opset.sigmoid(x), opset.softmax(x, -1),
               opset.concat([x, opset.relu(x)], 0), opset.transpose(x, [1, 0])]
    xv = RNG.standard_normal((2, 5)).astype(np.float32)
    got = _run(ov.Model(outputs, [x], "activations"), xv)
    e = np.exp(xv - xv.max(axis=-1, keepdims=True))
    want = [np.maximum(xv, 0), 1 / (1 + np.exp(-xv)), e / e.sum(-1, keepdims=True),
            np.concatenate([xv, np.maximum(xv, 0)]), xv.T]
    for out, ref in zip(got, want, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, False), (True, False), (False, True),
                                                          (True, True)])
def test_matmul_transposes(transpose_a: bool, transpose_b: bool) -> None:
    a_shape, b_shape = [2, 3, 4], [4, 5]
    if transpose_a:
        a_shape = [2, 4, 3]
    if transpose_b:
        b_shape = [5, 4]
    a = opset.parameter(a_shape, np.float32, name="a")
    bv = RNG.standard_normal(b_shape).astype(np.float32)
    node = opset.matmul(a, opset.constant(bv), transpose_a, transpose_b)
    assert node.get_output_partial_shape(0) == (2, 3, 5)
    av = RNG.standard_normal(a_shape).astype(np.float32)
    want = (np.swapaxes(av, -1, -2) if transpose_a else av) @ (bv.T if transpose_b else bv)
    np.testing.assert_allclose(_run(ov.Model(node, [a]), av)[0], want, rtol=1e-5, atol=1e-5)


def test_reshape_special_zero() -> None:
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    copied = opset.reshape(x, [0, -1], True)  # 0 copies dim 0
    assert copied.get_output_partial_shape(0) == (2, 12)
    xv = RNG.random((2, 3, 4), dtype=np.float32)
    np.testing.assert_array_equal(_run(ov.Model(copied, [x]), xv)[0], xv.reshape(2, 12))
    empty = opset.reshape(opset.parameter([0, 3], np.float32), [3, 0], False)  # 0 is a real zero
    assert empty.get_output_partial_shape(0) == (3, 0)


def test_pooling_against_numpy() -> None:
    x = opset.parameter([1, 2, 4, 4], np.float32, name="x")
    xv = RNG.random((1, 2, 4, 4), dtype=np.float32)
    values = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    assert values.get_output_size() == 2 and values.get_output_element_type(1) == ov.Type.i64
    mean = opset.avg_pool(x, [1, 1], [1, 1], [1, 1], [3, 3], exclude_pad=True)
    got_max, got_idx, got_mean = _run(ov.Model([values, mean], [x], "pools"), xv)
    windows = xv.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 2, 4)
    np.testing.assert_array_equal(got_max, windows.max(-1))
    np.testing.assert_array_equal(xv.reshape(-1)[got_idx], got_max)  # indices over the whole tensor
    padded = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    want_mean = np.nanmean(sliding_window_view(padded, (3, 3), axis=(2, 3)), axis=(-1, -2))
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-6)


def test_max_pool_i32_indices_and_opset1_single_output() -> None:
    x = opset.parameter([1, 1, 4, 4], np.float32)
    assert opset.max_pool(x, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2],
                          index_element_type="i32").get_output_element_type(1) == ov.Type.i32
    assert opset1.max_pool(x, [2, 2], [0, 0], [0, 0], [2, 2]).get_output_size() == 1


def test_convolution_padding_and_strides_against_numpy() -> None:
    x = opset.parameter([1, 2, 5, 5], np.float32, name="x")
    wv = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    conv = opset.convolution(x, wv, [2, 2], [1, 1], [1, 1], [1, 1])
    assert conv.get_output_partial_shape(0) == (1, 3, 3, 3)
    xv = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    want = _conv(np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1))), wv, np.zeros(3))[:, :, ::2, ::2]
    np.testing.assert_allclose(_run(ov.Model(conv, [x]), xv)[0], want, rtol=1e-4, atol=1e-5)


# --- types, names, errors ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, "f16", "float16", ov.Type.f16, np.dtype("float16")])
def test_element_types_in_every_form(dtype: typing.Any) -> None:
    x = opset.parameter([2], dtype, name="x")
    assert x.get_element_type() == ov.Type.f16
    c = opset.constant([1, 2], dtype=dtype)
    assert c.get_output_element_type(0) == ov.Type.f16


def test_dynamic_parameter_runs_any_batch_and_named_results() -> None:
    x = opset.parameter("?,4", np.float32, name="x")
    out = opset.result(opset.relu(x), name="y")
    model = ov.Model([out], [x], "dyn")
    assert model.is_dynamic() and model.output().any_name == "y"
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ov.Core().compile_model(model, "CPU")({"x": xv})["y"], np.maximum(xv, 0))


def test_friendly_names_name_the_onnx_ops() -> None:
    x = opset.parameter([2], np.float32, name="x")
    act = opset.relu(x, name="first")
    act.set_friendly_name("act")
    model = ov.Model(opset.sigmoid(act, name="gate"), [x])
    assert [o.get_friendly_name() for o in model.get_ops()] == ["act", "gate"]
    assert [o.get_type_name() for o in model.get_ordered_ops()] == ["Parameter", "Relu", "Sigmoid", "Result"]


def test_nodes_are_reusable_across_models_and_outputs_may_repeat() -> None:
    x = opset.parameter([2], np.float32, name="x")
    y = opset.relu(x)
    first, second = ov.Model([y, y], [x], "twice"), ov.Model(y, [x], "once")
    assert len(first.outputs) == 2 and len(second.outputs) == 1
    xv = np.array([-1, 2], np.float32)
    a, b = _run(first, xv)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_run(second, xv)[0], np.maximum(xv, 0))


def test_shape_mismatch_is_reported_when_the_node_is_made() -> None:
    a = opset.parameter([2, 3], np.float32, name="a")
    with pytest.raises(InputError, match=r"MatMul.*\[2,3\].*\[4,5\]"):
        opset.matmul(a, np.ones((4, 5), np.float32), False, False)
    with pytest.raises(InputError, match="element type"):
        opset.parameter([2], "complex-ish")
    nibbles = opset.parameter([2], ov.Type.u4, name="nibbles")
    with pytest.raises(InputError, match=r"Relu .* cannot take inputs uint4\[2\].*uint4"):
        opset.relu(nibbles)  # ONNX's Relu takes no 4-bit type: said at the call, as an InputError


def test_undeclared_parameter_is_refused() -> None:
    a, b = opset.parameter([2], np.float32, name="a"), opset.parameter([2], np.float32, name="b")
    with pytest.raises(ModelError, match=r"'b'.*parameters"):
        ov.Model(opset.add(a, b), [a])
    with pytest.raises(ModelError, match="Parameter"):
        ov.Model(opset.relu(a), ["a"])
