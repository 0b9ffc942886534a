"""GPU lowerings on the corners where ONNX Runtime's answer is the one to match, through the
public API on the emulated ``GPU.0`` (and, under ``pytest -m gpu``, a CUDA GPU).

Each model must run whole on ``GPU.0`` (``query_model`` claims every node,
``EXECUTION_DEVICES`` says GPU.0) and give ONNX Runtime's outputs: the recurrent
ops' activations whose alpha/beta the model leaves out, window functions with an
integer ``output_datatype``, a Loop of no iteration whose scan output has a
symbolic dimension, Attention's ``qk_matmul_output_mode`` with a softcap, and
normalizations whose input rank shape inference lost.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

from conftest import ort_run

pytest.importorskip("torch")

F, I64 = TensorProto.FLOAT, TensorProto.INT64
Spec = tuple[str, int, Any]
"""(name, ONNX element type, shape) of a graph input or output."""


@pytest.fixture(scope="module", params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def core(request: pytest.FixtureRequest) -> Iterator[ov.Core]:
    """GPU.0 emulated on torch's CPU device; and, under ``pytest -m gpu``, a CUDA GPU's own kernels."""
    torch = pytest.importorskip("torch")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "emulated":
            patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        else:
            if not torch.cuda.is_available():
                pytest.skip("no CUDA GPU")
            patch.delenv("INFERPLEX_EMULATED_GPUS", raising=False)
        yield ov.Core()


def _model(nodes: list[onnx.NodeProto], inputs: list[Spec], outputs: list[Spec],
           initializers: Sequence[onnx.TensorProto] = (), opset: int = 17) -> onnx.ModelProto:
    """A checked model; an output declared with shape None takes the one ONNX shape inference gives."""
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.output}
    for output, (_, _, shape) in zip(model.graph.output, outputs, strict=True):
        if shape is None:
            output.type.CopyFrom(inferred[output.name].type)
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type}_{i}"
    onnx.checker.check_model(model)
    return model


def _assert_like_ort(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any], atol: float = 0.0) -> None:
    supported = core.query_model(model, "GPU.0")
    assert sorted(supported) == sorted(n.name for n in model.graph.node), "a node stays off the GPU"
    compiled = core.compile_model(model, "GPU.0")
    assert list(compiled.get_property("EXECUTION_DEVICES")) == ["GPU.0"]
    results = compiled(feeds)
    for i, want in enumerate(ort_run(model, feeds)):
        got = np.asarray(results[i])
        assert got.dtype == want.dtype and got.shape == want.shape
        if atol:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)


# --- recurrent activations without alpha/beta ---------------------------------------------


@pytest.mark.parametrize(("op", "activations"), [
    ("RNN", ["ThresholdedRelu"]), ("RNN", ["ScaledTanh"]), ("RNN", ["Affine"]),
    ("GRU", ["LeakyRelu", "ScaledTanh"]), ("LSTM", ["Sigmoid", "ScaledTanh", "Affine"]),
])
def test_recurrent_activation_whose_alpha_and_beta_are_left_out(core: ov.Core, op: str,
                                                               activations: list[str]) -> None:
    """ONNX names no defaults for these activations' alpha/beta; ONNX Runtime takes 0 for
    Affine, ThresholdedRelu and ScaledTanh (and LeakyRelu's own 0.01)."""
    gates, hidden, size = {"RNN": 1, "GRU": 3, "LSTM": 4}[op], 3, 4
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((2, gates * hidden, n)).astype(np.float32), w)
               for w, n in (("w", size), ("r", hidden))]
    outputs = ["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"]
    node = helper.make_node(op, ["x", "w", "r", "", "", "h0"], outputs, hidden_size=hidden,
                            direction="bidirectional", activations=activations * 2)
    inputs: list[Spec] = [("x", F, [5, 2, size]), ("h0", F, [2, 2, hidden])]
    model = _model([node], inputs, [(o, F, None) for o in outputs], weights, opset=14)
    feeds = {"x": rng.standard_normal((5, 2, size)).astype(np.float32),
             "h0": rng.standard_normal((2, 2, hidden)).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


# --- window functions with integer outputs ---------------------------------------------------


@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("elem", [TensorProto.INT64, TensorProto.UINT8, TensorProto.INT32])
@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_window_with_an_integer_output_type_truncates_like_onnx_runtime(core: ov.Core, op: str, elem: int,
                                                                        periodic: int) -> None:
    """Where a window touches 1 (Blackman's middle of a periodic window of 10), the float64 sum
    of float32 coefficients decides whether the truncated value is 1 or 0."""
    node = helper.make_node(op, ["n"], ["y"], periodic=periodic, output_datatype=elem)
    for size in (10, 11, 16):
        size_tensor = numpy_helper.from_array(np.array(size, np.int64), "n")
        _assert_like_ort(core, _model([node], [], [("y", elem, None)], [size_tensor]), {})


# --- a Loop of no iteration --------------------------------------------------------------------


def test_loop_of_no_iteration_whose_scan_output_has_a_symbolic_dimension(core: ov.Core) -> None:
    """The empty scan output takes 0 for the dimension the body leaves symbolic, as ONNX Runtime does."""
    value = helper.make_tensor_value_info
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "one"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Mul", ["s2", "s2"], ["sq"])], "body",
        [value("i", I64, []), value("c", TensorProto.BOOL, []), value("s", F, ["n"])],
        [value("c2", TensorProto.BOOL, []), value("s2", F, ["n"]), value("sq", F, ["n"])], initializer=[one])
    loop = helper.make_node("Loop", ["m", "", "s0"], ["final", "squares"], body=body)
    outputs: list[Spec] = [("final", F, ["n"]), ("squares", F, ["k", "n"])]
    model = _model([loop], [("m", I64, []), ("s0", F, ["n"])], outputs, opset=16)
    start = np.arange(3, dtype=np.float32)
    for trips in (0, 1, 4):
        _assert_like_ort(core, model, {"m": np.array(trips, np.int64), "s0": start})


# --- Attention's fourth output ---------------------------------------------------------------


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_output_mode_with_softcap_and_mask(core: ov.Core, mode: int) -> None:
    """Mode 0 is the scaled product before the softcap, 1 after it, 2 with the mask added, 3 the
    probabilities."""
    rng = np.random.default_rng(1)
    shapes = {"q": (2, 2, 3, 8), "k": (2, 2, 5, 8), "v": (2, 2, 5, 8), "mask": (3, 5)}
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y", "key", "value", "qk"],
                            softcap=2.0, qk_matmul_output_mode=mode)
    outputs: list[Spec] = [("y", F, [2, 2, 3, 8]), ("key", F, [2, 2, 5, 8]), ("value", F, [2, 2, 5, 8]),
                           ("qk", F, [2, 2, 3, 5])]
    model = _model([node], [(n, F, s) for n, s in shapes.items()], outputs, opset=23)
    _assert_like_ort(core, model, feeds, atol=1e-5)


# --- normalizations whose input rank is unknown -------------------------------------------------


@pytest.mark.parametrize(("op", "attrs", "opset"), [
    ("RMSNormalization", {"axis": -1}, 23), ("RMSNormalization", {"axis": 1, "stash_type": 1}, 23),
    ("LpNormalization", {"axis": -1, "p": 1}, 17), ("Swish", {"alpha": 0.7}, 24),
])
def test_normalization_whose_input_rank_shape_inference_lost(core: ov.Core, op: str, attrs: dict[str, Any],
                                                             opset: int) -> None:
    """The input comes from a Reshape to a run-time shape, so its rank is unknown at compile; the axis
    resolves against the tensor at run time."""
    shape = (2, 4, 3)
    operands, initializers = ["x"], []
    if op == "RMSNormalization":
        scale = np.random.default_rng(2).standard_normal(shape[attrs["axis"]:]).astype(np.float32)
        operands.append("scale")
        initializers.append(numpy_helper.from_array(scale, "scale"))
    nodes = [helper.make_node("Reshape", ["flat", "shape"], ["x"]),
             helper.make_node(op, operands, ["y"], **attrs)]
    inputs: list[Spec] = [("flat", F, [24]), ("shape", I64, ["r"])]
    model = _model(nodes, inputs, [("y", F, ["a", "b", "c"])], initializers, opset=opset)
    feeds = {"flat": np.random.default_rng(3).standard_normal(24).astype(np.float32),
             "shape": np.array(shape, np.int64)}
    _assert_like_ort(core, model, feeds, atol=1e-5)


@pytest.mark.parametrize(("axis", "scale_shape", "outputs"), [
    (-2, (4,), ["y"]), (1, (1, 4), ["y"]), (-1, (1,), ["y"]),
    (-1, (1,), ["y", "mean"]), (-1, (4,), ["y", "", "inv"]),
])
def test_layer_normalization_whose_scale_broadcasts_to_the_normalized_shape(
        core: ov.Core, axis: int, scale_shape: tuple[int, ...], outputs: list[str]) -> None:
    """A scale smaller than the normalized dims (broadcast, as ONNX Runtime takes it), with and without
    the optional mean / inverse standard deviation outputs."""
    rng = np.random.default_rng(4)
    weights = [numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), "scale"),
               numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "bias")]
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], outputs, axis=axis)
    model = _model([node], [("x", F, [2, 3, 4])], [(o, F, None) for o in outputs if o], weights)
    _assert_like_ort(core, model, {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, atol=1e-5)


# --- Scan-8's sequence lengths ---------------------------------------------------------------


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_8_runs_each_row_for_its_sequence_length(core: ov.Core, direction: int) -> None:
    """Opset 8's Scan has a batch axis and ``sequence_lens``: each row runs its first steps (reversed
    within them for direction 1), its state stops there and its scan outputs are zero-padded; the body
    also reads a value of the enclosing graph."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["state", "step"], ["next"]),
             helper.make_node("Mul", ["step", "w"], ["scaled"])]
    body = helper.make_graph(nodes, "body", [value("state", F, [3]), value("step", F, [3])],
                             [value("next", F, [3]), value("scaled", F, [3])])
    scan = helper.make_node("Scan", ["lens", "start", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                            directions=[direction])
    inputs: list[Spec] = [("lens", I64, [3]), ("start", F, [3, 3]), ("xs", F, [3, 4, 3]), ("w", F, [3])]
    model = _model([scan], inputs, [("final", F, [3, 3]), ("ys", F, [3, 4, 3])], opset=8)
    rng = np.random.default_rng(5)
    feeds = {"lens": np.array([4, 2, 1], np.int64), "start": rng.standard_normal((3, 3)).astype(np.float32),
             "xs": rng.standard_normal((3, 4, 3)).astype(np.float32),
             "w": rng.standard_normal(3).astype(np.float32)}
    _assert_like_ort(core, model, feeds, atol=1e-6)


# --- transformer and sampling ops whose input rank is unknown --------------------------------


def _after_reshape(node: onnx.NodeProto, data: np.ndarray, others: dict[str, np.ndarray],
                   opset: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``node`` with its first input reshaped from a flat ``data`` to a run-time shape (rank unknown)."""
    reshape = helper.make_node("Reshape", ["flat", "shape"], [node.input[0]])
    inputs: list[Spec] = [("flat", F, [data.size]), ("shape", I64, ["r"])]
    inputs += [(name, I64 if value.dtype == np.int64 else F, list(value.shape))
               for name, value in others.items()]
    rank = data.ndim
    outputs: list[Spec] = [(node.output[0], F, [f"d{k}" for k in range(rank)])]
    model = _model([reshape, node], inputs, outputs, opset=opset)
    return model, {"flat": data.ravel(), "shape": np.array(data.shape, np.int64), **others}


def test_grid_sample_attention_and_tensor_scatter_whose_input_rank_is_unknown(core: ov.Core) -> None:
    rng = np.random.default_rng(6)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    cases = [
        (helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic"), normal(1, 2, 5, 6),
         {"grid": rng.uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)}, 20),
        (helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear"), normal(1, 2, 4, 5, 6),
         {"grid": rng.uniform(-1, 1, (1, 3, 4, 5, 3)).astype(np.float32)}, 20),
        (helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1), normal(2, 2, 3, 8),
         {"k": normal(2, 2, 5, 8), "v": normal(2, 2, 5, 8)}, 23),
        (helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2),
         normal(2, 3, 16), {"k": normal(2, 5, 16), "v": normal(2, 5, 16)}, 23),
        (helper.make_node("TensorScatter", ["cache", "update", "at"], ["y"], mode="circular"),
         normal(2, 3, 8, 4), {"update": normal(2, 3, 2, 4), "at": np.array([7, 2], np.int64)}, 24),
    ]
    for node, data, others, opset in cases:
        model, feeds = _after_reshape(node, data, others, opset)
        _assert_like_ort(core, model, feeds, atol=1e-5)
