"""Sub-byte element types (int4, uint4) through an InferRequest on the CPU's OpenVINO engine.

Inputs of such types reach OpenVINO packed, as its ``Tensor`` holds them; output
tensors of such types that a program sets or keeps (``set_output_tensor``,
``set_tensor`` by name, ``get_output_tensor``) receive the results packed, as
OpenVINO writes them.  Values are checked against ONNX Runtime on the whole
model (its Python API takes no int4 arrays, so the inputs are folded into the
model as constants, and sub-byte outputs cast to float32 at its end); the packed
bytes of an output tensor against raw OpenVINO's.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

from conftest import make_model

openvino = pytest.importorskip("openvino")

SUB_BYTE = {TensorProto.INT4: ml_dtypes.int4, TensorProto.UINT4: ml_dtypes.uint4}
SHAPE = [3, 3]  # nine elements: the last byte of a 4-bit tensor holds one


def _cast_from(elem: int) -> onnx.ModelProto:
    """y = float(x), x of a sub-byte type."""
    return make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                      [("x", elem, SHAPE)], [("y", TensorProto.FLOAT, SHAPE)], opset=21)


def _dequantize_uint4() -> onnx.ModelProto:
    """y = (x - 3) * 0.5, x uint4."""
    initializers = [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
                    numpy_helper.from_array(np.array(3, ml_dtypes.uint4), "z")]
    return make_model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
                      [("x", TensorProto.UINT4, SHAPE)], [("y", TensorProto.FLOAT, SHAPE)],
                      initializers, opset=21)


def _cast_to(elem: int) -> onnx.ModelProto:
    """y = x cast to a sub-byte type, x float32."""
    return make_model([helper.make_node("Cast", ["x"], ["y"], to=elem)],
                      [("x", TensorProto.FLOAT, SHAPE)], [("y", elem, SHAPE)], opset=21)


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """ONNX Runtime's first output, with ``feeds`` folded in as constants and a sub-byte output
    read as float32."""
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph = folded.graph
    constants = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
                 for name, value in feeds.items()]
    kept = [i for i in graph.input if i.name not in feeds]
    del graph.input[:]
    graph.input.extend(kept)
    nodes = constants + list(graph.node)
    output = graph.output[0]
    if output.type.tensor_type.elem_type in SUB_BYTE:
        nodes.append(helper.make_node("Cast", [output.name], ["as_float"], to=TensorProto.FLOAT))
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info("as_float", TensorProto.FLOAT, SHAPE))
    del graph.node[:]
    graph.node.extend(nodes)
    session = ort.InferenceSession(folded.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {})[0]


def _nibbles(data: np.ndarray) -> np.ndarray:
    """The 4-bit codes in packed bytes, first in each byte's low bits, less the last byte's unused
    half (which OpenVINO leaves undefined)."""
    flat = np.asarray(data).view(np.uint8).reshape(-1)
    return np.stack([flat & 15, flat >> 4], axis=-1).reshape(-1)[: int(np.prod(SHAPE))]


def _raw_openvino_codes(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The 4-bit codes raw OpenVINO writes into an output tensor of the model's output type."""
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU")
    request = compiled.create_infer_request()
    tensor = openvino.Tensor(compiled.outputs[0].get_element_type(), SHAPE)
    request.set_output_tensor(tensor)
    request.infer({0: x})
    return _nibbles(tensor.data)


def _request(model: onnx.ModelProto) -> ov.InferRequest:
    compiled = ov.Core().compile_model(model, "CPU")
    assert compiled.get_property("ENGINE") == "OPENVINO"
    return compiled.create_infer_request()


def _values(elem: int, seed: int) -> np.ndarray:
    low, high = (-8, 8) if elem == TensorProto.INT4 else (0, 16)
    return np.random.default_rng(seed).integers(low, high, SHAPE).astype(SUB_BYTE[elem])


MODELS = {"int4-cast": (TensorProto.INT4, lambda: _cast_from(TensorProto.INT4)),
          "uint4-cast": (TensorProto.UINT4, lambda: _cast_from(TensorProto.UINT4)),
          "uint4-dequantize": (TensorProto.UINT4, _dequantize_uint4)}


@pytest.mark.parametrize("case", sorted(MODELS))
@pytest.mark.parametrize("form", ["array", "shared-array", "tensor"])
def test_sub_byte_input_runs_on_openvino(case: str, form: str) -> None:
    elem, build = MODELS[case]
    model = build()
    request = _request(model)
    x = _values(elem, seed=1)
    expected_type = ov.Type.i4 if elem == TensorProto.INT4 else ov.Type.u4
    assert request.get_compiled_model().inputs[0].get_element_type() == expected_type
    given = ov.Tensor(x) if form == "tensor" else x
    result = request.infer({"x": given}, share_inputs=form == "shared-array")
    np.testing.assert_array_equal(result[0], _reference(model, {"x": x}))


@pytest.mark.parametrize("case", sorted(MODELS))
def test_packed_bytes_written_into_the_input_tensor_are_what_runs(case: str) -> None:
    elem, build = MODELS[case]
    model = build()
    request = _request(model)
    tensor = request.get_input_tensor()
    x = _values(elem, seed=2)
    tensor.data[:] = ov.Tensor(x).data  # OpenVINO's programs write the packed bytes
    np.testing.assert_array_equal(request.infer()[0], _reference(model, {"x": x}))


@pytest.mark.parametrize("case", sorted(MODELS))
def test_values_given_later_are_packed_into_the_input_tensor_held(case: str) -> None:
    elem, build = MODELS[case]
    model = build()
    request = _request(model)
    handed_out = request.get_input_tensor()
    first = _values(elem, seed=3)
    request.infer({0: first})
    np.testing.assert_array_equal(np.asarray(handed_out), first)
    mine = ov.Tensor(ov.Type.i4 if elem == TensorProto.INT4 else ov.Type.u4, SHAPE)
    request.set_input_tensor(mine)
    second = _values(elem, seed=4)
    result = request.infer({0: second})  # share_inputs=False: copied into the tensor set
    np.testing.assert_array_equal(np.asarray(mine), second)
    np.testing.assert_array_equal(result[0], _reference(model, {"x": second}))
    np.testing.assert_array_equal(request.infer()[0], _reference(model, {"x": second}))


OUT_TYPES = {"i4": (TensorProto.INT4, ov.Type.i4), "u4": (TensorProto.UINT4, ov.Type.u4)}


def _float_input(elem: int, seed: int) -> np.ndarray:
    return _values(elem, seed).astype(np.float32)


@pytest.mark.parametrize("out", sorted(OUT_TYPES))
@pytest.mark.parametrize("how", ["set_output_tensor", "set_tensor", "set_output_tensors"])
def test_sub_byte_output_is_written_packed_into_the_tensor_set(out: str, how: str) -> None:
    elem, element_type = OUT_TYPES[out]
    model = _cast_to(elem)
    request = _request(model)
    tensor = ov.Tensor(element_type, SHAPE)
    if how == "set_output_tensor":
        request.set_output_tensor(tensor)
    elif how == "set_tensor":
        request.set_tensor("y", tensor)
    else:
        request.set_output_tensors({0: tensor})
    for seed in (5, 6):  # every run writes into the same tensor
        x = _float_input(elem, seed)
        request.infer({0: x})
        assert request.get_output_tensor() is tensor
        np.testing.assert_array_equal(np.asarray(tensor).astype(np.float32), _reference(model, {"x": x}))
        np.testing.assert_array_equal(_nibbles(tensor.data), _raw_openvino_codes(model, x))


@pytest.mark.parametrize("out", sorted(OUT_TYPES))
def test_handed_out_sub_byte_output_tensor_receives_later_results(out: str) -> None:
    elem, element_type = OUT_TYPES[out]
    model = _cast_to(elem)
    request = _request(model)
    request.infer({0: _float_input(elem, 7)})
    kept = request.get_output_tensor()
    assert kept.get_element_type() == element_type
    x = _float_input(elem, 8)
    request.infer({0: x})
    np.testing.assert_array_equal(np.asarray(kept).astype(np.float32), _reference(model, {"x": x}))
    np.testing.assert_array_equal(_nibbles(kept.data), _raw_openvino_codes(model, x))


def test_sub_byte_output_tensor_of_another_shape_takes_the_result_shape() -> None:
    model = _cast_to(TensorProto.UINT4)
    request = _request(model)
    tensor = ov.Tensor(ov.Type.u4, [12])
    request.set_output_tensor(tensor)
    x = _float_input(TensorProto.UINT4, 9)
    request.infer({0: x})
    assert list(tensor.shape) == SHAPE
    assert tensor.byte_size == 5
    np.testing.assert_array_equal(np.asarray(tensor).astype(np.float32), _reference(model, {"x": x}))


def test_program_imported_from_the_model_cache_packs_too(tmp_path: object) -> None:
    model = _cast_to(TensorProto.INT4)
    x = _float_input(TensorProto.INT4, 10)
    for loaded in (False, True):  # compiled, then OpenVINO's blob imported from the cache
        core = ov.Core()
        core.set_property({"CACHE_DIR": str(tmp_path)})
        compiled = core.compile_model(model, "CPU")
        assert compiled.get_property("LOADED_FROM_CACHE") is loaded
        request = compiled.create_infer_request()
        tensor = ov.Tensor(ov.Type.i4, SHAPE)
        request.set_output_tensor(tensor)
        request.infer({0: x})
        np.testing.assert_array_equal(np.asarray(tensor).astype(np.float32), _reference(model, {"x": x}))
