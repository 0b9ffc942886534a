"""Model, Op and Port: ports, friendly names, rt_info, reading from every source, reshape.

Results are checked against raw ONNX Runtime or the onnx wheel's reference outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError, ModelError

from conftest import ONNX_BACKEND_DATA, make_model, ort_run

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _mixed_model() -> onnx.ModelProto:
    """x f32 [batch, seq, 4], idx i64 [seq] -> y f32 [batch, seq, 4], mask bool [batch, seq, 4]."""
    return make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="act"),
         helper.make_node("Cast", ["idx"], ["idx_f"], to=FLOAT),
         helper.make_node("Unsqueeze", ["idx_f", "axes"], ["idx_col"]),
         helper.make_node("Mul", ["r", "idx_col"], ["y"]),
         helper.make_node("Greater", ["y", "zero"], ["mask"])],
        [("x", FLOAT, ["batch", "seq", 4]), ("idx", INT64, ["seq"])],
        [("y", FLOAT, ["batch", "seq", 4]), ("mask", BOOL, ["batch", "seq", 4])],
        [numpy_helper.from_array(np.array([1], np.int64), "axes"),
         numpy_helper.from_array(np.array(0.5, np.float32), "zero")])


MIXED = _mixed_model()


def _feeds(batch: int = 2, seq: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 10 + seq)
    return {"x": rng.standard_normal((batch, seq, 4), dtype=np.float32),
            "idx": np.arange(seq, dtype=np.int64)}


# --- ports ---------------------------------------------------------------------------------------


def test_ports_names_shapes_and_types(core: ov.Core) -> None:
    model = core.read_model(MIXED)
    assert [p.any_name for p in model.inputs] == ["x", "idx"]
    assert [p.get_any_name() for p in model.outputs] == ["y", "mask"]
    x, idx = model.inputs
    assert x.partial_shape == ov.PartialShape("?,?,4") and x.dims == ("batch", "seq", 4)
    assert idx.get_partial_shape() == ov.PartialShape([-1]) and idx.dims == ("seq",)
    assert x.is_dynamic and model.is_dynamic()
    assert [p.element_type.get_type_name() for p in model.inputs + model.outputs] == \
        ["f32", "i64", "f32", "boolean"]
    assert model.output("mask").element_type == ov.Type.boolean
    assert model.output("mask").element_type.to_dtype() == np.dtype(bool)
    assert idx.get_element_type().to_dtype() == np.int64
    assert model.input(1) == idx and model.input("idx") == idx
    with pytest.raises(InputError, match="dynamic shape"):
        _ = x.shape
    with pytest.raises(InputError, match="x, idx"):
        model.input("nope")
    with pytest.raises(InputError, match=r"out of range.*2 outputs"):
        model.output(2)


def test_compiled_ports_match_the_model(core: ov.Core) -> None:
    compiled = core.compile_model(MIXED, "CPU")
    model = core.read_model(MIXED)
    assert compiled.inputs == model.inputs and compiled.outputs == model.outputs
    assert compiled.input("idx").dims == ("seq",)
    assert compiled.output(1).any_name == "mask"


# --- ops -----------------------------------------------------------------------------------------


def _named_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["a"]),                  # unnamed -> Relu_0
             helper.make_node("Neg", ["a"], ["b"], name="dup"),
             helper.make_node("Neg", ["b"], ["c"], name="dup"),       # duplicate -> dup_1
             helper.make_node("Abs", ["c"], ["d"], name="dup_1"),     # taken -> dup_1_1
             helper.make_node("Relu", ["d"], ["e"], name="Relu_0"),   # taken by node 0 -> Relu_0_1
             helper.make_node("Sigmoid", ["e"], ["y"])]               # unnamed -> Sigmoid_5
    return make_model(nodes, [("x", FLOAT, [2])], [("y", FLOAT, [2])])


def test_friendly_names_are_unique_and_follow_the_rule(core: ov.Core) -> None:
    ops = core.read_model(_named_model()).get_ops()
    names = [op.get_friendly_name() for op in ops]
    assert names == ["Relu_0", "dup", "dup_1", "dup_1_1", "Relu_0_1", "Sigmoid_5"]
    assert [op.get_type_name() for op in ops] == ["Relu", "Neg", "Neg", "Abs", "Relu", "Sigmoid"]
    assert len(set(names)) == len(names)


def test_friendly_names_are_stable_across_reads_and_saves(core: ov.Core, tmp_path: Path) -> None:
    first = [op.friendly_name for op in core.read_model(_named_model()).get_ops()]
    again = [op.friendly_name for op in core.read_model(_named_model().SerializeToString()).get_ops()]
    path = tmp_path / "named.onnx"
    ov.save_model(core.read_model(_named_model()), path)
    saved = [op.friendly_name for op in core.read_model(path).get_ops()]
    assert first == again == saved


def test_affinity_survives_save_and_read(core: ov.Core, tmp_path: Path) -> None:
    model = core.read_model(MIXED)
    for index, op in enumerate(model.get_ops()):
        op.get_rt_info()["affinity"] = "CPU" if index % 2 else "GPU.0"
    op0 = model.get_ops()[0]
    assert op0.get_rt_info()["affinity"] == "GPU.0" and "affinity" in op0.get_rt_info()
    path = tmp_path / "with_affinity.onnx"
    ov.save_model(model, path)
    loaded = core.read_model(path)
    assert {op.get_friendly_name(): op.get_rt_info()["affinity"] for op in loaded.get_ops()} == \
        {op.get_friendly_name(): op.get_rt_info()["affinity"] for op in model.get_ops()}
    feeds = _feeds()  # the annotated model still computes the same thing
    results = core.compile_model(path, "CPU")(feeds)
    for index, expected in enumerate(ort_run(MIXED, feeds)):
        np.testing.assert_array_equal(results[index], expected)


def test_rt_info_is_a_string_mapping(core: ov.Core) -> None:
    op = core.read_model(MIXED).get_ops()[0]
    info = op.get_rt_info()
    info["priority"] = 3
    assert info["priority"] == "3"
    del info["priority"]
    assert "priority" not in info and len(info) == 0


# --- IR < 4: initializers listed as inputs are constants -----------------------------------------


# (not light_squeezenet: its logits are all about 1e10, so its softmax output is that of the
# engine's float rounding)
@pytest.mark.parametrize("name", ["resnet50", "densenet121", "inception_v1"])
def test_light_models_inputs_are_only_data_and_match_reference(core: ov.Core, name: str) -> None:
    path = ONNX_BACKEND_DATA / "light" / f"light_{name}.onnx"
    proto = onnx.load(path)
    assert proto.ir_version < 4
    initializers = {i.name for i in proto.graph.initializer}
    data_inputs = [vi for vi in proto.graph.input if vi.name not in initializers]
    assert len(proto.graph.input) > len(data_inputs) == 1
    model = core.read_model(path)
    assert [p.any_name for p in model.inputs] == [data_inputs[0].name]
    # the onnx runner's inputs for light models, and its reference output
    dims = tuple(d.dim_value for d in data_inputs[0].type.tensor_type.shape.dim)
    n = int(np.prod(dims))
    feed = (np.arange(n).reshape(dims) / n).astype(np.float32)
    expected = numpy_helper.to_array(onnx.load_tensor(str(path)[: -len(".onnx")] + "_output_0.pb"))
    result = core.compile_model(model, "CPU")({data_inputs[0].name: feed})[0]
    assert result.dtype == expected.dtype
    np.testing.assert_allclose(result, expected, rtol=1e-3, atol=1e-7)


# --- every source reads the same model -------------------------------------------------------------


def test_read_model_from_every_source_gives_equal_results(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "mixed.onnx"
    onnx.save(MIXED, path)
    sources = {"str path": str(path), "Path": path, "bytes": path.read_bytes(),
               "ModelProto": MIXED, "onnx_ir.Model": ir.serde.deserialize_model(MIXED),
               "Model": core.read_model(MIXED)}
    feeds = _feeds(batch=3, seq=5)
    expected = ort_run(MIXED, feeds)
    for label, source in sources.items():
        model = core.read_model(source)
        assert [p.any_name for p in model.inputs] == ["x", "idx"], label
        results = core.compile_model(source, "CPU")(feeds)
        for index, want in enumerate(expected):
            np.testing.assert_array_equal(results[index], want, err_msg=label)


def test_large_weights_are_left_out_of_the_checkers_copy(core: ov.Core, tmp_path: Path) -> None:
    # onnx.checker serializes what it is given: its copy holds placeholders for large
    # weights (and small ones as they are), while the model read keeps every value.
    from inferplex._model_check import LARGE_TENSOR_BYTES, checker_copy

    rng = np.random.default_rng(3)
    big = rng.standard_normal((64, 512), dtype=np.float32)
    bias = rng.standard_normal(512, dtype=np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["xw"]),
                        helper.make_node("Add", ["xw", "b"], ["y"])],
                       [("x", FLOAT, ["N", 64])], [("y", FLOAT, ["N", 512])],
                       [numpy_helper.from_array(big, "w"), numpy_helper.from_array(bias, "b")])
    assert big.nbytes > LARGE_TENSOR_BYTES > bias.nbytes
    copy = checker_copy(model)
    assert copy.ByteSize() < LARGE_TENSOR_BYTES < model.ByteSize()
    kept = {t.name: t for t in copy.graph.initializer}
    assert list(kept["w"].dims) == [0] and not kept["w"].raw_data
    np.testing.assert_array_equal(numpy_helper.to_array(kept["b"]), bias)
    assert [n.op_type for n in copy.graph.node] == ["MatMul", "Add"]
    assert copy.opset_import == model.opset_import
    path = tmp_path / "big.onnx"
    onnx.save(model, path)
    x = rng.standard_normal((3, 64), dtype=np.float32)
    expected = ort_run(model, {"x": x})[0]
    for source in (model, path):
        result = core.compile_model(source, "CPU")({"x": x})["y"]
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_large_constant_values_are_left_out_of_the_checkers_copy(core: ov.Core) -> None:
    from inferplex._model_check import LARGE_TENSOR_BYTES, checker_copy

    rng = np.random.default_rng(4)
    big = rng.standard_normal((64, 512), dtype=np.float32)
    model = make_model([helper.make_node("Constant", [], ["w"], name="weights",
                                         value=numpy_helper.from_array(big, "w_value")),
                        helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [("x", FLOAT, ["N", 64])], [("y", FLOAT, ["N", 512])])
    copy = checker_copy(model)
    assert copy.ByteSize() < LARGE_TENSOR_BYTES < model.ByteSize()
    value = copy.graph.node[0].attribute[0]
    assert value.name == "value" and list(value.t.dims) == [0] and not value.t.raw_data
    assert [(n.name, n.op_type) for n in copy.graph.node] == [("weights", "Constant"), ("mm", "MatMul")]
    x = rng.standard_normal((3, 64), dtype=np.float32)
    result = core.compile_model(model, "CPU")({"x": x})["y"]
    np.testing.assert_allclose(result, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _if_model(then_weight: onnx.TensorProto, else_weight: onnx.TensorProto) -> onnx.ModelProto:
    """``y = x @ W1`` when ``c`` else ``x @ W2``; W1 an initializer of the then-branch, W2 a Constant
    of the else-branch."""
    def branch(name: str, nodes: list[onnx.NodeProto],
               initializers: list[onnx.TensorProto]) -> onnx.GraphProto:
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", FLOAT, None)],
                                 initializers)

    then_branch = branch("then", [helper.make_node("MatMul", ["x", "w1"], ["then_y"])], [then_weight])
    else_branch = branch("else", [helper.make_node("Constant", [], ["w2"], value=else_weight),
                                  helper.make_node("MatMul", ["x", "w2"], ["else_y"])], [])
    return make_model([helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then_branch,
                                        else_branch=else_branch)],
                      [("x", FLOAT, ["N", 64]), ("c", onnx.TensorProto.BOOL, [])], [("y", FLOAT, ["N", 512])])


def test_large_tensors_in_subgraphs_are_left_out_of_the_checkers_copy(core: ov.Core) -> None:
    from inferplex._model_check import LARGE_TENSOR_BYTES, checker_copy

    rng = np.random.default_rng(5)
    w1, w2 = (rng.standard_normal((64, 512), dtype=np.float32) for _ in range(2))
    model = _if_model(numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2_value"))
    copy = checker_copy(model)
    assert copy.ByteSize() < LARGE_TENSOR_BYTES < model.ByteSize() // 2
    branches = {a.name: a.g for a in copy.graph.node[0].attribute}
    assert list(branches["then_branch"].initializer[0].dims) == [0]
    assert list(branches["else_branch"].node[0].attribute[0].t.dims) == [0]
    assert [n.op_type for n in branches["else_branch"].node] == ["Constant", "MatMul"]
    x = rng.standard_normal((3, 64), dtype=np.float32)
    compiled = core.compile_model(model, "CPU")
    for flag in (True, False):
        feeds = {"x": x, "c": np.array(flag)}
        np.testing.assert_allclose(compiled(feeds)["y"], ort_run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_a_too_short_tensor_in_a_subgraph_is_refused_with_its_name(core: ov.Core) -> None:
    rng = np.random.default_rng(6)
    w1, w2 = (rng.standard_normal((64, 512), dtype=np.float32) for _ in range(2))
    model = _if_model(numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2_value"))
    else_branch = next(a.g for a in model.graph.node[0].attribute if a.name == "else_branch")
    value = else_branch.node[0].attribute[0].t
    value.raw_data = value.raw_data[:1000]
    with pytest.raises(ModelError, match=r"'w2_value' holds 1000 bytes.*\[64, 512\].*131072 bytes"):
        core.read_model(model)


def test_external_data_next_to_the_model_loads(core: ov.Core, tmp_path: Path) -> None:
    weights = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [("x", FLOAT, ["N", 64])], [("y", FLOAT, ["N", 64])],
                       [numpy_helper.from_array(weights, "w")])
    path = tmp_path / "ext" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (path.parent / "weights.bin").stat().st_size == weights.nbytes
    assert len(path.read_bytes()) < weights.nbytes  # the weights really are outside
    x = np.random.default_rng(0).standard_normal((3, 64), dtype=np.float32)
    result = core.compile_model(path, "CPU")({"x": x})["y"]
    np.testing.assert_allclose(result, x @ weights, rtol=1e-5, atol=1e-6)


# --- reshape -----------------------------------------------------------------------------------


def test_reshape_to_static_dims(core: ov.Core) -> None:
    model = core.read_model(MIXED)
    model.reshape({"x": [2, 3, 4], "idx": [3]})
    assert model.input("x").shape == (2, 3, 4)
    assert model.input(1).get_shape() == (3,)
    assert not model.inputs[0].is_dynamic
    compiled = core.compile_model(model, "CPU")
    feeds = _feeds(2, 3)
    for index, want in enumerate(ort_run(MIXED, feeds)):
        np.testing.assert_array_equal(compiled(feeds)[index], want)
    with pytest.raises(InputError, match=r"\[2,3,4\]"):
        compiled(_feeds(1, 3))


def test_reshape_one_input_model_and_back_to_dynamic(core: ov.Core) -> None:
    relu = make_model([helper.make_node("Relu", ["x"], ["y"])],
                      [("x", FLOAT, ["N", 8])], [("y", FLOAT, ["N", 8])])
    model = core.read_model(relu)
    model.reshape([4, 8])
    assert model.input().shape == (4, 8)
    model.reshape({0: [-1, 8]})
    assert model.input().partial_shape == ov.PartialShape("?,8") and model.input().dims == (None, 8)
    model.reshape({"x": ["B", 8]})
    assert model.input().dims == ("B", 8)
    x = np.linspace(-1, 1, 40, dtype=np.float32).reshape(5, 8)
    np.testing.assert_array_equal(core.compile_model(model, "CPU")(x)["y"], np.maximum(x, 0))
