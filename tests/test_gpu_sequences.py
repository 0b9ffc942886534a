"""Sequences, optionals, MaxUnpool and TreeEnsemble on the GPU device, through the public API.

Each model runs whole on ``GPU.0`` (``query_model`` claims every node) and is
compared with raw ONNX Runtime on the same model: the emulated GPU (torch's CPU)
always, a CUDA GPU under the ``gpu`` marker.  The cases here are the ones the ONNX
conformance suite leaves out: positions given at run time (read on the host),
sequences as model inputs and outputs together, set membership and missing values
in several trees at once, and how bad sequence inputs are reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError

torch = pytest.importorskip("torch")

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


@pytest.fixture(scope="module", params=["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def core(request: pytest.FixtureRequest) -> ov.Core:
    """The emulated GPU.0, or (marked ``gpu``) the machine's own CUDA GPU.0 (the emulated Core is
    only made for the emulated runs: its environment would make GPU.0 emulated)."""
    if request.param == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("no CUDA GPU")
        return ov.Core()
    return request.getfixturevalue("emulated_core")


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], initializers: tuple[onnx.TensorProto, ...] = (),
           ml: bool = False) -> onnx.ModelProto:
    for i, node in enumerate(nodes):
        node.name = node.name or f"{node.op_type}_{i}"
    opsets = [helper.make_opsetid("", 18)] + ([helper.make_opsetid("ai.onnx.ml", 5)] if ml else [])
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                              opset_imports=opsets)
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def ort_run(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    """Raw ONNX Runtime on the whole model; a sequence input passes as its list of arrays."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _run_on_gpu(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    assert len(core.query_model(model, "GPU.0")) == len(model.graph.node), "a node stays off the GPU"
    compiled = core.compile_model(model, "GPU.0")
    results = compiled(feeds)
    return [results[i] for i in range(len(compiled.outputs))]


def _assert_same(refs: list[Any], outs: list[Any]) -> None:
    assert len(outs) == len(refs)
    for ref, out in zip(refs, outs, strict=True):
        if isinstance(ref, list):
            assert isinstance(out, list) and len(out) == len(ref)
            _assert_same(ref, out)
            continue
        out = np.asarray(out)
        assert out.dtype == np.asarray(ref).dtype
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)


def _tensor(name: str, elem: int, shape: list[Any]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _sequence(name: str, elem: int, shape: list[Any] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def test_sequence_ops_with_run_time_positions_match_onnx_runtime(core: ov.Core) -> None:
    """Split, insert, erase, concat, length and a negative position read at run time."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "split"], ["s0"], axis=0),
        helper.make_node("SequenceInsert", ["s0", "t", "one"], ["s1"]),
        helper.make_node("SequenceErase", ["s1"], ["s2"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0),
        helper.make_node("ConcatFromSequence", ["s0"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("SequenceLength", ["s2"], ["n"]),
        helper.make_node("SequenceAt", ["s1", "p"], ["at"]),
    ]
    model = _model(nodes, [_tensor("x", FLOAT, [4, 3]), _tensor("t", FLOAT, [2, 3]),
                           _tensor("p", INT64, [])],
                   [_tensor("cat", FLOAT, [None, 3]), _tensor("stacked", FLOAT, [2, 3, 2]),
                    _tensor("n", INT64, []), _tensor("at", FLOAT, [None, 3])],
                   (numpy_helper.from_array(np.array([2, 2], np.int64), "split"),
                    numpy_helper.from_array(np.array(1, np.int64), "one")))
    rng = np.random.default_rng(0)
    for position in (-1, 0, -3):
        feeds = {"x": rng.standard_normal((4, 3), dtype=np.float32),
                 "t": rng.standard_normal((2, 3), dtype=np.float32), "p": np.array(position, np.int64)}
        _assert_same(ort_run(model, feeds), _run_on_gpu(core, model, feeds))


def test_sequence_inputs_and_outputs_match_onnx_runtime(core: ov.Core) -> None:
    """A list of arrays in, a list of arrays out (SequenceMap over it), and a tensor made of it."""
    body = helper.make_graph([helper.make_node("Mul", ["e", "k"], ["m"]),
                              helper.make_node("Shape", ["e"], ["s"])], "body",
                             [_tensor("e", FLOAT, ["N"]), _tensor("k", FLOAT, [])],
                             [_tensor("m", FLOAT, ["N"]), _tensor("s", INT64, [1])])
    nodes = [helper.make_node("SequenceMap", ["xs", "k"], ["scaled", "shapes"], body=body),
             helper.make_node("ConcatFromSequence", ["shapes"], ["sizes"], axis=0)]
    model = _model(nodes, [_sequence("xs", FLOAT, ["N"]), _tensor("k", FLOAT, [])],
                   [_sequence("scaled", FLOAT, ["N"]), _tensor("sizes", INT64, [None])])
    feeds = {"xs": [np.arange(n, dtype=np.float32) for n in (3, 1, 4)], "k": np.array(2.5, np.float32)}
    _assert_same(ort_run(model, feeds), _run_on_gpu(core, model, feeds))


def test_sequences_cross_between_devices_under_hetero(core: ov.Core) -> None:
    """A sequence made on the GPU, mapped on the CPU (the GPU refuses TfIdfVectorizer), concatenated
    on the GPU: the split model gives what ONNX Runtime gives on the whole one."""
    body = helper.make_graph(
        [helper.make_node("TfIdfVectorizer", ["e"], ["m"], mode="TF", min_gram_length=1, max_gram_length=1,
                          max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[2, 3])],
        "body", [_tensor("e", INT64, [None, None])], [_tensor("m", FLOAT, [None, 2])])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["xs"], axis=0, keepdims=0, name="split"),
             helper.make_node("SequenceMap", ["xs"], ["ys"], body=body, name="map"),
             helper.make_node("ConcatFromSequence", ["ys"], ["y"], axis=0, new_axis=1, name="cat")]
    model = _model(nodes, [_tensor("x", INT64, [3, 1, 4])], [_tensor("y", FLOAT, [None, None, 2])])
    model.graph.value_info.extend([_sequence("xs", INT64, [1, 4]), _sequence("ys", FLOAT, [None, 2])])
    assert core.query_model(model, "HETERO:GPU.0,CPU") == {"split": "GPU.0", "map": "CPU", "cat": "GPU.0"}
    feeds = {"x": np.array([[[2, 3, 3, 1]], [[0, 0, 2, 5]], [[3, 3, 3, 3]]], np.int64)}
    compiled = core.compile_model(model, "HETERO:GPU.0,CPU")
    _assert_same(ort_run(model, feeds), [compiled(feeds)[0]])


def test_a_sequence_input_must_be_a_list(core: ov.Core) -> None:
    model = _model([helper.make_node("SequenceLength", ["xs"], ["n"])], [_sequence("xs", FLOAT, [2])],
                   [_tensor("n", INT64, [])])
    compiled = core.compile_model(model, "GPU.0")
    assert int(np.asarray(compiled({"xs": []})[0])) == 0  # an empty sequence is a sequence
    with pytest.raises(InputError, match="list of tensors"):
        compiled({"xs": np.zeros((3, 2), np.float32)})
    with pytest.raises(InputError, match="element type"):
        compiled({"xs": [np.zeros(2, np.int64)]})


def test_max_unpool_undoes_max_pool_like_onnx_runtime(core: ov.Core) -> None:
    """Flat indices over N*C*H*W, strides, pads and an odd input size."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("MaxUnpool", ["y", "i"], ["z"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1])]
    model = _model(nodes, [_tensor("x", FLOAT, [2, 3, 7, 7])], [_tensor("z", FLOAT, [2, 3, 7, 7])])
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3, 7, 7), dtype=np.float32)}
    _assert_same(ort_run(model, feeds), _run_on_gpu(core, model, feeds))


def test_max_unpool_with_another_output_shape_stays_off_the_gpu(core: ov.Core) -> None:
    """Where output_shape differs from the inferred shape, ONNX's reference and ONNX Runtime disagree."""
    node = helper.make_node("MaxUnpool", ["y", "i", "shape"], ["z"], kernel_shape=[2, 2], strides=[2, 2],
                            name="unpool")
    model = _model([node], [_tensor("y", FLOAT, [1, 1, 2, 2]), _tensor("i", INT64, [1, 1, 2, 2])],
                   [_tensor("z", FLOAT, [1, 1, 5, 5])],
                   (numpy_helper.from_array(np.array([1, 1, 5, 5], np.int64), "shape"),))
    assert "unpool" not in core.query_model(model, "GPU.0")


def _forest(aggregate: int) -> onnx.ModelProto:
    """Two trees over three features and two targets: a threshold tree whose NaNs go left, and a
    set-membership tree."""
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", aggregate_function=aggregate, n_targets=2,
        tree_roots=[0, 2], nodes_featureids=[0, 1, 2], nodes_truenodeids=[1, 0, 2],
        nodes_falsenodeids=[1, 1, 3], nodes_trueleafs=[0, 1, 1], nodes_falseleafs=[1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0],
        nodes_modes=numpy_helper.from_array(np.array([1, 3, 6], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([0.5, -0.25, 0.0], np.float32)),
        membership_values=numpy_helper.from_array(np.array([1.0, 2.0, np.nan], np.float32)),
        leaf_targetids=[0, 1, 0, 1], leaf_weights=numpy_helper.from_array(
            np.array([1.5, -2.0, 10.0, 7.25], np.float32)))
    return _model([node], [_tensor("x", FLOAT, ["N", 3])], [_tensor("y", FLOAT, ["N", 2])], ml=True)


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3], ids=["average", "sum", "min", "max"])
def test_tree_ensemble_matches_onnx_runtime(core: ov.Core, aggregate: int) -> None:
    x = np.array([[0.2, 0.0, 1.0], [0.7, -1.0, 2.0], [np.nan, 3.0, 5.0], [0.5, 1.0, 1.0]], np.float32)
    model = _forest(aggregate)
    _assert_same(ort_run(model, {"x": x}), _run_on_gpu(core, model, {"x": x}))
