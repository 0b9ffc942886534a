"""Model.reshape refuses, when it is called, shapes that ONNX shape inference lets through but the
model cannot run: a convolution's input channels its weight does not take, a window larger than
its input, a normalization's scale of another size.  OpenVINO refuses these at reshape too.

Each refusal is an InputError naming the input, the shape given and what the model takes, and the
model is left as it was (it still runs, checked against ONNX Runtime); valid reshapes of the same
models still work and match ONNX Runtime.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(11)


def _weights(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CONV_W = _weights(2, 3, 3, 3)
GROUP_W = _weights(4, 2, 3, 3)
DECONV_W = _weights(3, 2, 3, 3)
SCALE = _weights(3)


def _conv() -> onnx.ModelProto:
    return make_model(
        [helper.make_node("Conv", ["img", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["c"], ["feat"], name="relu")],
        [("img", FLOAT, [1, 3, 8, 8])], [("feat", FLOAT, [1, 2, 8, 8])],
        [numpy_helper.from_array(CONV_W, "w")])


def _grouped() -> onnx.ModelProto:
    return make_model([helper.make_node("Conv", ["x", "w"], ["y"], group=2, name="grouped")],
                      [("x", FLOAT, [1, 4, 6, 6])], [("y", FLOAT, [1, 4, 4, 4])],
                      [numpy_helper.from_array(GROUP_W, "w")])


def _deconv() -> onnx.ModelProto:
    return make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up")],
                      [("x", FLOAT, [1, 3, 4, 4])], [("y", FLOAT, [1, 2, 6, 6])],
                      [numpy_helper.from_array(DECONV_W, "w")])


def _pool() -> onnx.ModelProto:
    return make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], name="pool")],
                      [("x", FLOAT, [1, 3, 6, 6])], [("y", FLOAT, [1, 3, 4, 4])])


def _instance_norm() -> onnx.ModelProto:
    return make_model(
        [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="norm")],
        [("x", FLOAT, [1, 3, 4, 4])], [("y", FLOAT, [1, 3, 4, 4])],
        [numpy_helper.from_array(SCALE, "s"), numpy_helper.from_array(SCALE * 0.5, "b")])


def _layer_norm() -> onnx.ModelProto:
    return make_model(
        [helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1, name="norm")],
        [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])], [numpy_helper.from_array(SCALE, "s")])


REFUSED = [
    (_conv, [1, 4, 16, 16], r"Conv 'conv' takes 3 input channels \(its weight is \[2,3,3,3\]\), not the 4"),
    (_grouped, [1, 6, 6, 6], r"takes 4 input channels \(its weight is \[4,2,3,3\], group 2\)"),
    (_deconv, [1, 4, 4, 4], r"ConvTranspose 'up' takes 3 input channels"),
    (_conv, [1, 3, 0, 8], r"window of 3 on spatial axis 0, larger than its input"),
    (_pool, [1, 3, 2, 6], r"MaxPool 'pool' has a window of 3 on spatial axis 0.*\(2 after padding\)"),
    (_instance_norm, [1, 5, 4, 4], r"has a scale of 3 channels, but its input \[1,5,4,4\] has 5"),
    (_layer_norm, [2, 4], r"scale \[3\] that does not fit the normalized dims \[4\]"),
]


@pytest.mark.parametrize(("build", "shape", "problem"), REFUSED,
                         ids=["conv", "grouped", "deconv", "conv-window", "pool", "instance", "layer"])
def test_a_shape_the_weights_refuse_fails_at_reshape_and_leaves_the_model(
        core: ov.Core, build: object, shape: list[int], problem: str) -> None:
    proto = build()  # type: ignore[operator]
    model = core.read_model(proto)
    before = [(p.get_any_name(), str(p.get_partial_shape())) for p in (*model.inputs, *model.outputs)]
    name = model.input().get_any_name()
    declared = str(model.input().get_partial_shape())
    asked = "[" + ",".join(map(str, shape)) + "]"
    with pytest.raises(InputError, match=rf"input '{name}' {re.escape(asked)} \(the model declares "
                                         rf"{re.escape(declared)}\): .*{problem}"):
        model.reshape(shape)
    assert [(p.get_any_name(), str(p.get_partial_shape())) for p in (*model.inputs, *model.outputs)] \
        == before
    x = RNG.standard_normal(model.input().get_shape()).astype(np.float32)
    got = core.compile_model(model, "CPU")(x)[0]
    np.testing.assert_allclose(got, ort_run(proto, {name: x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("build", "shape"), [
    (_conv, [2, 3, 16, 12]), (_grouped, [3, 4, 5, 9]), (_deconv, [2, 3, 7, 5]),
    (_pool, [2, 3, 3, 3]), (_instance_norm, [2, 3, 5, 5]), (_layer_norm, [5, 3])],
    ids=["conv", "grouped", "deconv", "pool", "instance", "layer"])
def test_shapes_the_model_takes_still_reshape_and_run(core: ov.Core, build: object,
                                                      shape: list[int]) -> None:
    proto = build()  # type: ignore[operator]
    model = core.read_model(proto)
    name = model.input().get_any_name()
    model.reshape({name: shape})
    assert list(model.input().get_shape()) == shape
    x = RNG.standard_normal(shape).astype(np.float32)
    want = _ort_reshaped(proto, name, shape, x)
    got = core.compile_model(model, "CPU")(x)[0]
    assert list(model.output().get_shape()) == list(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _ort_reshaped(proto: onnx.ModelProto, name: str, shape: list[int], x: np.ndarray) -> np.ndarray:
    """ONNX Runtime on the model with the new input shape and outputs of unknown shape."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for value in copy.graph.input:
        if value.name == name:
            for dim, size in zip(value.type.tensor_type.shape.dim, shape, strict=True):
                dim.Clear()
                dim.dim_value = size
    for value in copy.graph.output:
        value.type.tensor_type.ClearField("shape")
    return ort_run(copy, {name: x})[0]


def test_a_dynamic_channel_dim_is_not_refused(core: ov.Core) -> None:
    model = core.read_model(_conv())
    model.reshape([1, -1, 8, 8])
    assert str(model.input().get_partial_shape()) == "[1,?,8,8]"
