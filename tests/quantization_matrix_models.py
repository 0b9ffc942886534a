"""Small float models for the quantization matrix, built with ``onnx.helper``.

Each builder returns a float32 model (IR 10, which every supported ONNX Runtime
reads) whose one input is ``x`` and one output ``y``, plus a function that draws
inputs for it, so that ``onnxruntime.quantization`` can calibrate it and the tests
can feed it.  The models are small (a few thousand weights) so that one case of the
matrix quantizes, compiles and runs in well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Feed = Callable[[np.random.Generator], dict[str, np.ndarray]]
Rows = Callable[[np.random.Generator, int], dict[str, np.ndarray]]


@dataclass(frozen=True)
class FloatModel:
    """A float model and how to draw its inputs."""

    model: onnx.ModelProto
    """The float32 model: input ``x``, output ``y``."""
    feed: Feed
    """Draws one batch of inputs from a generator (for calibration: ONNX Runtime's percentile and
    entropy calibrators need batches of one size)."""
    rows: Rows | None = None
    """Draws a batch of a given number of rows, for models whose batch axis is symbolic."""


def _weights(rng: np.random.Generator, **shapes: tuple[int, ...]) -> list[onnx.TensorProto]:
    """Initializers named by ``shapes``, scaled like a trained layer's (fan-in of the last axes)."""
    tensors = []
    for name, shape in shapes.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        values = rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))
        tensors.append(numpy_helper.from_array(values.astype(np.float32), name))
    return tensors


def _model(nodes: list[onnx.NodeProto], x: tuple[int, list[int | str]], y: list[int | str],
           inits: list[onnx.TensorProto], opset: int) -> onnx.ModelProto:
    for i, node in enumerate(nodes):
        node.name = node.name or f"{node.op_type}_{i}"
    graph = helper.make_graph(nodes, "float", [helper.make_tensor_value_info("x", x[0], x[1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model)
    return model


def _normal(shape: tuple[int, ...]) -> Feed:
    return lambda rng: {"x": rng.standard_normal(shape).astype(np.float32)}


def cnn(opset: int = 13) -> FloatModel:
    """Conv-BatchNorm-Relu-MaxPool, a 1x1 Conv branch Concat-ed back, nearest Resize,
    GlobalAveragePool and a Gemm head: x [2, 3, 12, 12] -> y [2, 10]."""
    rng = np.random.default_rng(1)
    inits = _weights(rng, w1=(8, 3, 3, 3), b1=(8,), w2=(8, 8, 1, 1), b2=(8,), w3=(8, 16, 3, 3), b3=(8,),
                     wg=(10, 8), bg=(10,))
    inits += [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("gamma", 1 + 0.1 * rng.standard_normal(8)), ("beta", 0.1 * rng.standard_normal(8)),
        ("mean", 0.1 * rng.standard_normal(8)), ("var", 1 + 0.2 * rng.random(8)),
        ("scales", np.array([1, 1, 2, 2])))]
    inits.append(numpy_helper.from_array(np.array([], np.float32), "roi"))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Concat", ["p1", "r2"], ["cat"], axis=1),
             helper.make_node("Resize", ["cat", "roi", "scales"], ["up"], mode="nearest"),
             helper.make_node("Conv", ["up", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1)]
    return FloatModel(_model(nodes, (TensorProto.FLOAT, [2, 3, 12, 12]), [2, 10], inits, opset),
                      _normal((2, 3, 12, 12)))


def separable(opset: int = 13) -> FloatModel:
    """A depthwise-separable block: a Conv with asymmetric pads and Clip (ReLU6), a dilated
    depthwise Conv (group = channels) with Relu, a pointwise Conv added back (a residual Add),
    then a Conv1d over the flattened positions and LeakyRelu: x [2, 3, 12, 13] -> y [2, 8, 156]."""
    rng = np.random.default_rng(8)
    inits = _weights(rng, w0=(16, 3, 3, 3), b0=(16,), wd=(16, 1, 3, 3), bd=(16,), wp=(16, 16, 1, 1), bp=(16,),
                     w1=(8, 16, 3), b1=(8,))
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", 0.0), ("hi", 6.0))]
    inits.append(numpy_helper.from_array(np.array([2, 16, 156], np.int64), "positions"))
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 0, 1, 2]),
             helper.make_node("Clip", ["c0", "lo", "hi"], ["r0"]),
             helper.make_node("Conv", ["r0", "wd", "bd"], ["cd"], group=16, pads=[2, 2, 2, 2],
                              dilations=[2, 2]),
             helper.make_node("Relu", ["cd"], ["rd"]),
             helper.make_node("Conv", ["rd", "wp", "bp"], ["cp"]),
             helper.make_node("Add", ["cp", "r0"], ["res"]),
             helper.make_node("Reshape", ["res", "positions"], ["seq"]),
             helper.make_node("Conv", ["seq", "w1", "b1"], ["c1"], pads=[1, 1]),
             helper.make_node("LeakyRelu", ["c1"], ["y"], alpha=0.1)]
    return FloatModel(_model(nodes, (TensorProto.FLOAT, [2, 3, 12, 13]), [2, 8, 156], inits, opset),
                      _normal((2, 3, 12, 13)))


def mlp(opset: int = 13) -> FloatModel:
    """Gemm-Sigmoid, MatMul+Add-Tanh, MatMul+Add: x [N, 24] -> y [N, 8]."""
    rng = np.random.default_rng(2)
    inits = _weights(rng, w1=(16, 24), b1=(16,), w2=(16, 32), b2=(32,), w3=(32, 8), b3=(8,))
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["g1"], transB=1),
             helper.make_node("Sigmoid", ["g1"], ["s1"]),
             helper.make_node("MatMul", ["s1", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["a2"]),
             helper.make_node("Tanh", ["a2"], ["t2"]),
             helper.make_node("MatMul", ["t2", "w3"], ["m3"]),
             helper.make_node("Add", ["m3", "b3"], ["y"])]
    return FloatModel(_model(nodes, (TensorProto.FLOAT, ["N", 24]), ["N", 8], inits, opset),
                      _normal((6, 24)), lambda rng, rows: _normal((rows, 24))(rng))


def _attention(rng: np.random.Generator, inits: list[onnx.TensorProto]) -> list[onnx.NodeProto]:
    """Self-attention of ``ln1`` (two heads of 8), its projection added to ``x``: ``res1``."""
    inits += _weights(rng, wqkv=(16, 48), bqkv=(48,), wo=(16, 16))
    inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (
        ("split", [16, 16, 16]), ("heads", [1, 6, 2, 8]), ("merged", [1, 6, 16]))]
    inits.append(numpy_helper.from_array(np.array(8 ** -0.5, np.float32), "temperature"))
    return [helper.make_node("MatMul", ["ln1", "wqkv"], ["qkv0"]),
            helper.make_node("Add", ["qkv0", "bqkv"], ["qkv"]),
            helper.make_node("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=-1),
            *[helper.make_node("Reshape", [f"{t}0", "heads"], [f"{t}1"]) for t in "qkv"],
            helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
            helper.make_node("Transpose", ["k1"], ["k"], perm=[0, 2, 3, 1]),
            helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
            helper.make_node("MatMul", ["q", "k"], ["qk"]),
            helper.make_node("Mul", ["qk", "temperature"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
            helper.make_node("MatMul", ["probs", "v"], ["ctx0"]),
            helper.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", ["ctx1", "merged"], ["ctx"]),
            helper.make_node("MatMul", ["ctx", "wo"], ["proj"]),
            helper.make_node("Add", ["x", "proj"], ["res1"])]


def transformer(opset: int = 17) -> FloatModel:
    """A pre-norm encoder block: LayerNormalization, two-head self-attention (MatMul, Split,
    Reshape, Transpose, Softmax), a residual Add, and an MLP with Gelu in its Erf form:
    x [1, 6, 16] -> y [1, 6, 16]."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("ln_scale", 1 + 0.1 * rng.standard_normal(16)), ("ln_bias", 0.1 * rng.standard_normal(16)),
        ("sqrt2", np.array(np.sqrt(2.0))), ("one", np.array(1.0)), ("half", np.array(0.5)))]
    inits += _weights(rng, w1=(16, 32), b1=(32,), w2=(32, 16))
    nodes = [helper.make_node("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["ln1"], axis=-1),
             *_attention(rng, inits),
             helper.make_node("LayerNormalization", ["res1", "ln_scale", "ln_bias"], ["ln2"], axis=-1),
             helper.make_node("MatMul", ["ln2", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
             helper.make_node("Erf", ["hs"], ["erf"]),
             helper.make_node("Add", ["erf", "one"], ["erf1"]),
             helper.make_node("Mul", ["h", "erf1"], ["gh"]),
             helper.make_node("Mul", ["gh", "half"], ["gelu"]),
             helper.make_node("MatMul", ["gelu", "w2"], ["down"]),
             helper.make_node("Add", ["res1", "down"], ["y"])]
    return FloatModel(_model(nodes, (TensorProto.FLOAT, [1, 6, 16]), [1, 6, 16], inits, opset),
                      _normal((1, 6, 16)))


def decoder(opset: int = 13) -> FloatModel:
    """Two strided ConvTranspose layers with Relu and a Sigmoid head: x [1, 8, 4, 4] -> y [1, 2, 16, 16]."""
    rng = np.random.default_rng(4)
    inits = _weights(rng, w1=(8, 4, 3, 3), b1=(4,), w2=(4, 2, 4, 4), b2=(2,))
    nodes = [helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["d1"], strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1]),
             helper.make_node("Relu", ["d1"], ["r1"]),
             helper.make_node("ConvTranspose", ["r1", "w2", "b2"], ["d2"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["d2"], ["y"])]
    return FloatModel(_model(nodes, (TensorProto.FLOAT, [1, 8, 4, 4]), [1, 2, 16, 16], inits, opset),
                      _normal((1, 8, 4, 4)))


def embedding(opset: int = 13) -> FloatModel:
    """A Gather from a [40, 16] table, a MatMul+Add and a Relu: ids x [2, 5] -> y [2, 5, 12]."""
    rng = np.random.default_rng(5)
    inits = _weights(rng, table=(40, 16), w=(16, 12), b=(12,))
    nodes = [helper.make_node("Gather", ["table", "x"], ["e"]),
             helper.make_node("MatMul", ["e", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    return FloatModel(_model(nodes, (TensorProto.INT64, [2, 5]), [2, 5, 12], inits, opset),
                      lambda rng: {"x": rng.integers(0, 40, (2, 5), dtype=np.int64)})


MODELS: dict[str, Callable[..., FloatModel]] = {
    "cnn": cnn, "separable": separable, "mlp": mlp, "transformer": transformer, "decoder": decoder,
    "embedding": embedding}
"""The builders by name; each takes the opset to write (16-bit and 4-bit types need 21)."""
