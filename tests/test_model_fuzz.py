"""Malformed and hostile model files end as ``inferplex.errors``, never as a raw error, crash or hang.

Fuzzing: deterministic byte-level mutants of the onnx wheel's light models and
of a built model (``model_mutants.py``) go through ``read_model``; those that
read are compiled on CPU and run once with zero inputs.  Crafted cases: one
test per way a file can lie, each checking that the message names the problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InferplexError, ModelError

from conftest import make_model
from model_mutants import Mutant, built_model, field_mutants, mutants

FLOAT = TensorProto.FLOAT
BYTE_MUTANTS = 3000
FIELD_MUTANTS = 400
LIGHT_COMPILES = 12
"""Light-model mutants that read fine and are compiled (each takes a fraction of a second)."""
RUN_ELEMENTS = 1 << 22
"""Inputs larger than this are not run: a mutant may declare a static shape of any size."""


def _raises(error_type: type[Exception], *fragments: str) -> Any:
    """pytest.raises for ``error_type`` whose message holds every fragment (literal text)."""
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


def _outcome(action: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result), ("refused", the inferplex error) or ("escaped", any other exception)."""
    try:
        return "ok", action()
    except InferplexError as error:
        return "refused", error
    except Exception as error:  # noqa: BLE001 - what the fuzz tests look for
        return "escaped", error


def _describe(mutant: Mutant, index: int, error: BaseException) -> str:
    kind = f"{type(error).__module__}.{type(error).__name__}"
    return f"#{index} {mutant.seed} {mutant.kind}: {kind}: {error}"[:300]


def _compile_and_run(core: ov.Core, model: ov.Model, run: bool = True) -> None:
    compiled = core.compile_model(model, "CPU")
    ports = model.inputs
    if not run or not all(p.is_tensor and not p.is_dynamic and p.element_type.is_static() for p in ports):
        return
    if any(np.prod(p.shape, dtype=np.float64) > RUN_ELEMENTS for p in ports):
        return
    compiled({p.any_name: np.zeros(p.shape, p.element_type.to_dtype()) for p in ports})


@pytest.fixture(scope="module")
def byte_mutant_reads(core: ov.Core, tmp_path_factory: pytest.TempPathFactory
                      ) -> list[tuple[Mutant, str, Any]]:
    """Every byte mutant read from bytes (each tenth also from a file): (mutant, outcome, result)."""
    folder = tmp_path_factory.mktemp("mutants")
    results = []
    for index, mutant in enumerate(mutants(BYTE_MUTANTS, seed=0)):
        kind, result = _outcome(lambda m=mutant: core.read_model(m.data))
        if index % 10 == 0 and kind != "escaped":
            path = folder / f"mutant{index}.onnx"
            path.write_bytes(mutant.data)
            kind, result = _outcome(lambda p=path: core.read_model(p))
        results.append((mutant, kind, result))
    return results


# --- fuzzing ------------------------------------------------------------------------------------------


def test_byte_mutants_are_read_or_refused_with_a_model_error(
        byte_mutant_reads: list[tuple[Mutant, str, Any]]) -> None:
    escaped = [_describe(m, i, r) for i, (m, kind, r) in enumerate(byte_mutant_reads) if kind == "escaped"]
    assert not escaped, f"{len(escaped)} mutants escaped:\n" + "\n".join(escaped[:20])
    refused = [r for _, kind, r in byte_mutant_reads if kind == "refused"]
    assert all(isinstance(error, ModelError) and str(error) for error in refused)
    read = sum(kind == "ok" for _, kind, _ in byte_mutant_reads)
    assert refused and read  # the mutants reach both ends


def test_light_mutants_that_read_compile_and_run_or_fail_cleanly(
        core: ov.Core, byte_mutant_reads: list[tuple[Mutant, str, Any]]) -> None:
    chosen = [(m, model) for m, kind, model in byte_mutant_reads if kind == "ok"][:LIGHT_COMPILES]
    assert len(chosen) == LIGHT_COMPILES
    escaped = []
    for index, (mutant, model) in enumerate(chosen):
        slow = mutant.seed in ("light_vgg19", "light_inception_v1")  # seconds per run on two cores
        kind, error = _outcome(lambda: _compile_and_run(core, model, run=not slow))  # noqa: B023
        if kind == "escaped":
            escaped.append(_describe(mutant, index, error))
    assert not escaped, "\n".join(escaped)


def test_field_mutants_are_read_compiled_and_run_or_refused_cleanly(core: ov.Core) -> None:
    escaped, compiled = [], 0
    for index, mutant in enumerate(field_mutants(FIELD_MUTANTS, seed=0)):
        kind, result = _outcome(lambda m=mutant: core.read_model(m.data))
        if kind == "ok":
            kind, result = _outcome(lambda model=result: _compile_and_run(core, model))
            compiled += 1
        if kind == "escaped":
            escaped.append(_describe(mutant, index, result))
    assert not escaped, f"{len(escaped)} mutants escaped:\n" + "\n".join(escaped[:20])
    assert compiled >= FIELD_MUTANTS // 10


def test_mutants_are_the_same_for_one_seed() -> None:
    first = [m.data for m in mutants(50, seed=7)] + [m.data for m in field_mutants(20, seed=7)]
    again = [m.data for m in mutants(50, seed=7)] + [m.data for m in field_mutants(20, seed=7)]
    assert first == again
    assert first != [m.data for m in mutants(50, seed=8)] + [m.data for m in field_mutants(20, seed=8)]


# --- crafted cases: types and names ------------------------------------------------------------------


def _add_model() -> onnx.ModelProto:
    """y = x + w, x and w f32 [2, 3], the node named 'adder', the graph 'tiny'."""
    weights = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    return make_model([helper.make_node("Add", ["x", "w"], ["y"], name="adder")],
                      [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])], [weights])


def _set_initializer_type(model: onnx.ModelProto) -> str:
    model.graph.initializer[0].data_type = 99
    return "tensor 'w' (graph.initializer[0]) has element type 99"


def _set_input_type(model: onnx.ModelProto) -> str:
    model.graph.input[0].type.tensor_type.elem_type = 99
    return "graph.input[0].type.tensor_type.elem_type is 99"


def _set_value_info_type(model: onnx.ModelProto) -> str:
    model.graph.value_info.append(helper.make_tensor_value_info("y", 99, [2, 3]))
    return "graph.value_info[0].type.tensor_type.elem_type is 99"


def _set_constant_type(model: onnx.ModelProto) -> str:
    value = numpy_helper.from_array(np.ones((2, 3), np.float32), "w_value")
    value.data_type = 99
    model.graph.initializer.pop()
    model.graph.node.insert(0, helper.make_node("Constant", [], ["w"], name="const", value=value))
    return "tensor 'w_value' (graph.node[0].attribute[0].t) has element type 99"


@pytest.mark.parametrize("edit", [_set_initializer_type, _set_input_type, _set_value_info_type,
                                  _set_constant_type])
def test_unknown_element_type_is_refused(core: ov.Core, edit: Callable[[onnx.ModelProto], str]) -> None:
    model = _add_model()
    where = edit(model)
    with _raises(ModelError, where, "not one of onnx.TensorProto.DataType", "read_model accepts"):
        core.read_model(model.SerializeToString())


def test_negative_dim_in_an_input_type_is_refused(core: ov.Core) -> None:
    model = _add_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -3
    with _raises(ModelError, "graph.input[0].type.tensor_type.shape.dim[0] is -3", "dims >= 0"):
        core.read_model(model)


def _with_bad_text(model: onnx.ModelProto, text: bytes) -> bytes:
    """The model's bytes with every ``text`` replaced by as many bytes that are not UTF-8."""
    data = model.SerializeToString()
    assert text in data
    return data.replace(text, b"\xff\xfe" + text[2:])


@pytest.mark.parametrize(("text", "where"), [(b"adder", "graph.node[0].name"),
                                             (b"tiny", "graph.name"),
                                             (b"xx_in", "graph.input[0].name")])
def test_names_that_are_not_utf8_are_refused(core: ov.Core, text: bytes, where: str) -> None:
    model = make_model([helper.make_node("Relu", ["xx_in"], ["y"], name="adder")],
                       [("xx_in", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])])
    with _raises(ModelError, where, "is not UTF-8 text", "\\xff\\xfe", "read_model accepts UTF-8 text"):
        core.read_model(_with_bad_text(model, text))


def test_duplicate_graph_output_names_are_refused(core: ov.Core) -> None:
    model = _add_model()
    model.graph.output.append(model.graph.output[0])
    with _raises(ModelError, "graph lists the outputs 'y' more than once", "unique graph input and output"):
        core.read_model(model)


def test_two_nodes_writing_one_value_are_refused(core: ov.Core) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="a"),
                        helper.make_node("Neg", ["x"], ["z"], name="b")],
                       [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3]), ("z", FLOAT, [2, 3])])
    model.graph.node[1].output[0] = "y"
    model.graph.output.pop()
    with _raises(ModelError, "single static assignment", "'y'", "onnx.checker"):
        core.read_model(model)


def test_a_subgraph_reading_an_undefined_value_is_refused(core: ov.Core) -> None:
    branch = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["b"], name="inner")], "branch",
                               [], [helper.make_tensor_value_info("b", FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch, else_branch=branch)],
        "outer", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with _raises(ModelError, "malformed", "'nowhere'", "onnx.checker"):
        core.read_model(model)


# --- crafted cases: sizes and nesting -------------------------------------------------------------------


def _nested_model(depth: int) -> onnx.ModelProto:
    """If nodes nested ``depth`` graphs deep, built in place (protobuf's parser never sees it)."""
    model = onnx.ModelProto(ir_version=8)
    model.opset_import.add(version=17)
    graph = model.graph
    graph.name = "main"
    graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    graph.output.append(helper.make_tensor_value_info("o", TensorProto.BOOL, []))
    for level in range(depth):
        node = graph.node.add(op_type="If", input=["c"], output=["o"], name=f"if{level}")
        other = node.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH)
        other.g.name = f"else{level}"
        other.g.node.add().CopyFrom(helper.make_node("Identity", ["c"], ["o"]))
        other.g.output.append(helper.make_tensor_value_info("o", TensorProto.BOOL, []))
        graph = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH).g
        graph.name = f"then{level}"
        graph.output.append(helper.make_tensor_value_info("o", TensorProto.BOOL, []))
    graph.node.add().CopyFrom(helper.make_node("Identity", ["c"], ["o"]))
    return model


def test_deeply_nested_subgraphs_are_refused(core: ov.Core) -> None:
    model = _nested_model(300)
    with _raises(ModelError, "is a subgraph nested 41 levels deep", "at most 40"):
        core.read_model(model)
    with _raises(ModelError, "the given bytes is not a readable ONNX model"):  # past protobuf's limit
        core.read_model(model.SerializeToString())


def test_subgraphs_nested_as_deep_as_a_file_can_hold_are_read(core: ov.Core) -> None:
    model = core.read_model(_nested_model(30).SerializeToString())
    assert [op.get_type_name() for op in model.get_ops()] == ["If"]


def test_huge_declared_dims_of_a_weight_are_refused(core: ov.Core) -> None:
    model = _add_model()
    model.graph.initializer[0].dims[:] = [1 << 40, 1 << 40]
    with _raises(ModelError, "'w'", "24 bytes", "[1099511627776, 1099511627776]", "bytes required"):
        core.read_model(model)


def test_empty_bytes_are_refused(core: ov.Core) -> None:
    with _raises(ModelError, "empty graph"):
        core.read_model(b"")


def test_a_text_file_is_refused(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("graph { node { op_type: 'Relu' } }\n")
    with _raises(ModelError, str(path), "not a readable ONNX model"):
        core.read_model(path)


def test_a_directory_and_a_missing_file_are_refused(core: ov.Core, tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "absent.onnx"):
        with _raises(ModelError, str(path), "does not exist or is not a file", "path to an .onnx file"):
            core.compile_model(path, "CPU")


# --- crafted cases: external data ----------------------------------------------------------------------


def _external_model(folder: Path, **entries: str) -> Path:
    """model.onnx in ``folder`` with its weight 'w' (24 bytes) in weights.bin; ``entries`` replace keys."""
    model = _add_model()
    onnx.external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    onnx.save_model(model, folder / "model.onnx")
    tensor = model.graph.initializer[0]
    stored = {e.key: e.value for e in tensor.external_data} | entries
    del tensor.external_data[:]
    for key, value in stored.items():
        tensor.external_data.add(key=key, value=value)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())  # onnx.save_model refuses some of these
    return path


def test_external_data_next_to_the_model_reads_and_runs(core: ov.Core, tmp_path: Path) -> None:
    compiled = core.compile_model(_external_model(tmp_path), "CPU")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(compiled({"x": x})[0], x + 1)


@pytest.mark.parametrize(("key", "value"), [("offset", "-1"), ("length", "-24"), ("offset", "ten")])
def test_negative_or_unreadable_offset_and_length_are_refused(core: ov.Core, tmp_path: Path,
                                                              key: str, value: str) -> None:
    path = _external_model(tmp_path, **{key: value})
    with _raises(ModelError, "external data refused", f"'w' -> 'weights.bin': {key} {value!r}",
                 "is not a non-negative integer"):
        core.read_model(path)


def test_external_data_past_the_end_of_its_file_is_refused(core: ov.Core, tmp_path: Path) -> None:
    with _raises(ModelError, "offset 16 + length 24 passes the file's end (24 bytes)"):
        core.read_model(_external_model(tmp_path, offset="16", length="24"))


def test_external_data_too_short_for_its_tensor_is_refused(core: ov.Core, tmp_path: Path) -> None:
    with _raises(ModelError, "8 bytes stored, too few for the tensor (24 bytes required)"):
        core.read_model(_external_model(tmp_path, length="8"))


def test_a_nul_byte_in_a_location_is_refused(core: ov.Core, tmp_path: Path) -> None:
    with _raises(ModelError, "'w' -> 'weights.bin\\x00.txt': a location may not hold a NUL character"):
        core.read_model(_external_model(tmp_path, location="weights.bin\0.txt"))


@pytest.mark.parametrize("location", ["", "missing.bin", "."])
def test_a_location_naming_no_file_is_refused(core: ov.Core, tmp_path: Path, location: str) -> None:
    with _raises(ModelError, "external data refused", "'w' ->"):
        core.read_model(_external_model(tmp_path, location=location))


@pytest.mark.parametrize("location", ["/etc/hostname", "../outside.bin"])
def test_a_location_outside_the_folder_is_refused(core: ov.Core, tmp_path: Path, location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(bytes(24))
    with _raises(ModelError, f"'w' -> {location!r} (outside the model's folder)",
                 "keep external data files next to the model"):
        core.read_model(_external_model(folder, location=location))


def test_a_symlink_leaving_the_folder_is_refused(core: ov.Core, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(np.ones(6, np.float32).tobytes())
    (folder / "link.bin").symlink_to(tmp_path / "outside.bin")
    with _raises(ModelError, "'w' -> 'link.bin' (outside the model's folder)"):
        core.read_model(_external_model(folder, location="link.bin"))


# --- crafted cases: onnx_ir.Model sources --------------------------------------------------------------


def test_an_ir_model_with_an_undefined_value_is_refused(core: ov.Core) -> None:
    model = ir.serde.deserialize_model(_add_model())
    ghost = ir.Value(name="ghost", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3]))
    model.graph.node(0).replace_input_with(1, ghost)
    with _raises(ModelError, "malformed", "'ghost'", "onnx.checker"):
        core.read_model(model)


def test_an_ir_model_with_external_data_outside_its_folder_is_refused(core: ov.Core, tmp_path: Path) -> None:
    (tmp_path / "outside.bin").write_bytes(np.ones(6, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    model = ir.serde.deserialize_model(_add_model())
    weight = model.graph.initializers["w"]
    weight.const_value = ir.ExternalTensor("../outside.bin", 0, 24, ir.DataType.FLOAT,
                                           shape=ir.Shape([2, 3]), name="w", base_dir=folder)
    with _raises(ModelError, "'w' -> '../outside.bin' (outside the model's folder)"):
        core.read_model(model)


def test_an_ir_model_that_cannot_be_written_as_onnx_is_refused(core: ov.Core) -> None:
    model = ir.serde.deserialize_model(built_model())
    model.graph.node(0).name = b"\xff\xfe"  # type: ignore[assignment]
    with _raises(ModelError, "onnx_ir.Model", "cannot be written as ONNX"):
        core.read_model(model)


@pytest.mark.parametrize("where", ["initializer", "Constant value", "If branch Constant"])
@pytest.mark.parametrize("change", [4, -4], ids=["too many bytes", "too few bytes"])
def test_raw_data_that_does_not_fill_its_shape_exactly_is_refused(core: ov.Core, where: str,
                                                                   change: int) -> None:
    """ONNX Runtime refuses both ("raw_data size does not match"); the checker lets too many
    through, and a device's supported_nodes then failed reshaping the value (a raw ValueError)."""
    weights = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    constant = helper.make_node("Constant", [], ["w"], name="weights", value=weights)
    if where == "initializer":
        model = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                           [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])], [weights])
        stored = model.graph.initializer[0]
    elif where == "Constant value":
        model = make_model([constant, helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                           [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])])
        stored = model.graph.node[0].attribute[0].t
    else:
        out = helper.make_tensor_value_info("w", FLOAT, [2, 3])
        branch = helper.make_graph([constant], "branch", [], [out])
        model = make_model([helper.make_node("If", ["flag"], ["y"], name="choose", then_branch=branch,
                                             else_branch=branch)],
                           [("flag", TensorProto.BOOL, [])], [("y", FLOAT, [2, 3])])
        stored = model.graph.node[0].attribute[0].g.node[0].attribute[0].t
    raw = stored.raw_data
    stored.raw_data = raw + b"\0" * change if change > 0 else raw[:change]
    with pytest.raises(ModelError, match=rf"'w'.* holds {24 + change} bytes of raw_data, too "
                                         rf"{'many' if change > 0 else 'few'}.*24 bytes required"):
        core.read_model(model.SerializeToString())
    refused = (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.InvalidGraph)
    with pytest.raises(refused, match="size"):  # the reference refuses it too
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
