"""OpenVINO IR (.xml/.bin) read by ``read_model``, ``compile_model`` and ``ov.compile_model``.

The IRs are made by OpenVINO itself (``openvino.save_model(openvino.convert_model(...))``, with
fp16-compressed weights and without) from ONNX models (light backend-test models, a small MLP, a
torch transformer encoder layer) and from graphs built with ``openvino.opset13``.  inferplex's
results are checked against ONNX Runtime on the source ONNX model (or, for graphs built in
OpenVINO, against OpenVINO's CPU), with the names, friendly names, element types, dynamic dims and
layouts the IR gives, and the errors for what cannot be read.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import inferplex as ov
from inferplex.errors import InputTypeError, ModelError

from conftest import ONNX_BACKEND_DATA, mlp_model, ort_run, transformer_layer_onnx

openvino = pytest.importorskip("openvino")
op = pytest.importorskip("openvino.opset13")
op6 = pytest.importorskip("openvino.opset6")
op1 = pytest.importorskip("openvino.opset1")
op3 = pytest.importorskip("openvino.opset3")
op5 = pytest.importorskip("openvino.opset5")
op8 = pytest.importorskip("openvino.opset8")

F16_ATOL = 2e-3
"""Absolute tolerance of outputs from f16-compressed weights (values of order 1)."""


def _to_ir(source: Any, xml: Path, compress: bool) -> Path:
    """``source`` (an ONNX path or an openvino.Model) saved as an IR at ``xml``."""
    model = openvino.convert_model(str(source)) if isinstance(source, Path) else source
    openvino.save_model(model, str(xml), compress_to_fp16=compress)
    return xml


def _openvino_cpu(xml: Path, feeds: dict[str, Any]) -> list[np.ndarray]:
    """OpenVINO's own CPU (f32) on the IR: the reference for graphs built in OpenVINO."""
    compiled = openvino.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(feeds)
    return [results[i] for i in range(len(compiled.outputs))]


def _op_friendly_names(xml: Path) -> set[str]:
    """The friendly names of the IR's ops that compute (not Parameters, Constants and Results)."""
    model = openvino.Core().read_model(str(xml))
    return {node.get_friendly_name() for node in model.get_ordered_ops()
            if node.get_type_name() not in ("Parameter", "Constant", "Result")}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ir")


@pytest.fixture(scope="module")
def mlp(folder: Path) -> Iterator[tuple[Path, onnx.ModelProto]]:
    """The dynamic-batch MLP as ONNX and its IRs (``mlp_f16.xml``, ``mlp_f32.xml``)."""
    proto = mlp_model(batch="N")
    source = folder / "mlp.onnx"
    onnx.save(proto, source)
    for compress, label in ((True, "f16"), (False, "f32")):
        _to_ir(source, folder / f"mlp_{label}.xml", compress)
    yield source, proto


@pytest.fixture(scope="module")
def tiny_cnn(folder: Path) -> Path:
    """A CNN built with openvino.opset13: NCHW input of dynamic batch, named output of two names."""
    rng = np.random.default_rng(3)
    image = op.parameter([-1, 3, 8, 8], np.float32, name="image")
    image.set_layout(openvino.Layout("NCHW"))
    weights = op.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    conv = op.convolution(image, weights, [1, 1], [1, 1], [1, 1], [1, 1], name="conv")
    pool = op.max_pool(op.relu(conv, name="act"), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], name="pool")
    flat = op.reshape(pool.output(0), op.constant(np.array([0, -1])), True, name="flat")
    fc = op.matmul(flat, op.constant(rng.standard_normal((10, 64)).astype(np.float32)), False, True,
                   name="fc")
    probs = op.softmax(fc, -1, name="probs")
    probs.output(0).set_names({"probs", "scores"})
    model = openvino.Model([op.result(probs, name="probs_result")], [image], "tiny_cnn")
    return _to_ir(model, folder / "tiny_cnn.xml", compress=True)


# --- models exported to ONNX, then converted -----------------------------------------------------


@pytest.mark.parametrize(("name", "compress"), [("resnet50", True), ("shufflenet", False),
                                                ("inception_v1", True), ("densenet121", False)])
def test_light_models_from_ir_match_onnx_runtime(core: ov.Core, folder: Path, name: str,
                                                  compress: bool) -> None:
    source = ONNX_BACKEND_DATA / "light" / f"light_{name}.onnx"
    xml = _to_ir(source, folder / f"light_{name}.xml", compress)
    model = core.read_model(xml)
    proto = onnx.load(source, load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    data_input = next(v for v in proto.graph.input if v.name not in initializers)
    assert [p.any_name for p in model.inputs] == [data_input.name]
    assert [p.any_name for p in model.outputs] == [v.name for v in proto.graph.output]
    dims = tuple(d.dim_value for d in data_input.type.tensor_type.shape.dim)
    size = int(np.prod(dims))
    feed = {data_input.name: (np.arange(size).reshape(dims) / size).astype(np.float32)}
    result = core.compile_model(model, "CPU")(feed)[0]
    np.testing.assert_allclose(result, ort_run(source, feed)[0], rtol=1e-3, atol=1e-5)
    assert _op_friendly_names(xml) <= {o.get_friendly_name() for o in model.get_ops()}


@pytest.mark.parametrize("compress", [True, False], ids=["f16", "f32"])
def test_mlp_with_dynamic_batch_from_ir(core: ov.Core, folder: Path, mlp: Any, compress: bool) -> None:
    source, _ = mlp
    xml = folder / f"mlp_{'f16' if compress else 'f32'}.xml"
    model = core.read_model(xml)
    assert [p.any_name for p in model.inputs] == ["x"] and [p.any_name for p in model.outputs] == ["y"]
    assert str(model.input("x").get_partial_shape()) == "[?,32]" and model.is_dynamic()
    assert model.input(0).get_element_type() == ov.Type.f32
    compiled = core.compile_model(model, "CPU")
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 32)).astype(np.float32)
        result = compiled({"x": x})["y"]
        assert result.shape == (batch, 16)
        np.testing.assert_allclose(result, ort_run(source, {"x": x})[0], rtol=0,
                                   atol=F16_ATOL if compress else 1e-5)
    names = {o.get_friendly_name() for o in model.get_ops()}
    assert {"up", "bias", "act", "down", "y"} <= names
    model.reshape({"x": [4, 32]})
    assert str(model.output("y").get_partial_shape()) == "[4,16]"


def test_fp16_weights_keep_their_numbers(core: ov.Core, folder: Path, mlp: Any) -> None:
    """An f16-compressed IR keeps its weights as f16 constants (cast to f32 in the graph), each
    equal to the source weight rounded to f16; the uncompressed IR keeps them exactly."""
    _, proto = mlp
    source = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    for label, dtype in (("f16", np.float16), ("f32", np.float32)):
        saved = core.read_model(folder / f"mlp_{label}.xml").to_onnx()
        weights = {tuple(i.dims): numpy_helper.to_array(i) for i in saved.graph.initializer}
        stored = weights[(64, 32)]  # w1 [32, 64], stored transposed for MatMul(transpose_b)
        assert stored.dtype == dtype
        np.testing.assert_array_equal(stored, source["w1"].astype(dtype).T)
        np.testing.assert_array_equal(weights[(16, 64)], source["w2"].astype(dtype).T)


@pytest.fixture(scope="module")
def encoder(folder: Path) -> Path:
    """A torch TransformerEncoderLayer (eval mode) exported to ONNX, batch dynamic, sequence 5."""
    pytest.importorskip("torch")
    return transformer_layer_onnx(folder / "encoder.onnx")


@pytest.mark.parametrize("compress", [True, False], ids=["f16", "f32"])
def test_transformer_encoder_layer_from_ir(core: ov.Core, folder: Path, encoder: Path,
                                           compress: bool) -> None:
    xml = _to_ir(encoder, folder / f"encoder_{compress}.xml", compress)
    model = core.read_model(xml)
    assert [p.any_name for p in model.inputs] == ["src"] and [p.any_name for p in model.outputs] == ["out"]
    assert str(model.input(0).get_partial_shape()) == "[?,5,32]"
    compiled = core.compile_model(model, "CPU")
    for batch in (2, 3):
        src = np.random.default_rng(batch).standard_normal((batch, 5, 32)).astype(np.float32)
        np.testing.assert_allclose(compiled({"src": src})["out"], ort_run(encoder, {"src": src})[0], rtol=0,
                                   atol=F16_ATOL if compress else 1e-4)
    assert _op_friendly_names(xml) <= {o.get_friendly_name() for o in model.get_ops()}


# --- graphs built with OpenVINO's opset ----------------------------------------------------------


def test_opset_built_model_keeps_names_layout_and_results(core: ov.Core, tiny_cnn: Path) -> None:
    model = core.read_model(tiny_cnn)
    assert model.get_friendly_name() == "tiny_cnn"
    parameter = model.get_parameters()[0]
    assert parameter.get_friendly_name() == "image" and parameter.get_layout() == ov.Layout("NCHW")
    assert str(parameter.get_partial_shape()) == "[?,3,8,8]"
    assert model.output(0).get_names() == {"probs", "scores"}
    assert model.get_results()[0].get_friendly_name() == "probs_result"
    assert {"conv", "act", "pool", "flat", "fc", "probs"} <= {o.get_friendly_name() for o in model.get_ops()}
    assert {"conv", "act", "pool", "fc"} <= set(core.query_model(tiny_cnn, "CPU"))
    image = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    expected = _openvino_cpu(tiny_cnn, {"image": image})[0]
    np.testing.assert_allclose(core.compile_model(model, "CPU")({"image": image})["probs"], expected,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(core.compile_model(tiny_cnn, "HETERO:CPU")(image)[0], expected, rtol=1e-5,
                               atol=1e-6)


def test_every_source_form_reads_the_same_ir(core: ov.Core, tiny_cnn: Path) -> None:
    xml, weights = tiny_cnn.read_bytes(), tiny_cnn.with_suffix(".bin").read_bytes()
    image = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = _openvino_cpu(tiny_cnn, {"image": image})[0]
    sources: dict[str, Callable[[], Any]] = {
        "str path": lambda: core.read_model(str(tiny_cnn)),
        "path and bin": lambda: core.read_model(tiny_cnn, tiny_cnn.with_suffix(".bin")),
        "bytes": lambda: core.read_model(xml, weights),
        "text and ov.Tensor": lambda: core.read_model(xml.decode(),
                                                      ov.Tensor(np.frombuffer(weights, np.uint8))),
        "openvino.Tensor": lambda: core.read_model(xml,
                                                   openvino.Tensor(np.frombuffer(weights, np.uint8).copy())),
        "file object": lambda: core.read_model(io.BytesIO(xml), bytearray(weights)),
        "compile_model buffers": lambda: core.compile_model(model=xml, weights=weights, device_name="CPU"),
        "compile_model path": lambda: core.compile_model(tiny_cnn, "CPU"),
        "ov.compile_model": lambda: ov.compile_model(str(tiny_cnn), "CPU"),
    }
    for label, read in sources.items():
        made = read()
        compiled = made if isinstance(made, ov.CompiledModel) else core.compile_model(made, "CPU")
        np.testing.assert_allclose(compiled({"image": image})["probs"], expected, rtol=1e-5, atol=1e-6,
                                   err_msg=label)


def test_stateful_ir_keeps_its_variable(core: ov.Core, folder: Path) -> None:
    step = op.parameter([1, 4], np.float32, name="step")
    total = op6.read_value(op.constant(np.zeros((1, 4), np.float32)), "total", np.float32, [1, 4])
    added = op.add(total, step, name="sum")
    model = openvino.Model([op.result(added)], [op6.assign(added, "total")], [step], "accumulator")
    read = core.read_model(_to_ir(model, folder / "accumulator.xml", compress=False))
    assert [v.get_info().variable_id for v in read.get_variables()] == ["total"]
    request = core.compile_model(read, "CPU").create_infer_request()
    ones = np.ones((1, 4), np.float32)
    assert [float(request.infer({"step": ones})[0][0, 0]) for _ in range(3)] == [1.0, 2.0, 3.0]
    request.reset_state()
    assert float(request.infer({"step": ones})[0][0, 0]) == 1.0


def test_compressed_and_narrow_weight_types_keep_their_values(core: ov.Core, folder: Path) -> None:
    """int8 weights with a zero point and scale, bf16, u4, i4 and f8 constants: OpenVINO hands out
    their storage, not their values; each is read as the number it holds."""
    rng = np.random.default_rng(4)
    x = op.parameter([2, 8], np.float32, name="x")
    quantized = op.constant(rng.integers(-128, 127, (4, 8)).astype(np.int8))
    int8 = op.multiply(op.subtract(op.convert(quantized, "f32"), op.convert(op.constant(np.int8(3)), "f32")),
                       op.constant(rng.random((4, 1)).astype(np.float32)))

    def typed(element: Any, values: Any) -> Any:
        return op.convert(openvino.op.Constant(element, openvino.Shape([4, 8]), list(values)), "f32")

    weights = [int8, typed(openvino.Type.bf16, rng.standard_normal(32).astype(np.float32)),
               typed(openvino.Type.u4, rng.integers(0, 16, 32)),
               typed(openvino.Type.i4, rng.integers(-8, 8, 32)),
               typed(openvino.Type.f8e4m3, rng.standard_normal(32))]
    model = openvino.Model([op.matmul(x, w, False, True) for w in weights], [x], "narrow")
    xml = _to_ir(model, folder / "narrow.xml", compress=False)
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    results = core.compile_model(xml, "CPU")(feeds)
    for index, expected in enumerate(_openvino_cpu(xml, feeds)):
        np.testing.assert_allclose(results[index], expected, rtol=1e-6, atol=1e-6, err_msg=str(index))


def test_an_onnx_file_named_xml_still_reads_as_onnx(core: ov.Core, folder: Path, mlp: Any) -> None:
    source, _ = mlp
    path = folder / "onnx_inside.xml"
    path.write_bytes(source.read_bytes())
    assert [p.any_name for p in core.read_model(path).inputs] == ["x"]


def _read_matches_openvino(core: ov.Core, model: Any, xml: Path, feeds: dict[str, np.ndarray]) -> None:
    """``model`` saved at ``xml`` and read by inferplex gives OpenVINO's CPU results."""
    _to_ir(model, xml, compress=False)
    results = core.compile_model(core.read_model(xml), "CPU")(feeds)
    expected = _openvino_cpu(xml, feeds)
    assert len(expected) == len(model.outputs)
    for index, value in enumerate(expected):
        assert results[index].shape == value.shape, index
        np.testing.assert_allclose(results[index], value, rtol=1e-5, atol=1e-5, err_msg=str(index))


def test_recurrent_ops_read_from_ir(core: ov.Core, folder: Path) -> None:
    """LSTM/GRU/RNN sequences (every direction, GRU's linear_before_reset, clip) and cells, the
    weights constants in OpenVINO's gate order."""
    rng = np.random.default_rng(6)

    def rand(*shape: int) -> Any:
        return op.constant((rng.standard_normal(shape) * 0.5).astype(np.float32))

    batch, steps, size, hidden = 2, 4, 3, 5
    x = op.parameter([batch, steps, size], np.float32, name="x")
    cell_x = op.parameter([batch, size], np.float32, name="cell_x")
    lengths = op.constant(np.array([4, 2], np.int32))
    lstm = op.lstm_sequence(x, rand(batch, 2, hidden), rand(batch, 2, hidden), lengths,
                            rand(2, 4 * hidden, size), rand(2, 4 * hidden, hidden), rand(2, 4 * hidden),
                            hidden, "bidirectional")
    gru = op.gru_sequence(x, rand(batch, 1, hidden), lengths, rand(1, 3 * hidden, size),
                          rand(1, 3 * hidden, hidden), rand(1, 4 * hidden), hidden, "reverse",
                          linear_before_reset=True)
    rnn = op.rnn_sequence(x, rand(batch, 1, hidden), lengths, rand(1, hidden, size), rand(1, hidden, hidden),
                          rand(1, hidden), hidden, "forward", ["relu"], clip=1.0)
    cells = [op.lstm_cell(cell_x, rand(batch, hidden), rand(batch, hidden), rand(4 * hidden, size),
                          rand(4 * hidden, hidden), rand(4 * hidden), hidden),
             op.gru_cell(cell_x, rand(batch, hidden), rand(3 * hidden, size), rand(3 * hidden, hidden),
                         rand(3 * hidden), hidden),
             op.rnn_cell(cell_x, rand(batch, hidden), rand(hidden, size), rand(hidden, hidden), rand(hidden),
                         hidden, ["tanh"], [], [])]
    outputs = [n.output(i) for n in (lstm, gru, rnn, *cells) for i in range(n.get_output_size())]
    model = openvino.Model(outputs, [x, cell_x], "recurrent")
    feeds = {"x": rng.standard_normal((batch, steps, size)).astype(np.float32),
             "cell_x": rng.standard_normal((batch, size)).astype(np.float32)}
    _read_matches_openvino(core, model, folder / "recurrent.xml", feeds)


def test_fourier_window_embedding_and_decoder_ops_read_from_ir(core: ov.Core, folder: Path) -> None:
    rng = np.random.default_rng(8)
    signal = op.parameter([2, 3, 4, 2], np.float32, name="signal")
    image = op.parameter([8, 3, 4, 4], np.float32, name="image")
    table = op.parameter([6, 3], np.float32, name="table")
    scores = op.parameter([7, 3, 4], np.float32, name="scores")

    def ints(*values: Any) -> Any:
        return op.constant(np.array(values, np.int32))

    nodes = [op.dft(signal, ints(1, 2)), op.idft(signal, ints(2), ints(5)),
             op.rdft(op.relu(image), ints(2, 3)), op.irdft(signal, ints(2)), op.grn(image, 0.5),
             op.batch_to_space(image, ints(1, 1, 2, 2), ints(0, 0, 0, 1), ints(0, 0, 1, 0)),
             op.space_to_batch(image, ints(1, 1, 2, 2), ints(0, 0, 1, 0), ints(0, 0, 1, 0)),
             op.adaptive_avg_pool(image, ints(3, 2)), op.adaptive_max_pool(image, ints(3, 2), "i32"),
             op.extract_image_patches(image, [2, 2], [2, 1], [1, 1], "same_lower"),
             op.embedding_bag_offsets_sum(table, ints(0, 2, 3, 5), ints(0, 1, 1), op.constant(np.int32(4))),
             op.embedding_bag_packed_sum(table, op.constant(np.array([[0, 2], [3, 1]], np.int32))),
             op.embedding_segments_sum(table, ints(0, 2, 3), ints(0, 0, 2), op.constant(np.int32(3))),
             op.ctc_greedy_decoder(scores, op.constant(np.ones((7, 3), np.float32)), True),
             op.ctc_greedy_decoder_seq_len(op.transpose(scores, ints(1, 0, 2)), ints(7, 3, 5), None, False)]
    outputs = [n.output(i) for n in nodes for i in range(n.get_output_size())]
    model = openvino.Model(outputs, [signal, image, table, scores], "misc")
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
             (("signal", (2, 3, 4, 2)), ("image", (8, 3, 4, 4)), ("table", (6, 3)), ("scores", (7, 3, 4)))}
    _read_matches_openvino(core, model, folder / "misc.xml", feeds)


def test_colour_and_beam_search_ops_read_from_ir(core: ov.Core, folder: Path) -> None:
    """NV12 and I420 to RGB and BGR (one plane and separate planes, f32: u8 results may differ by one
    where a value is within a float rounding of a half), GatherTree and CTCLoss."""
    rng = np.random.default_rng(10)
    shapes = {"one": (1, 6, 4, 1), "y": (1, 4, 4, 1), "uv": (1, 2, 2, 2), "u": (1, 2, 2, 1),
              "v": (1, 2, 2, 1)}
    planes = {key: op.parameter(list(shape), np.float32, name=key) for key, shape in shapes.items()}
    ids = op.parameter([5, 2, 3], np.int32, name="ids")
    parents = op.parameter([5, 2, 3], np.int32, name="parents")
    logits = op.parameter([2, 5, 4], np.float32, name="logits")

    def ints(*values: int) -> Any:
        return op.constant(np.array(values, np.int32))

    nodes = [op8.nv12_to_rgb(planes["one"]), op8.nv12_to_bgr(planes["y"], planes["uv"]),
             op8.i420_to_rgb(planes["one"]), op8.i420_to_bgr(planes["y"], planes["u"], planes["v"]),
             op.gather_tree(ids, parents, op.constant(np.array([5, 3], np.int32)), op.constant(np.int32(2))),
             op.ctc_loss(logits, ints(5, 4), op.constant(np.array([[1, 1, 2, 0, 0], [2, 0, 1, 1, 2]],
                                                                  np.int32)),
                         ints(3, 4), op.constant(np.int32(3)), True, True, False),
             op.ctc_loss(logits, ints(4, 5), op.constant(np.array([[1, 2, 1, 0, 0], [2, 2, 0, 0, 1]],
                                                                  np.int32)),
                         ints(3, 2), None, False, False, True)]
    model = openvino.Model([n.output(0) for n in nodes], [*planes.values(), ids, parents, logits], "colour")
    feeds = {key: rng.integers(0, 256, shape).astype(np.float32) for key, shape in shapes.items()}
    feeds |= {"ids": rng.integers(0, 5, (5, 2, 3)).astype(np.int32),
              "parents": rng.integers(0, 3, (5, 2, 3)).astype(np.int32),
              "logits": rng.standard_normal((2, 5, 4)).astype(np.float32)}
    _read_matches_openvino(core, model, folder / "colour.xml", feeds)


# --- errors ------------------------------------------------------------------------------------------


def _raises(error_type: type[Exception], *fragments: str) -> Any:
    """pytest.raises for ``error_type`` whose message holds every fragment (literal text)."""
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


def test_missing_weights_are_named(core: ov.Core, folder: Path, tiny_cnn: Path) -> None:
    lonely = folder / "lonely.xml"
    lonely.write_bytes(tiny_cnn.read_bytes())
    with _raises(ModelError, str(lonely), "no weights file", str(folder / "lonely.bin")):
        core.read_model(lonely)
    with _raises(ModelError, str(folder / "absent.bin"), "does not exist"):
        core.read_model(tiny_cnn, folder / "absent.bin")
    with _raises(ModelError, "no weights were given"):
        core.read_model(tiny_cnn.read_bytes())
    with _raises(ModelError, "OpenVINO says", "weights"):
        core.read_model(tiny_cnn.read_bytes(), b"\0" * 16)
    with _raises(InputTypeError, "weights", "bytes", "ov.Tensor", "not int"):
        core.read_model(tiny_cnn.read_bytes(), 3)


def test_garbage_ir_is_named(core: ov.Core, folder: Path) -> None:
    path = folder / "garbage.xml"
    path.write_text("<?xml version='1.0'?><net name='x' version='11'><layers><layer id='0' oops")
    with _raises(ModelError, str(path), "cannot be read", "OpenVINO says", "parsing"):
        core.read_model(path)


def test_an_op_inferplex_cannot_build_is_named_with_the_way_out(core: ov.Core, folder: Path) -> None:
    data = op.parameter([1, 2, 5, 5], np.float32, name="data")
    filters = op.constant(np.ones([3, 2, 3, 3], np.float32))
    binary = op1.binary_convolution(data, filters, [1, 1], [0, 0], [0, 0], [1, 1], "xnor-popcount", 0.0,
                                    name="binary")
    model = openvino.Model([binary.output(0), op.relu(data).output(0)], [data], "binary")
    xml = _to_ir(model, folder / "binary.xml", True)
    with _raises(ModelError, str(xml), "cannot read: BinaryConvolution (opset1)",
                 "export the source model to ONNX"):
        core.read_model(xml)


def test_detection_ops_read_from_ir(core: ov.Core, folder: Path) -> None:
    """NonMaxSuppression (opsets 1, 5 and 9), ROIAlign (3 and 9), ROIPooling, the YOLO layers and
    the prior boxes (their sizes a ShapeOf of the feature map, as converted models give them)."""
    rng = np.random.default_rng(9)
    boxes = op.parameter([2, 6, 4], np.float32, name="boxes")
    scores = op.parameter([2, 2, 6], np.float32, name="scores")
    image = op.parameter([2, 8, 6, 8], np.float32, name="image")
    rois = op.constant(np.array([[0, 0, 3, 3], [1.5, 0.5, 7, 5.5], [2, 1, 9, 12]], np.float32))
    batch = op.constant(np.array([1, 0, 1], np.int32))
    size = op.strided_slice(op.shape_of(image), np.array([2]), np.array([4]), np.array([1]), [0], [0])
    limits = (op.constant(np.int64(3)), op.constant(np.float32(0.2)), op.constant(np.float32(0.1)))
    nodes = [op.non_max_suppression(boxes, scores, *limits, None, "center", False, "i32"),
             op5.non_max_suppression(boxes, scores, *limits),
             op1.non_max_suppression(boxes, scores, *limits),
             op.roi_align(image, rois, batch, 2, 3, 2, 0.5, "avg", "half_pixel"),
             op3.roi_align(image, rois, batch, 2, 2, 0, 0.5, "avg"),
             op.roi_pooling(image, op.constant(np.array([[0, 0, 0, 3, 3], [1, 2, 1, 9, 12]], np.float32)),
                            [2, 2], 0.5, "max"),
             op.reorg_yolo(image, [2]), op.region_yolo(image, 2, 1, 2, True, [0, 1], 1, 3),
             op.region_yolo(image, 2, 1, 9, False, [0, 1], 1, 3),
             op.prior_box(size, op.constant(np.array([48, 64], np.int64)),
                          {"offset": 0.5, "min_size": [4.0, 8.0], "max_size": [9.0, 12.0],
                           "aspect_ratio": [2.0], "flip": True, "clip": True}),
             op.prior_box_clustered(size, op.constant(np.array([48, 64], np.int64)),
                                    {"offset": 0.5, "width": [4.0, 2.0], "height": [2.0, 4.0], "step_w": 3.0,
                                     "variance": [0.1, 0.1, 0.2, 0.2]})]
    outputs = [n.output(i) for n in nodes for i in range(n.get_output_size())]
    model = openvino.Model(outputs, [boxes, scores, image], "detection")
    feeds = {"boxes": rng.uniform(0, 10, (2, 6, 4)).astype(np.float32),
             "scores": rng.uniform(0, 1, (2, 2, 6)).astype(np.float32),
             "image": rng.standard_normal((2, 8, 6, 8)).astype(np.float32)}
    _read_matches_openvino(core, model, folder / "detection.xml", feeds)


def test_bucketize_reads_from_ir(core: ov.Core, folder: Path) -> None:
    x = op.parameter([2, 3], np.float32, name="x")
    bounds = np.array([0.0, 1.0], np.float32)
    buckets = op.bucketize(x, op.constant(bounds), "i32", False, name="buckets")
    xml = _to_ir(openvino.Model([buckets], [x], "bucketed"), folder / "bucketed.xml", True)
    data = np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, 0.0]], np.float32)
    got = core.compile_model(core.read_model(xml), "CPU")([data])[0]
    np.testing.assert_array_equal(got, np.searchsorted(bounds, data, side="right"))
    assert got.dtype == np.int32


def test_without_openvino_reading_ir_names_the_package(core: ov.Core, tiny_cnn: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    with _raises(ModelError, "OpenVINO IR", "needs the openvino package", "export the source model to ONNX"):
        core.read_model(tiny_cnn)


@pytest.mark.parametrize("flag", [True, False])
def test_if_read_from_ir(core: ov.Core, folder: Path, flag: bool) -> None:
    """An If made with ``openvino.opset8.if_op``: each body rebuilt by the reader, both branches run."""
    x = op.parameter([2, 3], np.float32, name="x")
    y = op.parameter([2, 3], np.float32, name="y")
    cond = op.parameter([1], np.bool_, name="cond")
    tx, ty = op.parameter([2, 3], np.float32), op.parameter([2, 3], np.float32)
    then_body = openvino.Model([op.result(op.add(op.multiply(tx, op.constant(np.float32(2))), ty))], [tx, ty])
    ex = op.parameter([2, 3], np.float32)
    else_body = openvino.Model([op.result(op.relu(ex))], [ex])
    node = op8.if_op(cond)
    node.set_then_body(then_body)
    node.set_else_body(else_body)
    node.set_input(x.output(0), tx, ex)
    node.set_input(y.output(0), ty, None)
    out = node.set_output(then_body.get_results()[0], else_body.get_results()[0])
    model = openvino.Model([op.result(op.sigmoid(out))], [x, y, cond])
    rng = np.random.default_rng(9)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
             "y": rng.standard_normal((2, 3)).astype(np.float32), "cond": np.array([flag])}
    _read_matches_openvino(core, model, folder / f"if_{flag}.xml", feeds)


@pytest.mark.parametrize("kind", ["loop", "tensor_iterator"])
def test_loop_and_tensor_iterator_read_from_ir(core: ov.Core, folder: Path, kind: str) -> None:
    """A running sum over the rows of ``x``: sliced input, merged accumulator, last value and
    concatenated per-step values (a Loop also with its iteration and condition ports)."""
    row = op.parameter([1, 3], np.float32, name="row")
    acc = op.parameter([1, 3], np.float32, name="acc")
    total = op.add(acc, row)
    doubled = op.result(op.multiply(total, op.constant(np.float32(2))))
    x = op.parameter([4, 3], np.float32, name="x")
    start = op.parameter([1, 3], np.float32, name="start")
    if kind == "loop":
        step = op.parameter([1], np.int64, name="step")
        body = openvino.Model([op.result(total), op.result(op.constant(np.array([True]))), doubled],
                              [step, row, acc])
        node = op8.loop(op.constant(np.array(4, np.int64)), op.constant(np.array(True)))
        node.set_function(body)
        node.set_special_body_ports([0, 1])
        concatenated = body.get_results()[2]
    else:
        body = openvino.Model([op.result(total), doubled], [row, acc])
        node = op8.tensor_iterator()
        node.set_function(body)
        concatenated = body.get_results()[1]
    node.set_sliced_input(row, x.output(0), 0, 1, 1, -1, 0)
    node.set_merged_input(acc, start.output(0), body.get_results()[0].output(0))
    last = node.get_iter_value(body.get_results()[0].output(0), -1)
    steps = node.get_concatenated_slices(concatenated.output(0), 0, 1, 1, -1, 0)
    model = openvino.Model([op.result(last), op.result(steps)], [x, start])
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((4, 3)).astype(np.float32),
             "start": rng.standard_normal((1, 3)).astype(np.float32)}
    _read_matches_openvino(core, model, folder / f"{kind}.xml", feeds)
