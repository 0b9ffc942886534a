"""``inferplex.passes`` (OpenVINO's ``openvino.passes``): a Manager running MakeStateful, Serialize and
passes written in Python, checked against openvino's own passes on the same model where it is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplex as ov
import inferplex.passes as inferplex_passes
from inferplex import opset8 as ops
from inferplex.errors import InputError, InputTypeError
from inferplex.passes import MakeStateful, Manager, ModelPass, Serialize, Version


def _accumulator(package: Any, opset: Any) -> Any:
    """``sum = state + x``; the Result ``state_out`` gives the sum back, ``y`` its Relu."""
    state = opset.parameter([1, 3], np.float32, name="state_in")
    x = opset.parameter([1, 3], np.float32, name="x")
    total = opset.add(state, x)
    back = opset.result(total)
    back.set_friendly_name("state_out")
    return package.Model([back, opset.result(opset.relu(total))], [state, x], "accumulator")


def _three_runs(package: Any, model: Any) -> list[list[float]]:
    request = package.Core().compile_model(model, "CPU").create_infer_request()
    data = np.array([[1.0, -2.0, 3.0]], np.float32)
    return [request.infer({"x": data})[0][0].tolist() for _ in range(3)]


def test_make_stateful_turns_a_parameter_and_result_into_a_variable() -> None:
    model = _accumulator(ov, ops)
    manager = Manager()
    manager.register_pass(MakeStateful({"state_in": "state_out"}))
    manager.run_passes(model)
    assert [p.get_friendly_name() for p in model.get_parameters()] == ["x"]
    assert len(model.outputs) == 1
    assert [v.get_info().variable_id for v in model.get_variables()] == ["state_instate_out"]
    # relu(0 + x), relu(x + x), relu(2x + x)
    assert _three_runs(ov, model) == [[1.0, 0.0, 3.0], [2.0, 0.0, 6.0], [3.0, 0.0, 9.0]]


def test_make_stateful_matches_openvino() -> None:
    openvino = pytest.importorskip("openvino")
    from openvino import passes as ov_passes

    runs, ids = [], []
    for package, opset, passes in ((openvino, openvino.opset13, ov_passes),
                                   (ov, ops, inferplex_passes)):
        model = _accumulator(package, opset)
        params, results = model.get_parameters(), model.get_results()
        manager = passes.Manager()
        manager.register_pass(passes.MakeStateful([(params[0], results[0])]))
        manager.run_passes(model)
        ids.append([v.get_info().variable_id for v in model.get_variables()])
        runs.append(_three_runs(package, model))
    assert runs[0] == runs[1] and ids[0] == ids[1]


def test_serialize_writes_ir_that_openvino_reads(tmp_path: Path) -> None:
    openvino = pytest.importorskip("openvino")
    model = _accumulator(ov, ops)
    manager = Manager()
    manager.register_pass(MakeStateful({"state_in": "state_out"}))
    manager.register_pass(Serialize(tmp_path / "m.xml", tmp_path / "m.bin", Version.IR_V11))
    manager.run_passes(model)
    ov_model = openvino.Core().read_model(str(tmp_path / "m.xml"), str(tmp_path / "m.bin"))
    assert [v.get_info().variable_id for v in ov_model.get_variables()] == ["state_instate_out"]
    assert _three_runs(openvino, ov_model) == _three_runs(ov, model)


def test_passes_written_in_python_run_in_order_and_validation_follows_a_change() -> None:
    seen: list[str] = []

    class Record(ModelPass):
        def __init__(self, label: str, changes: bool) -> None:
            super().__init__()
            self.label, self.changes = label, changes

        def run_on_model(self, model: Any) -> bool:
            seen.append(f"{self.label}:{len(model.get_parameters())}")
            return self.changes

    model = _accumulator(ov, ops)
    manager = Manager()
    manager.set_per_pass_validation(True)
    first = manager.register_pass(Record("first", False))
    manager.register_pass(MakeStateful({"state_in": "state_out"}))
    manager.register_pass(Record("last", True))
    manager.run_passes(model)
    assert seen == ["first:2", "last:1"] and first.get_name() == "Record"


def test_wrong_passes_and_names_are_refused() -> None:
    with pytest.raises(InputTypeError, match="register_pass takes a pass"):
        Manager().register_pass("Serialize")
    manager = Manager()
    manager.register_pass(MakeStateful({"missing": "state_out"}))
    with pytest.raises(InputError, match="no Parameter 'missing'"):
        manager.run_passes(_accumulator(ov, ops))


def _foldable(package: Any, opset: Any) -> Any:
    """``reshape(x * (ones + twos), shape_of(x))`` and the Relu of a random op: the sum and the shape
    fold, the random op does not."""
    x = opset.parameter([2, 3], np.float32, name="x")
    total = opset.add(opset.constant(np.ones((2, 3), np.float32)),
                      opset.constant(np.full((2, 3), 2, np.float32)))
    product = opset.reshape(opset.multiply(x, total), opset.shape_of(x), False)
    noise = package.opset8.random_uniform(opset.constant(np.array([2, 3], np.int64)),
                                          opset.constant(np.float32(0)), opset.constant(np.float32(1)),
                                          "f32", 1, 2)
    return package.Model([product, opset.relu(noise)], [x])


def test_constant_folding_computes_constant_ops_once_as_openvino_does() -> None:
    reference = pytest.importorskip("openvino")
    reference_passes = pytest.importorskip("openvino.passes")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    kinds = {}
    for package, passes in ((ov, inferplex_passes), (reference, reference_passes)):
        model = _foldable(package, package.opset8)
        before = np.asarray(package.Core().compile_model(model, "CPU")(x)[0])
        manager = passes.Manager()
        manager.register_pass(passes.ConstantFolding())
        manager.run_passes(model)
        kinds[package.__name__] = sorted(op.get_type_name() for op in model.get_ordered_ops())
        after = package.Core().compile_model(model, "CPU")(x)
        np.testing.assert_array_equal(np.asarray(after[0]), before)
        np.testing.assert_array_equal(before, x * 3)
        noise = np.asarray(after[1])
        assert noise.shape == (2, 3) and ((noise >= 0) & (noise < 1)).all()
    assert "ShapeOf" not in kinds["inferplex"] and kinds["inferplex"].count("Add") == 1
    assert "RandomUniform" in kinds["inferplex"] and "RandomUniform" in kinds["openvino"]
    assert kinds["inferplex"].count("Constant") >= 2


# --- VisualizeTree ---------------------------------------------------------------------------


def _drawn(package: Any, passes: Any, folder: Path) -> dict[str, Any]:
    """Draw ``relu(x + c)`` with VisualizeTree, as a program does, on either package."""
    x = package.opset13.parameter([1, 3], np.float32, name="x")
    relu = package.opset13.relu(package.opset13.add(x, package.opset13.constant(np.ones((1, 3), np.float32))))
    model = package.Model([relu], [x], "drawn")
    manager = passes.Manager()
    manager.register_pass(passes.VisualizeTree(str(folder / "image.svg")))
    manager.register_pass(passes.VisualizeTree(str(folder / "only.dot"), dot_only=True))
    manager.run_passes(model)
    texts = {path.name: path.read_text() for path in sorted(folder.iterdir()) if path.suffix == ".dot"}
    return {"files": sorted(texts), "edges": {name: text.count("->") for name, text in texts.items()},
            "digraph": all(text.lstrip().startswith("digraph") for text in texts.values())}


def test_visualize_tree_writes_what_openvino_writes(tmp_path: Path) -> None:
    real = pytest.importorskip("openvino")
    real_passes = pytest.importorskip("openvino.passes")
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ours = _drawn(ov, inferplex_passes, tmp_path / "ours")
    assert ours == _drawn(real, real_passes, tmp_path / "theirs")
    assert ours["files"] == ["image.svg.dot", "only.dot"] and ours["edges"]["only.dot"] == 4


def test_visualize_tree_draws_each_op_and_takes_a_node_modifier(tmp_path: Path) -> None:
    x = ops.parameter([2, 2], np.float32, name="x")
    relu = ops.relu(x)
    relu.set_friendly_name("act")
    marked = []

    def modifier(node: Any, attributes: list[str]) -> None:
        if node.get_type_name() == "Relu":
            attributes.append("fontcolor=red")
            marked.append(node.get_friendly_name())

    manager = Manager()
    manager.register_pass(inferplex_passes.VisualizeTree(tmp_path / "graph.dot", nm=modifier, dot_only=True))
    manager.run_passes(ov.Model([relu], [x], "drawn"))
    text = (tmp_path / "graph.dot").read_text()
    assert marked == ["act"] and 'label="act\\nRelu" fontcolor=red' in text
    assert "style=dashed color=blue" in text and "color=crimson" in text  # the Parameter, the Result
    with pytest.raises(InputTypeError, match="file name"):
        inferplex_passes.VisualizeTree(3)


def test_passes_name_what_they_take() -> None:
    with pytest.raises(InputTypeError, match="run_passes takes a Model"):
        Manager().run_passes("model.onnx")
    with pytest.raises(InputTypeError, match="nm is a function"):
        inferplex_passes.VisualizeTree("graph.dot", nm="red")
