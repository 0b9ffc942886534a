"""OpenVINO's Python API, as OpenVINO programs use it, through ``import inferplex as ov``.

Each test checks one behaviour against real OpenVINO where it is installed
(``pytest.importorskip("openvino")``) or against numpy / OpenVINO's documented
values: names that programs import, node inputs and outputs, tensor names,
symbols, the opset functions, packed sub-byte data, and the error class.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_precision import native_default

import inferplex as ov
from inferplex import opset


def _run(results: object, params: list, feeds: list[np.ndarray]) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(ov.Model(results, params), "CPU")
    out = compiled(feeds)
    return [out[i] for i in range(len(compiled.outputs))]


# --- names OpenVINO programs import ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["ConstOutput", "Output", "Input", "Node", "Symbol", "RTMap", "OVAny",
                                  "Extension", "tensor_from_file"])
def test_openvino_top_level_names_exist(name: str) -> None:
    real = pytest.importorskip("openvino")
    assert hasattr(real, name)
    assert getattr(ov, name) is not None


@pytest.mark.parametrize("number", range(1, 18))
def test_opset_modules_by_number_import(number: int) -> None:
    import importlib

    module = importlib.import_module(f"inferplex.opset{number}")
    param = module.parameter([2], np.float32)
    assert module.relu(param).get_type_name() == "Relu"


def test_errors_are_runtime_errors_as_openvino_raises() -> None:
    param = opset.parameter([2], np.float32, name="x")
    compiled = ov.Core().compile_model(ov.Model(opset.relu(param), [param]), "CPU")
    with pytest.raises(RuntimeError):
        compiled.create_infer_request().infer({"no_such_input": np.zeros(2, np.float32)})


# --- symbols and dimensions ------------------------------------------------------------------------


def test_symbol_identity_and_dimension_symbols() -> None:
    dim = ov.Dimension()
    assert not dim.has_symbol() and not dim.get_symbol()
    symbol = ov.Symbol()
    dim.set_symbol(symbol)
    assert dim.has_symbol() and dim.get_symbol() == symbol
    assert ov.Symbol() != symbol
    assert len({symbol, ov.Symbol()}) == 2
    assert ov.Dimension(3) == ov.Dimension(3)  # symbols do not change equality


# --- node inputs and outputs -----------------------------------------------------------------------


def test_node_inputs_read_their_sources() -> None:
    param = opset.parameter([1, 4], np.float32, name="data")
    relu = opset.relu(param, name="relu")
    model = ov.Model(relu, [param], "m")
    compiled = ov.Core().compile_model(model, "CPU")
    result_input = compiled.output(0).get_node().inputs()[0]
    assert isinstance(result_input, ov.Input)
    assert result_input.get_index() == 0
    assert result_input.get_element_type() == ov.Type.f32
    assert result_input.get_partial_shape() == ov.PartialShape([1, 4])
    assert result_input.get_source_output().get_node().get_friendly_name() == "relu"
    relu_input = relu.input(0)
    assert relu_input.get_source_output().get_node().get_type_name() == "Parameter"


def test_input_replace_source_output_rewires_the_graph() -> None:
    first = opset.parameter([3], np.float32, name="first")
    second = opset.parameter([3], np.float32, name="second")
    neg = opset.negative(first)
    neg.input(0).replace_source_output(second.output(0))
    data = np.array([1.0, -2.0, 3.0], np.float32)
    (out,) = _run(neg, [second], [data])
    np.testing.assert_array_equal(out, -data)


def test_tensor_names_set_add_and_replace() -> None:
    param = opset.parameter([1, 4], ov.Type.i64)
    param.output(0).set_names({"param1", "data1"})
    assert param.output(0).get_names() == {"param1", "data1"}
    param.output(0).add_names({"input1"})
    assert param.output(0).get_names() == {"param1", "data1", "input1"}
    relu = opset.relu(param)
    relu.output(0).get_tensor().set_names({"c", "d"})
    new_relu = opset.relu(param)
    new_relu.output(0).get_tensor().set_names({"f"})
    relu.output(0).replace(new_relu.output(0))
    assert new_relu.output(0).get_tensor().get_names() == {"c", "d", "f"}


def test_renamed_model_output_is_a_result_key() -> None:
    param = opset.parameter([2, 3], np.float32, name="x")
    model = ov.Model(opset.abs(param), [param])
    model.output(0).tensor.names = {"magnitude"}
    compiled = ov.Core().compile_model(model, "CPU")
    data = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    result = compiled(data)
    np.testing.assert_array_equal(result["magnitude"], np.abs(data))
    assert "magnitude" in result.names()[0]


def test_node_arithmetic_builds_ops() -> None:
    a = opset.parameter([2], np.float32, name="a")
    b = opset.parameter([2], np.float32, name="b")
    x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 5.0], np.float32)
    outs = _run([a + b, a - b, a * b, a / b, -a], [a, b], [x, y])
    for got, want in zip(outs, [x + y, x - y, x * y, x / y, -x], strict=True):
        np.testing.assert_allclose(got, want)


# --- opset functions against numpy ----------------------------------------------------------------


_UNARY = [("abs", np.abs), ("negative", np.negative), ("exp", np.exp), ("sqrt", np.sqrt),
          ("tanh", np.tanh), ("floor", np.floor), ("ceiling", np.ceil), ("sign", np.sign)]


@pytest.mark.parametrize(("name", "reference"), _UNARY)
def test_unary_ops_match_numpy(name: str, reference: object) -> None:
    param = opset.parameter([5], np.float32, name="x")
    data = np.array([0.25, 1.5, 2.0, 3.75, 9.0], np.float32)
    (out,) = _run(getattr(opset, name)(param), [param], [data])
    np.testing.assert_allclose(out, reference(data), rtol=1e-5)  # type: ignore[operator]


def test_split_and_variadic_split_match_numpy() -> None:
    param = opset.parameter([2, 6], np.float32, name="x")
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    outs = _run(opset.split(param, 1, 3), [param], [data])
    for got, want in zip(outs, np.split(data, 3, axis=1), strict=True):
        np.testing.assert_array_equal(got, want)
    outs = _run(opset.variadic_split(param, 1, [1, -1, 2]), [param], [data])
    for got, want in zip(outs, np.split(data, [1, 4], axis=1), strict=True):
        np.testing.assert_array_equal(got, want)


def test_convert_reduce_and_compare_match_numpy() -> None:
    param = opset.parameter([2, 3], np.float32, name="x")
    data = np.array([[1.7, -2.2, 3.0], [4.0, 5.5, -6.1]], np.float32)
    outs = _run([opset.convert(param, "i32"), opset.reduce_sum(param, [1], True),
                 opset.reduce_max(param, [0]), opset.greater(param, 2.0)], [param], [data])
    np.testing.assert_array_equal(outs[0], data.astype(np.int32))
    np.testing.assert_allclose(outs[1], data.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(outs[2], data.max(axis=0))
    np.testing.assert_array_equal(outs[3], data > 2.0)


# --- packed sub-byte data, files, extensions -------------------------------------------------------


@pytest.mark.parametrize(("type_name", "low", "high"), [("u1", 0, 2), ("u4", 0, 16), ("i4", -8, 8),
                                                        ("nf4", 0, 16)])
def test_pack_data_matches_openvino(type_name: str, low: int, high: int) -> None:
    real = pytest.importorskip("openvino")
    from openvino.helpers import pack_data as real_pack

    rng = np.random.default_rng(0)
    data = rng.integers(low, high, size=(3, 7)).astype(np.int8 if type_name == "i4" else np.uint8)
    packed = ov.helpers.pack_data(data, type_name)
    np.testing.assert_array_equal(packed, real_pack(data, getattr(real.Type, type_name)))
    np.testing.assert_array_equal(ov.helpers.unpack_data(packed, type_name, [3, 7]), data)


def test_tensor_from_file_reads_bytes(tmp_path: object) -> None:
    path = tmp_path / "blob.bin"  # type: ignore[operator]
    np.arange(10, dtype=np.int8).tofile(path)
    tensor = ov.tensor_from_file(path)
    assert tensor.element_type == ov.Type.u8
    np.testing.assert_array_equal(tensor.data, np.arange(10, dtype=np.uint8))


def test_core_accepts_python_extensions_and_refuses_libraries() -> None:
    class Empty(ov.Extension):
        pass

    core = ov.Core()
    core.add_extension(Empty())
    core.add_extension([Empty(), Empty()])
    with pytest.raises(RuntimeError, match="extension"):
        core.add_extension("libcustom_ops.so")


# --- Tensor constructors as OpenVINO spells them -------------------------------------------------


def test_tensor_keyword_constructors() -> None:
    by_type = ov.Tensor(type=np.float32, shape=[2, 3])
    assert by_type.element_type == ov.Type.f32 and list(by_type.shape) == [2, 3]
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    shared = ov.Tensor(array=array, shared_memory=True)
    assert np.shares_memory(shared.data, array)
    with pytest.raises(RuntimeError, match="keyword"):
        ov.Tensor(array, colour="red")


def test_tensor_from_port_with_and_without_array() -> None:
    param = opset.parameter([2, 3], np.float32)
    assert list(ov.Tensor(param.output(0)).shape) == [2, 3]
    ones = np.ones((2, 3), np.float32)
    over = ov.Tensor(param.output(0), ones)
    assert np.shares_memory(over.data, ones)
    dynamic = opset.parameter(ov.PartialShape.dynamic(), np.float32)
    assert list(ov.Tensor(dynamic.output(0)).shape) == [0]
    with pytest.warns(RuntimeWarning):
        ov.Tensor(opset.parameter([2], np.float32).output(0), ones)
    with pytest.raises(RuntimeError, match="exceeds"):
        ov.Tensor(opset.parameter([7], np.float32).output(0), ones)


def test_roi_tensor_views_a_region() -> None:
    base = ov.Tensor(np.arange(2 * 4 * 4, dtype=np.float32).reshape(2, 4, 4))
    roi = ov.Tensor(base, [0, 1, 2], [2, 3, 4])
    assert list(roi.shape) == [2, 2, 2]
    np.testing.assert_array_equal(roi.data, base.data[:, 1:3, 2:4])
    assert np.shares_memory(roi.data, base.data)


@pytest.mark.parametrize("name", ["u1", "u4", "i4"])
def test_sub_byte_tensors_have_no_strides_or_roi(name: str) -> None:
    tensor = ov.Tensor(getattr(ov.Type, name), [2, 8])
    with pytest.raises(RuntimeError, match="less then 8 bit"):
        tensor.get_strides()
    with pytest.raises(RuntimeError, match="less then 8 bit"):
        ov.Tensor(tensor, [0, 0], [1, 4])


def test_packed_types_match_openvino() -> None:
    real = pytest.importorskip("openvino")
    for name in ("u1", "u3", "u6", "nf4"):
        ours, theirs = getattr(ov.Type, name), getattr(real.Type, name)
        assert ours.get_type_name() == theirs.get_type_name()
        assert ours.bitwidth == theirs.bitwidth
        assert ov.Type(name) is ours and ours != ov.Type.u8
    with pytest.raises(RuntimeError, match="ONNX"):
        opset.parameter([2], ov.Type.u1)


def test_dimension_length_and_bool() -> None:
    assert len(ov.Dimension(2)) == 2
    assert bool(ov.Dimension()) and bool(ov.Dimension(0))
    with pytest.raises(RuntimeError):
        len(ov.Dimension())


def test_tensor_bounds_and_value_symbols_stay_with_the_port() -> None:
    param = opset.parameter([1, 4], np.float32)
    low = ov.Tensor(np.zeros((1, 4), np.float32))
    symbols = [ov.Symbol() for _ in range(4)]
    param.output(0).get_tensor().set_lower_value(low)
    param.output(0).get_tensor().set_value_symbol(symbols)
    assert param.output(0).get_tensor().get_lower_value() is low
    assert param.output(0).get_tensor().get_value_symbol() == symbols


# --- Core: serialize, read_model options, supported properties -----------------------------------


def test_serialize_round_trips_through_read_model(tmp_path: object) -> None:
    param = opset.parameter([1, 3], np.float32, name="data")
    model = ov.Model(opset.relu(param), [param], "relu_model")
    xml, weights = tmp_path / "m.xml", tmp_path / "m.bin"  # type: ignore[operator]
    ov.serialize(model, xml, weights)
    core = ov.Core()
    data = np.array([[-1.0, 0.5, 2.0]], np.float32)
    for read in (core.read_model(xml, weights), core.read_model(xml.read_bytes(), weights.read_bytes())):
        result = core.compile_model(read, "CPU")(data)
        np.testing.assert_array_equal(result[0], np.maximum(data, 0))
    compiled = core.compile_model(model=xml.read_bytes(), weights=weights.read_bytes(), device_name="CPU")
    np.testing.assert_array_equal(compiled(data)[0], np.maximum(data, 0))


def test_read_model_cache_dir_makes_the_folder_and_leaves_the_core(tmp_path: object) -> None:
    param = opset.parameter([2], np.float32, name="x")
    path = tmp_path / "m.onnx"  # type: ignore[operator]
    ov.save_model(ov.Model(opset.relu(param), [param]), path)
    core = ov.Core()
    before = core.get_property("CACHE_DIR")
    cache = tmp_path / "cache"  # type: ignore[operator]
    core.read_model(path, config={"CACHE_DIR": str(cache)})
    assert cache.is_dir()
    assert core.get_property("CACHE_DIR") == before


def test_supported_properties_list_openvino_spellings() -> None:
    real = pytest.importorskip("openvino")
    supported = ov.Core().get_property("CPU", ov.properties.supported_properties())
    assert str(ov.properties.enable_profiling) in supported
    assert real.properties.enable_profiling in real.Core().get_property("CPU", "SUPPORTED_PROPERTIES")


# --- Model editing, as ov.Model ---------------------------------------------------------------------


def _chain() -> tuple[ov.Model, object, object]:
    param = opset.parameter([1, 3], np.float32, name="data")
    relu1 = opset.relu(param, name="relu1")
    relu1.output(0).get_tensor().set_names({"relu_t1"})
    model = ov.Model(opset.negative(relu1, name="neg"), [param], "chain")
    return model, param, relu1


@pytest.mark.parametrize("key", ["relu_t1", ("relu1", 0), "port"])
def test_add_outputs_makes_an_inner_tensor_an_output(key: object) -> None:
    model, _, relu1 = _chain()
    new = model.add_outputs(relu1.output(0) if key == "port" else key)
    assert len(model.outputs) == 2 and new[0].get_index() == model.outputs[1].get_index()
    assert "relu_t1" in model.outputs[1].get_tensor().names
    data = np.array([[-1.0, 0.5, 2.0]], np.float32)
    result = ov.Core().compile_model(model, "CPU")(data)
    np.testing.assert_array_equal(result[1], np.maximum(data, 0))
    np.testing.assert_array_equal(result[0], -np.maximum(data, 0))


def test_add_outputs_errors_name_what_is_missing() -> None:
    model, _, _ = _chain()
    with pytest.raises(RuntimeError, match="relu_missing"):
        model.add_outputs("relu_missing")
    with pytest.raises(RuntimeError, match="1234"):
        model.add_outputs(("relu1", 1234))
    with pytest.raises(TypeError, match="at index 0"):
        model.add_outputs([0])


def test_result_and_parameter_indices() -> None:
    model, param, _ = _chain()
    assert model.get_result_index(model.outputs[0]) == 0
    assert model.get_result_index(model.get_results()[0]) == 0
    assert model.get_result_index(opset.relu(opset.parameter([2])).output(0)) == -1
    assert model.get_parameter_index(param) == 0
    assert model.get_parameter_index(opset.parameter([1, 3], name="data")) == -1


def test_replace_parameter_then_validate_reports_inconsistent_shapes() -> None:
    a = opset.parameter([2, 1], np.float32, name="a")
    b = opset.parameter([2, 1], np.float32, name="b")
    model = ov.Model(opset.add(a, b), [a, b])
    wider = opset.parameter([3, 7], np.float32, name="wide")
    model.replace_parameter(0, wider)
    assert model.get_parameter_index(wider) == 0 and model.get_parameter_index(a) == -1
    with pytest.raises(RuntimeError, match="Argument shapes are inconsistent"):
        model.validate_nodes_and_infer_types()


def test_add_and_remove_results_and_parameters() -> None:
    param = opset.parameter([1], np.float32, name="param")
    relu = opset.relu(param, name="relu")
    first = opset.result(relu, "res")
    model = ov.Model([first], [param])
    model.add_results([opset.result(relu, "res2")])
    assert len(model.get_results()) == 2
    model.remove_result(first)
    assert [p.any_name for p in model.outputs] == ["res2"]
    extra = opset.parameter([1], np.float32, name="extra")
    model.add_parameters([extra])
    assert len(model.parameters) == 2
    model.remove_parameter(extra)
    assert [p.any_name for p in model.inputs] == ["param"]


def test_evaluate_runs_the_model_into_given_tensors() -> None:
    a = opset.parameter([2, 1], np.float32, name="a")
    b = opset.parameter([2, 1], np.float32, name="b")
    model = ov.Model(opset.add(a, b), [a, b])
    out = ov.Tensor(ov.Type.f32, [2, 1])
    x, y = np.array([[2], [1]], np.float32), np.array([[3], [7]], np.float32)
    assert model.evaluate([out], [ov.Tensor(x), ov.Tensor(y)])
    np.testing.assert_array_equal(out.data, x + y)
    with pytest.raises(RuntimeError, match="Cannot evaluate model"):
        model.evaluate([out], [ov.Tensor(ov.Type.f32, [3, 1]), ov.Tensor(ov.Type.f32, [3, 1])])


def test_evaluate_computes_at_f32_whatever_the_cpus_default_precision() -> None:
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((64, 32)).astype(np.float32)
    x = opset.parameter([4, 64], np.float32, name="x")
    model = ov.Model(opset.relu(opset.matmul(x, opset.constant(weights), False, False)), [x])
    data = rng.standard_normal((4, 64)).astype(np.float32)
    out = ov.Tensor(ov.Type.f32, [4, 32])
    with native_default():  # bf16 where the CPU has it, as a program's CPU runs by default
        assert model.evaluate([out], [ov.Tensor(data)])
    expected = np.maximum(data.astype(np.float64) @ weights, 0.0)
    np.testing.assert_allclose(out.data, expected, rtol=1e-5, atol=1e-5)  # bf16 is off by ~0.05


def test_model_rt_info_paths_survive_save_and_read(tmp_path: object) -> None:
    model, _, _ = _chain()
    assert not model.has_rt_info("MO_version")
    model.set_rt_info("v1", "MO_version")
    model.set_rt_info([22.3, 33.11], ["config", "mean_values"])
    model.set_rt_info(True, ["config", "labels", "directed"])
    path = tmp_path / "m.onnx"  # type: ignore[operator]
    ov.save_model(model, path)
    for read in (model, ov.Core().read_model(path)):
        assert read.get_rt_info("MO_version") == "v1"
        assert read.has_rt_info(["config"]) and not read.has_rt_info(["config", "nothing"])
        assert read.get_rt_info(["config", "mean_values"]).aslist(float) == [22.3, 33.11]
        assert read.get_rt_info(["config", "labels", "directed"]).astype(bool) is True
        assert isinstance(read.get_rt_info()["config"], dict)
        assert set(read.get_rt_info(["config", "labels"]).astype(dict)) == {"directed"}  # OpenVINO's OVAny
    with pytest.raises(RuntimeError):
        model.get_rt_info(["nothing"])


def test_reshape_refuses_key_and_value_types_with_type_error() -> None:
    model, _, _ = _chain()
    with pytest.raises(TypeError, match="Incorrect key type"):
        model.reshape({model.input().node: [2, 3]})
    with pytest.raises(TypeError, match="Incorrect value type"):
        model.reshape({0: range(1, 3)})


def test_model_keyword_constructor_and_a_sink_that_is_no_assign() -> None:
    param = opset.parameter([2], np.float32, name="x")
    model = ov.Model(results=[opset.relu(param)], parameters=[param], name="kw")
    assert model.get_friendly_name() == "kw"
    with pytest.raises(TypeError, match="Sink node is expected"):
        ov.Model(results=[opset.relu(param)], parameters=[param], sinks=[object()])


# --- property names OpenVINO programs import ------------------------------------------------------


@pytest.mark.parametrize(("module", "name"), [
    ("", "CacheMode"), ("", "WorkloadType"), ("", "optimal_batch_size"), ("", "cache_mode"),
    ("", "enable_mmap"), (".hint", "allow_auto_batching"), (".hint", "model"), (".device", "uuid"),
    (".device", "architecture"), (".intel_cpu", "sparse_weights_decompression_rate"),
    (".intel_auto", "device_bind_buffer"),
])
def test_property_names_match_openvino(module: str, name: str) -> None:
    import importlib

    pytest.importorskip("openvino")
    theirs = getattr(importlib.import_module("openvino.properties" + module), name)
    ours = getattr(importlib.import_module("inferplex.properties" + module), name)
    if isinstance(theirs, type):
        assert isinstance(ours, type)
    else:
        assert ours() == theirs()


def test_properties_inferplex_does_not_take_are_refused_by_name() -> None:
    pair = ov.properties.hint.kv_cache_precision(ov.Type.f16)  # a pair, as OpenVINO makes it
    assert pair[0] == "KV_CACHE_PRECISION"
    core = ov.Core()
    core.set_property("CPU", pair)  # the CPU takes it, as OpenVINO's does
    assert core.get_property("CPU", "KV_CACHE_PRECISION") == ov.Type.f16
    with pytest.raises(RuntimeError, match="COMPILATION_NUM_THREADS"):  # OpenVINO's CPU refuses it too
        core.set_property("CPU", ov.properties.compilation_num_threads(2))
    with pytest.raises(RuntimeError, match="read-only"):
        ov.properties.device.uuid("x")


def test_shared_tensor_holds_one_reference_to_the_array() -> None:
    import sys

    array = np.ones((4, 5), np.float32)
    before = sys.getrefcount(array)
    tensor = ov.Tensor(array, shared_memory=True)
    assert sys.getrefcount(array) == before + 1
    array[0, 0] = 7
    del array
    assert tensor.data[0, 0] == 7


def test_wrong_python_types_raise_type_errors_as_openvino() -> None:
    param = opset.parameter([2], np.float32, name="x")
    request = ov.Core().compile_model(ov.Model(opset.relu(param), [param]), "CPU").create_infer_request()
    with pytest.raises(TypeError, match="Incompatible inputs of type"):
        request.infer(object())
    with pytest.raises(TypeError, match=r"Incompatible key type for input: 0\.0"):
        request.infer({0.0: np.zeros(2, np.float32)})
    with pytest.raises(TypeError, match="isn't supported as 'model' argument"):
        ov.Core().read_model(3)
    with pytest.raises(RuntimeError):  # an unknown name stays a RuntimeError, as in OpenVINO
        request.infer({"nothing": np.zeros(2, np.float32)})


# --- shapes and reprs --------------------------------------------------------------------------------


def test_partial_shape_takes_min_max_pairs_and_refuses_other_types() -> None:
    shape = ov.PartialShape([(1, 10), [2, 5], 4, ov.Dimension(2), "..10"])
    assert shape == ov.PartialShape([ov.Dimension(1, 10), ov.Dimension(2, 5), ov.Dimension(4),
                                     ov.Dimension(2), ov.Dimension(-1, 10)])
    with pytest.raises(TypeError, match="Two elements are expected"):
        ov.PartialShape([(1, 2, 3)])
    with pytest.raises(TypeError, match="ints are expected"):
        ov.PartialShape([("?", "?")])
    with pytest.raises(TypeError, match="Incorrect type <class 'range'> for dimension"):
        ov.PartialShape([range(3)])


def test_dimension_parse_errors_name_the_text() -> None:
    with pytest.raises(RuntimeError, match='Cannot parse dimension: "C"'):
        ov.Dimension("C")
    with pytest.raises(RuntimeError, match='Cannot parse min bound: "\\?"'):
        ov.Dimension("?..5")
    with pytest.raises(RuntimeError, match='Cannot parse max bound: "\\?"'):
        ov.Dimension("5..?")


def test_model_and_port_reprs_read_as_openvino_prints_them() -> None:
    a = opset.parameter(ov.PartialShape([-1, 2]), np.float32, name="A")
    b = opset.parameter(ov.PartialShape([-1, 2]), np.float32, name="B")
    total = a + b
    total.output(0).set_names({"sum"})
    model = ov.Model(total, [a, b], "graph")
    assert repr(model) == ("<Model: 'graph'\ninputs[\n<ConstOutput: names[A] shape[?,2] type: f32>,"
                           "\n<ConstOutput: names[B] shape[?,2] type: f32>\n]"
                           "\noutputs[\n<ConstOutput: names[sum] shape[?,2] type: f32>\n]>")
    assert all("[?,2]" in repr(op) for op in model.get_ordered_ops())


def test_async_queue_wait_all_raises_what_a_callback_raised() -> None:
    param = opset.parameter([2], np.float32, name="x")
    compiled = ov.Core().compile_model(ov.Model(opset.relu(param), [param]), "CPU")
    queue = ov.AsyncInferQueue(compiled, 2)
    seen: list[int] = []

    def callback(request: ov.InferRequest, userdata: int) -> None:
        seen.append(userdata)
        if userdata == 1:
            raise ValueError("callback failed on job 1")

    queue.set_callback(callback)
    raised: list[ValueError] = []
    started: list[int] = []
    for job in range(4):
        try:  # OpenVINO raises it from the next start_async (which starts nothing) or wait_all
            queue.start_async({"x": np.ones(2, np.float32)}, job)
            started.append(job)
        except ValueError as error:
            raised.append(error)
    try:
        queue.wait_all()
    except ValueError as error:
        raised.append(error)
    assert len(raised) == 1 and "job 1" in str(raised[0])  # raised once
    assert sorted(seen) == started and len(started) >= 3  # the other jobs still ran
    queue.start_async({"x": np.ones(2, np.float32)}, 5)
    queue.wait_all()  # raised once: the next wait is clean


def test_topk_matches_numpy_and_names_its_type() -> None:
    param = opset.parameter([2, 5], np.float32, name="x")
    top = opset.topk(param, np.int32(2), 1, "max", "value")
    assert top.type_info.name == "TopK" and top.get_type_info().name == "TopK"
    data = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)
    values, indices = _run([top.output(0), top.output(1)], [param], [data])
    np.testing.assert_array_equal(values, -np.sort(-data, axis=1)[:, :2])
    np.testing.assert_array_equal(indices, np.argsort(-data, axis=1, kind="stable")[:, :2])
    assert indices.dtype == np.int32  # OpenVINO's default index_element_type


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_mod_and_floor_mod_follow_the_dividend_and_divisor_signs(dtype: type) -> None:
    a = opset.parameter([4], dtype, name="a")
    b = opset.parameter([4], dtype, name="b")
    x, y = np.array([7, -7, 7, -7], dtype), np.array([3, 3, -3, -3], dtype)
    truncated, floored = _run([opset.mod(a, b), opset.floor_mod(a, b)], [a, b], [x, y])
    np.testing.assert_array_equal(truncated, np.fmod(x, y))
    np.testing.assert_array_equal(floored, np.mod(x, y))


# --- shared outputs, core-wide device keys, pairs in configs ---------------------------------------


def _abs_request(engine: str) -> ov.InferRequest:
    param = opset.parameter([2, 3], np.float32, name="x")
    model = ov.Model([opset.abs(param)], [param])
    return ov.Core().compile_model(model, "CPU", {"ENGINE": engine}).create_infer_request()


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_shared_outputs_view_the_output_tensor_and_copies_do_not(engine: str) -> None:
    request = _abs_request(engine)
    x = -np.arange(6, dtype=np.float32).reshape(2, 3)
    shared = request.infer(x, share_outputs=True)[0]
    assert np.array_equal(shared, np.abs(x))
    assert np.shares_memory(request.get_output_tensor(0).data, shared) and not shared.flags["OWNDATA"]
    copied = request.infer(x, share_outputs=False)[0]
    assert not np.shares_memory(request.get_output_tensor(0).data, copied) and copied.flags["OWNDATA"]


def test_core_wide_set_property_takes_keys_only_the_cpu_takes() -> None:
    hint = ov.properties.hint
    core = ov.Core()
    core.set_property(dict([hint.scheduling_core_type(hint.SchedulingCoreType.PCORE_ONLY),
                            hint.enable_hyper_threading(False), ov.properties.inference_num_threads(1)]))
    assert core.get_property("CPU", hint.scheduling_core_type) == hint.SchedulingCoreType.PCORE_ONLY
    assert core.get_property("CPU", hint.enable_hyper_threading) is False
    with pytest.raises(RuntimeError, match="NOT_A_KEY"):
        core.set_property({"NOT_A_KEY": 1})


def test_a_dict_of_typed_pairs_configures_a_compile() -> None:
    hint = ov.properties.hint
    param = opset.parameter([2], np.float32, name="x")
    model = ov.Model([opset.relu(param)], [param])
    config = dict([hint.performance_mode(hint.PerformanceMode.THROUGHPUT), ov.properties.streams.num(2)])
    assert config["PERFORMANCE_HINT"].value is hint.PerformanceMode.THROUGHPUT  # OVAny, as OpenVINO's
    compiled = ov.Core().compile_model(model, "CPU", config)
    assert compiled.get_property(hint.performance_mode) == "THROUGHPUT"  # text, as OpenVINO's CPU
    assert compiled.get_property("NUM_STREAMS") == 2
    np.testing.assert_array_equal(compiled(np.array([-1, 2], np.float32))[0], [0, 2])


def test_get_tensor_of_a_batched_input_names_the_batch() -> None:
    param = opset.parameter([2, 3], np.float32, name="x")
    request = ov.Core().compile_model(ov.Model([opset.abs(param)], [param]), "CPU").create_infer_request()
    request.set_input_tensors([ov.Tensor(np.ones((1, 3), np.float32)) for _ in range(2)])
    with pytest.raises(RuntimeError, match="get_tensor shall not be used together with batched"):
        request.get_tensor("x")
    np.testing.assert_array_equal(request.infer()[0], np.ones((2, 3)))


def test_rt_info_values_and_property_values_are_both_ovany() -> None:
    param = opset.parameter([2], np.float32, name="x")
    model = ov.Model([opset.relu(param)], [param])
    model.inputs[0].get_rt_info()["note"] = "kept"
    (value,) = model.inputs[0].get_rt_info().values()
    assert isinstance(value, ov.OVAny) and value.astype(str) == "kept"
    pair = ov.properties.hint.performance_mode(ov.properties.hint.PerformanceMode.LATENCY)
    assert isinstance(pair[1], ov.OVAny) and pair[1] == ov.OVAny("LATENCY")


def test_an_unknown_tensor_name_is_refused_in_openvino_s_words_from_a_callback() -> None:
    param = opset.parameter([2], np.float32, name="data")
    compiled = ov.Core().compile_model(ov.Model([opset.relu(param)], [param]), "CPU")
    queue = ov.AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda request, _: request.get_tensor("Unknown"))
    raised: list[RuntimeError] = []
    for _ in range(4):
        try:  # as OpenVINO, the next start_async or wait_all raises what a callback raised
            queue.start_async({"data": np.ones(2, np.float32)})
        except RuntimeError as error:
            raised.append(error)
    try:
        queue.wait_all()
    except RuntimeError as error:
        raised.append(error)
    assert raised
    for error in raised:
        assert re.search(r"Port for tensor name Unknown was not found.*inputs: data", str(error))
