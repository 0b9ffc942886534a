"""The Model API around a graph: nodes and ports, names, clone, saving (fp16), convert_model,
read_model's sources and config, ov.compile_model and ov.get_version.

Results are checked against ONNX Runtime on the same model.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError, ModelError, PropertyError

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(11)
W = RNG.standard_normal((16, 8)).astype(np.float32)


def _mlp() -> onnx.ModelProto:
    """x f32 [N,16] -> MatMul W -> Relu -> y; and x -> Sigmoid -> z (two outputs)."""
    return make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="act"),
         helper.make_node("Sigmoid", ["x"], ["z"], name="gate")],
        [("x", FLOAT, ["N", 16])], [("y", FLOAT, ["N", 8]), ("z", FLOAT, ["N", 16])],
        [numpy_helper.from_array(W, "w")], name="mlp")


def _x(batch: int = 3) -> np.ndarray:
    return RNG.standard_normal((batch, 16)).astype(np.float32)


# --- nodes, ports and names ----------------------------------------------------------------------


def test_parameters_results_and_ordered_ops() -> None:
    model = ov.Core().read_model(_mlp())
    params, results = model.get_parameters(), model.get_results()
    assert [p.get_type_name() for p in params] == ["Parameter"]
    assert [p.get_friendly_name() for p in params] == ["x"]
    assert params[0].get_partial_shape() == ov.PartialShape("?,16")
    assert model.input().dims == ("N", 16)  # inferplex keeps the ONNX symbol
    assert params[0].get_element_type() == ov.Type.f32
    assert [r.get_type_name() for r in results] == ["Result", "Result"]
    assert model.get_output_size() == 2 == len(model.outputs)
    ordered = model.get_ordered_ops()
    types = [o.get_type_name() for o in ordered]
    assert types[0] == "Parameter" and types[-2:] == ["Result", "Result"]
    inner = [o.get_friendly_name() for o in ordered[1:-2]]
    constants = [o.get_friendly_name() for o in ordered if o.get_type_name() == "Constant"]
    assert constants == ["w"]  # the initializer, as OpenVINO lists a weight
    assert sorted(set(inner) - {"w"}) == sorted(o.get_friendly_name() for o in model.get_ops())
    assert inner.index("w") < inner.index("mm") < inner.index("act")


def test_input_and_output_by_index_name_and_port() -> None:
    model = ov.Core().read_model(_mlp())
    assert model.input() == model.input(0) == model.input("x") == model.input(model.inputs[0])
    assert model.output(1).any_name == "z" and model.output("y").index == 0
    assert model.output(model.outputs[1]).any_name == "z"
    assert model.input().get_node().get_type_name() == "Parameter"
    with pytest.raises(InputError, match="no output named 'q'"):
        model.output("q")


def test_friendly_name_and_model_name_property() -> None:
    core = ov.Core()
    model = core.read_model(_mlp())
    assert model.get_friendly_name() == "mlp"
    model.set_friendly_name("renamed")
    assert model.get_friendly_name() == "renamed" == model.friendly_name
    assert core.compile_model(model, "CPU").get_property("MODEL_NAME") == "renamed"
    param = model.get_parameters()[0]
    param.set_friendly_name("pixels")  # the display name; the input is still fed as "x"
    assert param.get_friendly_name() == "pixels" and model.input().any_name == "x"


def test_clone_is_independent() -> None:
    model = ov.Core().read_model(_mlp())
    copy = model.clone()
    copy.reshape([2, 16])
    assert copy.input().shape == (2, 16)
    assert model.input().partial_shape == ov.PartialShape("?,16") and model.input().dims == ("N", 16)
    assert model.is_dynamic() and not copy.is_dynamic()
    assert copy.get_friendly_name() == model.get_friendly_name()


def test_parameter_view_sets_the_models_input_shape() -> None:
    model = ov.Core().read_model(_mlp())
    model.get_parameters()[0].set_partial_shape([4, 16])
    assert model.input().shape == (4, 16)


def test_port_tensor_describes_names_type_shape_and_bytes() -> None:
    model = ov.Core().read_model(_mlp())
    described = model.input().tensor  # OpenVINO's DescriptorTensor; get_tensor() is the same
    assert described.any_name == "x" == model.input().get_tensor().get_any_name()
    assert described.names == {"x"} and described.element_type == ov.Type.f32
    assert described.partial_shape == ov.PartialShape("?,16")
    with pytest.raises(InputError, match="dynamic shape"):
        _ = described.size  # OpenVINO's size needs a static shape too
    model.reshape([3, 16])
    assert described.shape == ov.Shape([3, 16])  # a view: it follows the reshape
    assert described.size == 3 * 16 * 4  # bytes, as OpenVINO's (f32 [1, 1, 1, 1]: 4)
    compiled = ov.Core().compile_model(model, "CPU")
    assert compiled.outputs[1].tensor.size == 3 * 16 * 4 and compiled.output(0).tensor.shape == [3, 8]
    nibbles = ov.opset.parameter([3], ov.Type.u4, name="q")
    assert nibbles.output(0).tensor.size == 2  # sub-byte types round up: 3 x 4 bits


# --- saving and converting -----------------------------------------------------------------------


def test_save_model_compresses_weights_to_fp16_by_default(tmp_path: Path) -> None:
    core = ov.Core()
    big = RNG.standard_normal((256, 256)).astype(np.float32)
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", FLOAT, ["N", 256])],
                       [("y", FLOAT, ["N", 256])], [numpy_helper.from_array(big, "w")])
    model = core.read_model(proto)
    ov.save_model(model, tmp_path / "half.onnx")
    ov.save_model(model, tmp_path / "full.onnx", compress_to_fp16=False)
    half, full = (tmp_path / "half.onnx").stat().st_size, (tmp_path / "full.onnx").stat().st_size
    assert half < 0.6 * full
    x = RNG.standard_normal((2, 256)).astype(np.float32)
    (want,) = ort_run(proto, {"x": x})
    reread = core.read_model(tmp_path / "half.onnx")
    assert reread.input().element_type == ov.Type.f32 == reread.output().element_type
    np.testing.assert_allclose(core.compile_model(reread, "CPU")(x)[0], want, rtol=1e-2, atol=2e-2)
    np.testing.assert_allclose(core.compile_model(tmp_path / "full.onnx", "CPU")(x)[0], want,
                               rtol=1e-5, atol=1e-5)
    assert model.ir.graph.initializers["w"].const_value.dtype.name == "FLOAT"  # memory untouched


def test_save_model_keeps_weights_out_of_fp16_range(tmp_path: Path) -> None:
    huge = np.full((32,), 1e6, np.float32)
    proto = make_model([helper.make_node("Add", ["x", "b"], ["y"])], [("x", FLOAT, [32])],
                       [("y", FLOAT, [32])], [numpy_helper.from_array(huge, "b")])
    ov.save_model(ov.Core().read_model(proto), tmp_path / "m.onnx")
    x = np.ones(32, np.float32)
    np.testing.assert_array_equal(ov.compile_model(tmp_path / "m.onnx", "CPU")(x)[0], x + huge)


def test_convert_model_reads_onnx_in_every_form(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp(), path)
    x = _x()
    want = ort_run(_mlp(), {"x": x})
    for source in (str(path), path, _mlp(), path.read_bytes(), io.BytesIO(path.read_bytes())):
        model = ov.convert_model(source)
        assert isinstance(model, ov.Model)
        got = ov.compile_model(model, "CPU")(x)
        np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("given", [[5, 16], {"x": [5, 16]}, [("x", [5, 16])], [[5, 16]], "5,16"])
def test_convert_model_input_shapes(given: object) -> None:
    assert ov.convert_model(_mlp(), input=given).input().shape == (5, 16)


def test_convert_model_refuses_what_is_not_onnx() -> None:
    with pytest.raises(ModelError, match=r"export it to ONNX"):
        ov.convert_model(object())
    with pytest.raises(InputError, match="extension"):
        ov.convert_model(_mlp(), extension="ops.so")
    # example_input is for PyTorch models; OpenVINO does not use it for ONNX, nor does inferplex
    model = ov.convert_model(_mlp(), example_input=np.zeros((1, 16)))
    assert model.input().get_partial_shape() == ov.PartialShape("?,16")


# --- read_model, compile_model, get_version ------------------------------------------------------


def test_read_model_sources_and_config(tmp_path: Path) -> None:
    core = ov.Core()
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp(), path)
    with open(path, "rb") as handle:
        from_file = core.read_model(handle)
    models = [core.read_model(path), core.read_model(path.read_bytes()),
              core.read_model(io.BytesIO(path.read_bytes())), from_file,
              core.read_model(str(path), config={"ENABLE_MMAP": False})]
    assert all([p.any_name for p in m.inputs] == ["x"] for m in models)
    with pytest.raises(PropertyError, match=r"unknown read_model option 'NUM_STREAMS'.*ENABLE_MMAP"):
        core.read_model(path, config={"NUM_STREAMS": 2})
    with pytest.raises(PropertyError, match="ENABLE_MMAP: value 'sometimes'"):
        core.read_model(path, config={"ENABLE_MMAP": "sometimes"})
    with open(path) as text, pytest.raises(ModelError, match="binary mode"):
        core.read_model(text)


def test_module_level_compile_model_and_version() -> None:
    x = _x(2)
    compiled = ov.compile_model(ov.Core().read_model(_mlp()), "CPU")
    np.testing.assert_allclose(compiled(x)["z"], ort_run(_mlp(), {"x": x})[1], rtol=1e-5, atol=1e-6)
    assert ov.compile_model(_mlp(), config={"PERFORMANCE_HINT": "LATENCY"})(x)["y"].shape == (2, 8)
    assert ov.get_version() == ov.__version__
