"""OpenVINO CPU-plugin properties on inferplex's CPU device: accepted with OpenVINO's values and
defaults, passed to OpenVINO's compile where its engine runs the model, reported by the compiled
model; the Core's options a compile config may carry; compiled-model return types; the virtual
devices' FULL_DEVICE_NAME.  Compared with OpenVINO where it is installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import inferplex as ov
import inferplex.properties as props
from inferplex.errors import DeviceNameError, PropertyError

hint = ov.properties.hint
intel_cpu = ov.properties.intel_cpu

X = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)


def _model() -> ov.Model:
    param = ov.opset13.parameter([1, 4], np.float32, name="x")
    return ov.Model([ov.opset13.relu(param)], [param], "relu")


def _openvino_compiled(config: dict[str, Any], device: str = "CPU") -> Any:
    openvino = pytest.importorskip("openvino")
    param = openvino.opset13.parameter([1, 4], np.float32, name="x")
    model = openvino.Model([openvino.opset13.relu(param)], [param], "relu")
    return openvino.Core().compile_model(model, device, config)


def _plain(value: Any) -> Any:
    """A value of either library in one comparable form: element types and enum members by name,
    sets as sorted names, floats to float32's precision."""
    if hasattr(value, "get_type_name"):
        return value.get_type_name()
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (bool, int, str, list, tuple, dict)):
        return value
    return str(value).rsplit(".", 1)[-1]


_SET_AND_READ = [
    ("KV_CACHE_PRECISION", "u4", "u4"),
    ("KEY_CACHE_PRECISION", "f16", "f16"),
    ("VALUE_CACHE_PRECISION", "u4", "u4"),
    ("KEY_CACHE_GROUP_SIZE", 32, 32),
    ("VALUE_CACHE_GROUP_SIZE", "64", 64),
    ("DYNAMIC_QUANTIZATION_GROUP_SIZE", 64, 64),
    ("CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE", 0.5, 0.5),
    ("TBB_PARTITIONER", "AUTO", "AUTO"),
    ("ENABLE_TENSOR_PARALLEL", True, True),
    ("MODEL_DISTRIBUTION_POLICY", "TENSOR_PARALLEL", ["TENSOR_PARALLEL"]),
    ("ENABLE_CPU_RESERVATION", False, False),
]


@pytest.mark.parametrize(("key", "value", "expected"), _SET_AND_READ)
def test_openvino_cpu_keys_compile_and_read_back_as_openvino(key: str, value: Any, expected: Any) -> None:
    compiled = ov.Core().compile_model(_model(), "CPU", {key: value})
    assert compiled.get_property("ENGINE") == "OPENVINO"
    ours = compiled.get_property(key)
    assert _plain(ours) == expected
    theirs = _openvino_compiled({key: value}).get_property(key)
    assert type(ours).__name__ == type(theirs).__name__
    assert _plain(ours) == _plain(theirs)
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))


@pytest.mark.parametrize(("key", "value", "expected"), _SET_AND_READ)
def test_openvino_cpu_keys_set_on_the_device_read_back(key: str, value: Any, expected: Any) -> None:
    core = ov.Core()
    core.set_property("CPU", {key: value})
    assert _plain(core.get_property("CPU", key)) == expected


def test_every_key_openvinos_cpu_lists_is_read_with_openvinos_default() -> None:
    openvino = pytest.importorskip("openvino")
    theirs = openvino.Core()
    supported = theirs.get_property("CPU", "SUPPORTED_PROPERTIES")
    ours = ov.Core()
    listed = ours.get_property("CPU", "SUPPORTED_PROPERTIES")
    compared = {key for key, _, _ in _SET_AND_READ}
    compared |= {"EXECUTION_DEVICES", "WEIGHTS_PATH", "ENABLE_WEIGHTLESS"}
    # COMPATIBILITY_CHECK: OpenVINO's Python API cannot read it either
    for key in (k for k in supported if k != "COMPATIBILITY_CHECK"):
        assert key in listed, key
        value = ours.get_property("CPU", key)
        if key == "TBB_PARTITIONER":  # OpenVINO's Python enum leaves its 0 unnamed
            assert int(value) == int(theirs.get_property("CPU", key)) == 0
        elif key in compared:
            assert _plain(value) == _plain(theirs.get_property("CPU", key)), key
    assert ours.get_property("CPU", "CACHING_PROPERTIES") == theirs.get_property("CPU", "CACHING_PROPERTIES")


@pytest.mark.parametrize(("key", "value"), [
    ("KV_CACHE_PRECISION", "i8"),
    ("VALUE_CACHE_PRECISION", "i8"),
    ("CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE", 1.5),
    ("TBB_PARTITIONER", "FAST"),
    ("KEY_CACHE_GROUP_SIZE", "abc"),
    ("ENABLE_CPU_RESERVATION", "maybe"),
    ("MODEL_DISTRIBUTION_POLICY", "PIPELINE_PARALLEL"),
])
def test_values_openvinos_cpu_refuses_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(PropertyError, match=f"{key}.*accepted"):
        ov.Core().compile_model(_model(), "CPU", {key: value})
    with pytest.raises(RuntimeError):
        _openvino_compiled({key: value})


def test_model_distribution_policy_means_the_cpus_on_the_cpu_and_heteros_on_hetero() -> None:
    core = ov.Core()
    cpu = core.compile_model(_model(), "CPU", {"MODEL_DISTRIBUTION_POLICY": "TENSOR_PARALLEL"})
    assert cpu.get_property("MODEL_DISTRIBUTION_POLICY") == {hint.ModelDistributionPolicy.TENSOR_PARALLEL}
    pipeline = hint.ModelDistributionPolicy.PIPELINE_PARALLEL
    hetero = core.compile_model(_model(), "HETERO:CPU", {"MODEL_DISTRIBUTION_POLICY": pipeline})
    assert hetero.get_property("MODEL_DISTRIBUTION_POLICY") == {pipeline}
    np.testing.assert_array_equal(hetero(X)[0], np.maximum(X, 0))
    with pytest.raises(PropertyError, match=r"MODEL_DISTRIBUTION_POLICY.*HETERO"):
        core.compile_model(_model(), "HETERO:CPU", {"MODEL_DISTRIBUTION_POLICY": "TENSOR_PARALLEL"})


def test_key_cache_takes_i8_where_the_kv_and_value_caches_do_not() -> None:
    compiled = ov.Core().compile_model(_model(), "CPU", {"KEY_CACHE_PRECISION": ov.Type.i8})
    assert compiled.get_property("KEY_CACHE_PRECISION") == ov.Type.i8


def test_typed_keys_configure_a_compile() -> None:
    config = dict([hint.kv_cache_precision(ov.Type.f16), hint.dynamic_quantization_group_size(16),
                   intel_cpu.tbb_partitioner(intel_cpu.TbbPartitioner.STATIC),
                   props.key_cache_group_size(8), props.value_cache_precision(ov.Type.u8),
                   intel_cpu.sparse_weights_decompression_rate(0.25)])
    compiled = ov.Core().compile_model(_model(), "CPU", config)
    assert compiled.get_property(hint.kv_cache_precision) == ov.Type.f16
    assert compiled.get_property(hint.dynamic_quantization_group_size) == 16
    assert compiled.get_property(intel_cpu.tbb_partitioner) is intel_cpu.TbbPartitioner.STATIC
    assert compiled.get_property(props.key_cache_group_size) == 8
    assert compiled.get_property(props.value_cache_precision) == ov.Type.u8
    assert compiled.get_property(intel_cpu.sparse_weights_decompression_rate) == pytest.approx(0.25)


def test_the_compiled_model_reports_what_openvino_compiled_with() -> None:
    """The OpenVINO engine reads these back from OpenVINO's compiled model, not from the config:
    the precision and KV-cache type asked take effect, and the TBB partitioner, unset, reads as
    the one OpenVINO's compile chose (the device reads NONE before any compile)."""
    config = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f16"}
    core = ov.Core()
    compiled = core.compile_model(_model(), "CPU", config)
    raw = _openvino_compiled(config)
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    assert compiled.get_property("KV_CACHE_PRECISION") == ov.Type.f16
    assert _plain(compiled.get_property("KV_CACHE_PRECISION")) == \
        _plain(raw.get_property("KV_CACHE_PRECISION"))
    assert core.get_property("CPU", "TBB_PARTITIONER") is intel_cpu.TbbPartitioner.NONE
    assert _plain(compiled.get_property("TBB_PARTITIONER")) == _plain(raw.get_property("TBB_PARTITIONER"))
    assert compiled.get_property("TBB_PARTITIONER") is not intel_cpu.TbbPartitioner.NONE
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))


def test_onnx_runtime_engine_reports_openvinos_keys_as_set() -> None:
    config = {"ENGINE": "ONNXRUNTIME", "KV_CACHE_PRECISION": "u4", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0,
              "TBB_PARTITIONER": "AUTO", "WEIGHTS_PATH": "weights.bin"}
    compiled = ov.Core().compile_model(_model(), "CPU", config)
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert compiled.get_property("KV_CACHE_PRECISION") == ov.Type.u4
    assert compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE") == 0
    assert compiled.get_property("TBB_PARTITIONER") is intel_cpu.TbbPartitioner.AUTO
    assert compiled.get_property("WEIGHTS_PATH") == "weights.bin"
    assert compiled.get_property("KEY_CACHE_PRECISION") == ov.Type.u8  # never set: OpenVINO's default
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))


def test_onnx_runtime_engine_refuses_cpu_reservation_it_cannot_hold() -> None:
    with pytest.raises(PropertyError, match=r"ENABLE_CPU_RESERVATION.*ONNX Runtime.*accepted"):
        ov.Core().compile_model(_model(), "CPU", {"ENGINE": "ONNXRUNTIME", "ENABLE_CPU_RESERVATION": True})


_CORE_OPTIONS = {"ENABLE_MMAP": False, "CACHE_MODE": "OPTIMIZE_SIZE", "ALLOW_AUTO_BATCHING": False,
                 "AUTO_BATCH_TIMEOUT": 100}


@pytest.mark.parametrize("device", ["CPU", "AUTO:CPU", "MULTI:CPU", "HETERO:CPU"])
@pytest.mark.parametrize(("key", "value"), list(_CORE_OPTIONS.items()))
def test_the_cores_options_in_a_compile_config_are_taken_as_openvino_takes_them(
        device: str, key: str, value: Any) -> None:
    compiled = ov.Core().compile_model(_model(), device, {key: value})
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    with pytest.raises(PropertyError, match=key):  # the Core's, not the compiled model's
        compiled.get_property(key)
    raw = _openvino_compiled({key: value}, device)
    with pytest.raises(RuntimeError):
        raw.get_property(key)


@pytest.mark.parametrize("key", ["ENABLE_MMAP", "CACHE_MODE", "ALLOW_AUTO_BATCHING"])
def test_the_cores_options_are_not_the_cpus_to_read(key: str) -> None:
    openvino = pytest.importorskip("openvino")
    with pytest.raises(PropertyError, match=key):
        ov.Core().get_property("CPU", key)
    with pytest.raises(RuntimeError):
        openvino.Core().get_property("CPU", key)


def test_the_cores_options_are_checked_and_read_back_core_wide() -> None:
    core = ov.Core()
    with pytest.raises(PropertyError, match=r"CACHE_MODE.*OPTIMIZE_SPEED"):
        core.compile_model(_model(), "CPU", {"CACHE_MODE": "SMALLEST"})
    with pytest.raises(PropertyError, match="ENABLE_MMAP"):
        core.compile_model(_model(), "CPU", {"ENABLE_MMAP": "sometimes"})
    core.set_property({"CACHE_MODE": props.CacheMode.OPTIMIZE_SIZE, "ENABLE_MMAP": False})
    assert core.get_property("CACHE_MODE") is props.CacheMode.OPTIMIZE_SIZE
    assert core.get_property("ENABLE_MMAP") is False
    core.set_property("CPU", {"CACHE_MODE": "OPTIMIZE_SPEED"})  # taken for the CPU, as OpenVINO takes it


def test_cpu_facts_execution_devices_and_caching_properties() -> None:
    core = ov.Core()
    assert core.get_property("CPU", "EXECUTION_DEVICES") == ["CPU"]
    assert core.get_property("CPU", "CACHING_PROPERTIES") == {"FULL_DEVICE_NAME": "RO"}
    assert core.get_property("CPU", "WEIGHTS_PATH") == ""  # write-only in OpenVINO: reads empty


# --- return types of CompiledModel.get_property ---------------------------------------------------


_TYPED_KEYS = ("PERFORMANCE_HINT", "EXECUTION_MODE_HINT", "INFERENCE_PRECISION_HINT", "SCHEDULING_CORE_TYPE",
               "PERF_COUNT", "PERFORMANCE_HINT_NUM_REQUESTS", "NUM_STREAMS", "ENABLE_CPU_PINNING",
               "LOG_LEVEL", "MODEL_DISTRIBUTION_POLICY", "KV_CACHE_PRECISION", "TBB_PARTITIONER")


@pytest.mark.parametrize("mode", ["LATENCY", "THROUGHPUT"])
def test_a_cpu_compiled_model_returns_openvinos_types(mode: str) -> None:
    compiled = ov.Core().compile_model(_model(), "CPU", {"PERFORMANCE_HINT": mode})
    raw = _openvino_compiled({"PERFORMANCE_HINT": mode})
    for key in _TYPED_KEYS:
        ours, theirs = compiled.get_property(key), raw.get_property(key)
        assert type(ours).__name__ == type(theirs).__name__, key
        if key not in ("NUM_STREAMS", "INFERENCE_PRECISION_HINT"):  # this machine's, both
            assert _plain(ours) == _plain(theirs), key
    assert compiled.get_property("PERFORMANCE_HINT") == mode
    assert compiled.get_property(hint.performance_mode) == mode
    assert compiled.get_property("PERF_COUNT") == "NO"
    assert compiled.get_property("ENABLE_PROFILING") is False  # inferplex's spelling reads a bool
    assert compiled.get_property("PERFORMANCE_HINT_NUM_REQUESTS") == "0"


def test_the_cpu_device_still_returns_the_enum() -> None:
    openvino = pytest.importorskip("openvino")
    ours = ov.Core().get_property("CPU", "PERFORMANCE_HINT")
    theirs = openvino.Core().get_property("CPU", "PERFORMANCE_HINT")
    assert ours is hint.PerformanceMode.LATENCY
    assert type(ours).__name__ == type(theirs).__name__ == "PerformanceMode"


@pytest.mark.parametrize("device", ["AUTO:CPU", "MULTI:CPU"])
def test_auto_and_multi_compiled_models_return_openvinos_types(device: str) -> None:
    config = {"PERFORMANCE_HINT": "THROUGHPUT"}
    compiled = ov.Core().compile_model(_model(), device, config)
    raw = _openvino_compiled(config, device)
    for key in ("PERFORMANCE_HINT", "PERF_COUNT", "MODEL_PRIORITY", "EXECUTION_DEVICES",
                "MULTI_DEVICE_PRIORITIES"):
        ours, theirs = compiled.get_property(key), raw.get_property(key)
        assert type(ours).__name__ == type(theirs).__name__, key
        assert _plain(ours) == _plain(theirs), key
    assert compiled.get_property("PERFORMANCE_HINT") is hint.PerformanceMode.THROUGHPUT


@pytest.mark.parametrize("device", ["AUTO", "MULTI", "HETERO"])
def test_virtual_devices_full_names_are_openvinos(device: str) -> None:
    openvino = pytest.importorskip("openvino")
    name = ov.Core().get_property(device, "FULL_DEVICE_NAME")
    assert name == device
    assert name == openvino.Core().get_property(device, "FULL_DEVICE_NAME")


# --- OpenVINO's automatic batching device ---------------------------------------------------------


@pytest.mark.parametrize(("device", "config"), [
    ("BATCH:CPU(4)", {}),
    ("BATCH:CPU", {}),
    ("BATCH:CPU(2)", {"AUTO_BATCH_TIMEOUT": 50}),
])
def test_batch_device_compiles_on_the_cpu_and_reports_as_openvino(device: str,
                                                                   config: dict[str, Any]) -> None:
    compiled = ov.Core().compile_model(_model(), device, config)
    raw = _openvino_compiled(config, device)
    for key in ("OPTIMAL_NUMBER_OF_INFER_REQUESTS", "EXECUTION_DEVICES", "AUTO_BATCH_TIMEOUT"):
        assert compiled.get_property(key) == raw.get_property(key), key
    assert compiled.get_property("PERFORMANCE_HINT") == raw.get_property("PERFORMANCE_HINT") == "LATENCY"
    results: dict[int, np.ndarray] = {}
    queue = ov.AsyncInferQueue(compiled)
    assert len(queue) == compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    queue.set_callback(lambda request, index: results.__setitem__(index, request.results[0].copy()))
    for index in range(6):
        queue.start_async({"x": X * (index + 1)}, index)
    queue.wait_all()
    for index, got in results.items():
        np.testing.assert_array_equal(got, np.maximum(X * (index + 1), 0))
    assert sorted(results) == list(range(6))


@pytest.mark.parametrize("device", ["BATCH:", "BATCH:CPU(four)"])
def test_batch_device_names_are_checked(device: str) -> None:
    with pytest.raises(DeviceNameError, match=r"BATCH:<device>\(<batch size>\)"):
        ov.Core().compile_model(_model(), device)
