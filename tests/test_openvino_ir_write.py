"""``save_model`` and ``serialize`` write OpenVINO IR (.xml with its .bin) for an ``.xml`` path.

Each IR inferplex writes is read by OpenVINO itself and run on OpenVINO's CPU (f32), which must
agree with ONNX Runtime on the source ONNX model (or with inferplex's own run of the model it
saved); inferplex reads the IR back and must agree too, with the names, layouts, rt_info, dynamic
dims and state the saved model had.  What OpenVINO's IR cannot hold is a ModelError that names
it and points to ONNX.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import inferplex as ov
from inferplex import opset8 as ops
from inferplex.errors import ModelError
from inferplex.op.util import Variable, VariableInfo

from conftest import ONNX_BACKEND_DATA, mlp_model, ort_run, transformer_layer_onnx

openvino = pytest.importorskip("openvino")

F16_ATOL = 2e-3
"""Absolute tolerance of outputs from f16-compressed weights (values of order 1)."""


def _openvino_cpu(xml: Path, feeds: dict[str, Any]) -> list[np.ndarray]:
    """OpenVINO's own CPU at f32 on the IR file."""
    compiled = openvino.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    return [results[i] for i in range(len(compiled.outputs))]


def _inferplex_cpu(model: Any, feeds: dict[str, Any]) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(model, "CPU")
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(compiled.outputs))]


def _small_cnn() -> ov.Model:
    """NCHW input of dynamic batch with two names, a named output, a layout and rt_info."""
    rng = np.random.default_rng(5)
    image = ops.parameter([-1, 3, 8, 8], np.float32, name="image")
    image.output(0).get_tensor().set_names({"image", "pixels"})
    conv = ops.convolution(image, ops.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
                           [1, 1], [1, 1], [1, 1], [1, 1], name="conv")
    act = ops.relu(conv, name="act")
    act.output(0).get_tensor().set_names({"features"})
    model = ov.Model([act], [image], "small_cnn")
    ov.layout_helpers.set_layout(model.input(0), ov.Layout("NCHW"))
    model.set_rt_info("tuned", ["framework", "note"])
    model.set_rt_info("7", "revision")
    return model


@pytest.mark.parametrize("compress", [True, False])
def test_save_model_writes_an_ir_openvino_reads_and_runs(tmp_path: Path, compress: bool) -> None:
    model = _small_cnn()
    xml = tmp_path / "new" / "folder" / "cnn.xml"
    ov.save_model(model, xml, compress_to_fp16=compress)
    assert sorted(p.name for p in xml.parent.iterdir()) == ["cnn.bin", "cnn.xml"]
    ov_model = openvino.Core().read_model(str(xml))
    assert ov_model.get_friendly_name() == "small_cnn"
    assert ov_model.input(0).get_names() == {"image", "pixels"}
    assert ov_model.output(0).get_names() == {"features"}
    assert ov_model.input(0).get_partial_shape().to_string() == "[?,3,8,8]"
    assert openvino.layout_helpers.get_layout(ov_model.input(0)).to_string() == "[N,C,H,W]"
    assert ov_model.get_rt_info(["framework", "note"]).astype(str) == "tuned"
    assert ov_model.get_rt_info("revision").astype(str) == "7"
    constants = [n for n in ov_model.get_ordered_ops() if n.get_type_name() == "Constant"]
    assert {str(c.get_element_type()) for c in constants} == ({"<Type: 'float16'>"} if compress
                                                              else {"<Type: 'float32'>"})
    feeds = {"image": np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    expected = _inferplex_cpu(model, feeds)[0]
    np.testing.assert_allclose(_openvino_cpu(xml, feeds)[0], expected, rtol=1e-4,
                               atol=F16_ATOL * 10 if compress else 1e-5)


def test_compressed_weights_halve_the_bin(tmp_path: Path) -> None:
    proto = mlp_model(batch="N")
    model = ov.Core().read_model(proto)
    ov.save_model(model, tmp_path / "half.xml")
    ov.save_model(model, tmp_path / "full.xml", compress_to_fp16=False)
    half, full = (tmp_path / "half.bin").stat().st_size, (tmp_path / "full.bin").stat().st_size
    assert 0.45 * full < half < 0.55 * full


def test_a_model_with_external_weights_saves_as_ir(tmp_path: Path) -> None:
    proto = mlp_model(batch="N")
    source = tmp_path / "external" / "mlp.onnx"
    source.parent.mkdir()
    onnx.save(proto, str(source), save_as_external_data=True, location="mlp.weights", size_threshold=0)
    assert (source.parent / "mlp.weights").is_file()
    xml = tmp_path / "mlp.xml"
    ov.save_model(ov.Core().read_model(source), xml, compress_to_fp16=False)
    feeds = {"x": np.random.default_rng(6).standard_normal((4, 32)).astype(np.float32)}
    expected = ort_run(source, feeds)[0]
    np.testing.assert_allclose(_openvino_cpu(xml, feeds)[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_inferplex_cpu(ov.Core().read_model(xml), feeds)[0], expected,
                               rtol=1e-5, atol=1e-6)


def test_inferplex_reads_back_what_it_wrote(tmp_path: Path) -> None:
    model = _small_cnn()
    xml = tmp_path / "cnn.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    again = ov.Core().read_model(xml)
    assert again.friendly_name == "small_cnn"
    assert again.input(0).get_names() == {"image", "pixels"}
    assert again.output(0).get_names() == {"features"}
    assert again.input(0).get_partial_shape() == ov.PartialShape([-1, 3, 8, 8])
    assert ov.layout_helpers.get_layout(again.input(0)) == ov.Layout("NCHW")
    assert again.get_rt_info(["framework", "note"]) == "tuned"
    assert again.get_rt_info("revision") == "7"
    feeds = {"pixels": np.random.default_rng(2).standard_normal((3, 3, 8, 8)).astype(np.float32)}
    np.testing.assert_allclose(_inferplex_cpu(again, feeds)[0], _inferplex_cpu(model, feeds)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["resnet50", "shufflenet", "inception_v2"])
def test_onnx_models_saved_as_ir_match_onnx_runtime(tmp_path: Path, name: str) -> None:
    source = ONNX_BACKEND_DATA / "light" / f"light_{name}.onnx"
    model = ov.Core().read_model(source)
    xml = tmp_path / f"{name}.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    proto = onnx.load(source, load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    data_input = next(v for v in proto.graph.input if v.name not in initializers)
    dims = tuple(d.dim_value for d in data_input.type.tensor_type.shape.dim)
    size = int(np.prod(dims))
    feeds = {data_input.name: (np.arange(size).reshape(dims) / size).astype(np.float32)}
    expected = ort_run(source, feeds)[0]
    np.testing.assert_allclose(_openvino_cpu(xml, feeds)[0], expected, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(_inferplex_cpu(ov.Core().read_model(xml), feeds)[0], expected,
                               rtol=1e-3, atol=1e-5)


def test_a_transformer_layer_saved_as_ir_matches_onnx_runtime(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    source = transformer_layer_onnx(tmp_path / "layer.onnx")
    xml = tmp_path / "layer.xml"
    ov.save_model(ov.Core().read_model(source), xml, compress_to_fp16=False)
    feeds = {"src": np.random.default_rng(3).standard_normal((3, 5, 32)).astype(np.float32)}
    expected = ort_run(source, feeds)[0]
    np.testing.assert_allclose(_openvino_cpu(xml, feeds)[0], expected, rtol=1e-4, atol=1e-5)
    again = ov.Core().read_model(xml)
    assert again.input(0).get_partial_shape() == ov.PartialShape([-1, 5, 32])
    np.testing.assert_allclose(_inferplex_cpu(again, feeds)[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_quantized_models_saved_as_ir_match_onnx_runtime(tmp_path: Path, kind: str) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    proto = mlp_model(batch="N")
    source, quantized = tmp_path / "mlp.onnx", tmp_path / f"mlp_{kind}.onnx"
    onnx.save(proto, source)
    port = proto.graph.input[0]
    width = port.type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(4)
    if kind == "static":
        batches = iter([{port.name: rng.standard_normal((1, width)).astype(np.float32)} for _ in range(4)])

        class Calibration:
            def get_next(self) -> dict[str, np.ndarray] | None:
                return next(batches, None)

        quantization.quantize_static(str(source), str(quantized), Calibration(),
                                     quant_format=quantization.QuantFormat.QDQ)
    else:
        quantization.quantize_dynamic(str(source), str(quantized))
    xml = tmp_path / f"mlp_{kind}.xml"
    ov.save_model(ov.Core().read_model(quantized), xml)
    feeds = {port.name: rng.standard_normal((3, width)).astype(np.float32)}
    expected = ort_run(quantized, feeds)[0]
    # static: the softmax output is quantized (steps of about 1/255), and a value on a rounding
    # boundary may land a step or two apart; dynamic: float outputs from integer matmuls
    tolerance = 2.02 / 255 if kind == "static" else 1e-3
    np.testing.assert_allclose(_openvino_cpu(xml, feeds)[0], expected, atol=tolerance)
    np.testing.assert_allclose(_inferplex_cpu(ov.Core().read_model(xml), feeds)[0], expected, atol=tolerance)


def _variable(variable_id: str, shape: list[int]) -> Variable:
    info = VariableInfo()
    info.variable_id, info.data_type, info.data_shape = variable_id, ov.Type.f32, ov.PartialShape(shape)
    return Variable(info)


def _stateful() -> ov.Model:
    """``total`` starts at 10 * x and adds x each inference; ``count`` starts at zeros, adds 1."""
    x = ops.parameter([2, 3], np.float32, name="x")
    total = _variable("total", [2, 3])
    read_total = ops.read_value(ops.multiply(x, ops.constant(np.float32(10))), total)
    summed = ops.add(read_total, x, name="summed")
    summed.output(0).get_tensor().set_names({"sum"})
    count = _variable("count", [1])
    read_count = ops.read_value(count)
    read_count.output(0).get_tensor().set_names({"count"})
    sinks = [ops.assign(summed, total),
             ops.assign(ops.add(read_count, ops.constant(np.ones(1, np.float32))), count)]
    return ov.Model([ops.result(summed), ops.result(read_count)], sinks, [x], "stateful")


def _three_runs(request: Any) -> list[tuple[float, float]]:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    runs = []
    for _ in range(3):
        results = request.infer({"x": data})
        runs.append((float(results[0][1, 2]), float(results[1][0])))
    return runs


def test_a_stateful_model_saved_as_ir_keeps_its_variables(tmp_path: Path) -> None:
    model = _stateful()
    xml = tmp_path / "stateful.xml"
    ov.save_model(model, xml)
    expected = [(55.0 + 5.0 * i, float(i)) for i in range(3)]  # x[1, 2] = 5: 10x + x, then + x each run
    ov_model = openvino.Core().read_model(str(xml))
    assert sorted(v.get_info().variable_id for v in ov_model.get_variables()) == ["count", "total"]
    assert sorted(n.get_type_name() for n in ov_model.get_ordered_ops()
                  if n.get_type_name() in ("ReadValue", "Assign")) == ["Assign", "Assign", "ReadValue",
                                                                        "ReadValue"]
    assert _three_runs(openvino.Core().compile_model(ov_model, "CPU").create_infer_request()) == expected
    again = ov.Core().read_model(xml)
    assert _three_runs(ov.Core().compile_model(model, "CPU").create_infer_request()) == expected
    request = ov.Core().compile_model(again, "CPU").create_infer_request()
    assert _three_runs(request) == expected
    assert sorted(state.name for state in request.query_state()) == ["count", "total"]


def test_serialize_writes_ir_with_its_weights_where_asked(tmp_path: Path) -> None:
    model = _small_cnn()
    xml, weights = tmp_path / "a" / "model.xml", tmp_path / "b" / "weights.bin"
    ov.serialize(model, xml, weights)
    assert xml.is_file() and weights.is_file() and not (tmp_path / "a" / "model.bin").exists()
    ov_model = openvino.Core().read_model(str(xml), str(weights))
    constants = [n for n in ov_model.get_ordered_ops() if n.get_type_name() == "Constant"]
    assert all(str(c.get_element_type()) == "<Type: 'float32'>" for c in constants)  # not compressed
    feeds = {"image": np.ones((1, 3, 8, 8), np.float32)}
    np.testing.assert_allclose(_inferplex_cpu(ov.Core().read_model(xml, weights), feeds)[0],
                               _inferplex_cpu(model, feeds)[0], rtol=1e-5, atol=1e-6)
    ov.serialize(model, tmp_path / "c" / "model.xml")
    assert (tmp_path / "c" / "model.bin").is_file()


def test_a_path_not_ending_in_xml_gets_onnx(tmp_path: Path) -> None:
    model = _small_cnn()
    for write, path in ((ov.save_model, tmp_path / "d" / "m.onnx"),
                        (ov.serialize, tmp_path / "e" / "m.onnx")):
        write(model, path)
        assert onnx.load(str(path)).graph.node  # an ONNX file, its folder made
        assert not path.with_suffix(".bin").exists()


def test_ops_openvino_ir_cannot_hold_are_a_model_error_naming_them(tmp_path: Path) -> None:
    graph = oh.make_graph([oh.make_node("Inverse", ["x"], ["y"], domain="com.microsoft")], "inverse",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 2])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])])
    proto = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    model = ov.Core().read_model(proto.SerializeToString())
    xml = tmp_path / "inverse.xml"
    with pytest.raises(ModelError, match=r"com\.microsoft\.Inverse.*\.onnx"):
        ov.save_model(model, xml)
    assert not xml.exists()
    ov.save_model(model, tmp_path / "inverse.onnx")  # ONNX keeps it
    data = np.array([[2.0, 0.0], [0.0, 4.0]], np.float32)
    again = ov.Core().read_model(tmp_path / "inverse.onnx")
    np.testing.assert_allclose(_inferplex_cpu(again, {"x": data})[0], np.linalg.inv(data), rtol=1e-6)


def test_an_unwritable_ir_path_is_a_model_error(tmp_path: Path) -> None:
    (tmp_path / "taken.xml").mkdir()  # a folder where the xml should go
    with pytest.raises(ModelError, match=r"taken\.xml"):
        ov.save_model(_small_cnn(), tmp_path / "taken.xml")
