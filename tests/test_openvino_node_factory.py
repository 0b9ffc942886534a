"""``openvino.utils.node_factory.NodeFactory`` on inferplex: ops made by type name, inputs and attributes,
checked against openvino's own NodeFactory on the same calls (type, outputs, shapes, attributes, and the
values of a model built from the op on each library's CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import inferplex
from inferplex.errors import InputError, ModelError
from inferplex.exceptions import UserInputError
from inferplex.utils.node_factory import NodeFactory

openvino = pytest.importorskip("openvino")
reference_factory = pytest.importorskip("openvino.utils.node_factory")


def _factories() -> list[tuple[Any, Any]]:
    return [(inferplex, NodeFactory), (openvino, reference_factory.NodeFactory)]


def test_add_and_topk_by_type_name() -> None:
    seen = []
    for lib, factory_class in _factories():
        ops = lib.opset8
        a, b = ops.parameter([2, 2], np.int8, name="A"), ops.parameter([2, 2], np.int8, name="B")
        factory = factory_class("opset1")
        add = factory.create("Add", factory_class._arguments_as_outputs([a, b]), {})  # noqa: SLF001
        data, k = ops.parameter([2, 10], np.int32, name="D"), ops.constant(np.int32(3), name="K")
        topk = factory.create("TopK", [data, k], {"axis": 1, "mode": "max", "sort": "value"})
        attributes = topk.get_attributes()
        seen.append((add.get_type_name(), str(add.get_output_partial_shape(0)), topk.get_type_name(),
                     topk.get_output_size(), str(topk.get_output_partial_shape(0)),
                     attributes["axis"], attributes["mode"], attributes["sort"]))
    assert seen[0] == seen[1] == ("Add", "[2,2]", "TopK", 2, "[2,3]", 1, "max", "value")


def test_a_made_convolution_runs_as_openvinos() -> None:
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    weight = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    results = []
    for lib, factory_class in _factories():
        ops = lib.opset8
        data = ops.parameter([1, 3, 8, 8], np.float32, name="x")
        node = factory_class("opset8").create(
            "Convolution", [data, ops.constant(weight)],
            {"strides": [2, 2], "pads_begin": [1, 1], "pads_end": [1, 1], "dilations": [1, 1],
             "auto_pad": "explicit"})
        assert node.get_type_name() == "Convolution" and str(node.get_output_partial_shape(0)) == "[1,4,4,4]"
        compiled = lib.Core().compile_model(lib.Model([node], [data]), "CPU",
                                            {"INFERENCE_PRECISION_HINT": "f32"})
        results.append(np.asarray(compiled(x)[0]))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-5)


def test_an_op_made_by_name_alone_is_built_by_validate() -> None:
    ops = inferplex.opset8
    data, k = ops.parameter([2, 10], np.int32, name="D"), ops.constant(np.int32(3), name="K")
    node = NodeFactory("opset1").create("TopK")
    assert node.get_type_name() == "TopK" and node.get_output_size() == 0
    node.set_arguments(NodeFactory._arguments_as_outputs([data, k]))  # noqa: SLF001
    for name, value in (("axis", 1), ("mode", "min"), ("sort", "value")):
        node.set_attribute(name, value)
    node.validate()
    assert node.get_output_size() == 2 and str(node.get_output_partial_shape(0)) == "[2,3]"
    values = np.arange(20, dtype=np.int32).reshape(2, 10)[:, ::-1].copy()
    model = inferplex.Model([node.output(0)], [data])
    got = np.asarray(inferplex.Core().compile_model(model, "CPU")(values)[0])
    np.testing.assert_array_equal(got, [[0, 1, 2], [10, 11, 12]])
    with pytest.raises(InputError, match="attributes are set when it is made"):
        node.set_attribute("axis", 0)


def test_what_a_factory_does_not_make_is_named() -> None:
    factory = NodeFactory("opset8")
    data = inferplex.opset8.parameter([2, 10], np.int32, name="D")
    with pytest.raises(UserInputError, match='cannot create "TopK" op without arguments'):
        factory.create("TopK", None, {"axis": 1})
    with pytest.raises(ModelError, match="cannot make 'Frobnicate'"):
        factory.create("Frobnicate", [data], {})
    with pytest.raises(ModelError, match="ops with bodies"):
        factory.create("Loop", [data], {})
    with pytest.raises(InputError, match="needs the attribute or input 'axis'"):
        factory.create("TopK", [data, inferplex.opset8.constant(np.int32(3))], {"mode": "max"})
    with pytest.raises(InputError, match=r"'opset1' \.\.\. 'opset16'"):
        NodeFactory("opset99")
    with pytest.raises(ModelError, match="no extension libraries"):
        factory.add_extension("libcustom.so")
