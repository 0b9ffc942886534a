"""OpenVINO's typed property mirror (``ov.properties``): keys, pairs, enums, typed read-back.

The keys and value types are OpenVINO's (its Python API docs and
``tests/test_runtime/test_properties.py``); results are checked against numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferplex as ov
import inferplex.properties as props
from inferplex.errors import PropertyError
from inferplex.properties import device, hint, intel_auto, intel_cpu, log, streams

from conftest import make_model

MODEL = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [("x", TensorProto.FLOAT, [2, 4])], [("y", TensorProto.FLOAT, [2, 4])])
X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def gpu_core() -> Iterator[ov.Core]:
    """A Core with one emulated GPU (GPU.0 on torch's CPU)."""
    pytest.importorskip("torch")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        yield ov.Core()


# --- keys -----------------------------------------------------------------------------------------

KEYS = [
    (hint.performance_mode, "PERFORMANCE_HINT"), (hint.inference_precision, "INFERENCE_PRECISION_HINT"),
    (hint.enable_hyper_threading, "ENABLE_HYPER_THREADING"),
    (hint.scheduling_core_type, "SCHEDULING_CORE_TYPE"),
    (hint.num_requests, "PERFORMANCE_HINT_NUM_REQUESTS"), (hint.execution_mode, "EXECUTION_MODE_HINT"),
    (hint.model_priority, "MODEL_PRIORITY"), (hint.model_distribution_policy, "MODEL_DISTRIBUTION_POLICY"),
    (hint.enable_cpu_pinning, "ENABLE_CPU_PINNING"), (streams.num, "NUM_STREAMS"),
    (props.num_streams, "NUM_STREAMS"), (device.priorities, "MULTI_DEVICE_PRIORITIES"),
    (device.properties, "DEVICE_PROPERTIES"), (device.full_name, "FULL_DEVICE_NAME"),
    (device.id, "DEVICE_ID"), (device.type, "DEVICE_TYPE"),
    (device.capabilities, "OPTIMIZATION_CAPABILITIES"),
    (intel_auto.schedule_policy, "SCHEDULE_POLICY"),
    (intel_auto.enable_startup_fallback, "ENABLE_STARTUP_FALLBACK"),
    (intel_auto.enable_runtime_fallback, "ENABLE_RUNTIME_FALLBACK"), (props.enable_profiling, "PERF_COUNT"),
    (props.cache_dir, "CACHE_DIR"), (props.inference_num_threads, "INFERENCE_NUM_THREADS"),
    (props.supported_properties, "SUPPORTED_PROPERTIES"),
    (props.optimal_number_of_infer_requests, "OPTIMAL_NUMBER_OF_INFER_REQUESTS"),
    (props.execution_devices, "EXECUTION_DEVICES"), (props.available_devices, "AVAILABLE_DEVICES"),
    (props.model_name, "NETWORK_NAME"), (props.range_for_streams, "RANGE_FOR_STREAMS"),
    (props.range_for_async_infer_requests, "RANGE_FOR_ASYNC_INFER_REQUESTS"),
    (props.loaded_from_cache, "LOADED_FROM_CACHE"),
    (intel_cpu.denormals_optimization, "CPU_DENORMALS_OPTIMIZATION"),
    (log.level, "LOG_LEVEL"),
]


@pytest.mark.parametrize("prop, key", KEYS, ids=[k for _, k in KEYS])
def test_a_property_is_its_key_string_and_returns_it_when_called(prop: Any, key: str) -> None:
    assert prop() == key and type(prop()) is str
    assert prop == key  # usable as a dict key, as OpenVINO's are
    assert {prop: 1} == {key: 1}


PAIRS = [
    (hint.performance_mode(hint.PerformanceMode.THROUGHPUT), ("PERFORMANCE_HINT", "THROUGHPUT")),
    (hint.inference_precision(ov.Type.bf16), ("INFERENCE_PRECISION_HINT", ov.Type.bf16)),
    (hint.inference_precision("f16"), ("INFERENCE_PRECISION_HINT", ov.Type.f16)),
    (hint.num_requests(8), ("PERFORMANCE_HINT_NUM_REQUESTS", 8)),
    (hint.execution_mode(hint.ExecutionMode.ACCURACY), ("EXECUTION_MODE_HINT", "ACCURACY")),
    (hint.model_priority(hint.Priority.LOW), ("MODEL_PRIORITY", "LOW")),
    (hint.model_priority(hint.Priority.DEFAULT), ("MODEL_PRIORITY", "MEDIUM")),
    (hint.model_distribution_policy({hint.ModelDistributionPolicy.PIPELINE_PARALLEL}),
     ("MODEL_DISTRIBUTION_POLICY", {"PIPELINE_PARALLEL"})),
    (hint.model_distribution_policy(set()), ("MODEL_DISTRIBUTION_POLICY", set())),
    (hint.enable_cpu_pinning(False), ("ENABLE_CPU_PINNING", False)),
    (streams.num(42), ("NUM_STREAMS", 42)),
    (streams.num(streams.Num(3)), ("NUM_STREAMS", 3)),
    (streams.num(streams.Num.AUTO), ("NUM_STREAMS", -1)),  # OpenVINO's pair holds Num's integer
    (device.priorities("GPU", "CPU"), ("MULTI_DEVICE_PRIORITIES", "GPU,CPU,")),  # OpenVINO's comma
    (device.priorities("GPU,CPU"), ("MULTI_DEVICE_PRIORITIES", "GPU,CPU,")),
    (intel_auto.schedule_policy(intel_auto.SchedulePolicy.ROUND_ROBIN), ("SCHEDULE_POLICY", "ROUND_ROBIN")),
    (intel_auto.enable_startup_fallback(False), ("ENABLE_STARTUP_FALLBACK", False)),
    (props.enable_profiling(True), ("PERF_COUNT", True)),
    (props.inference_num_threads(4), ("INFERENCE_NUM_THREADS", 4)),
    (intel_cpu.denormals_optimization(True), ("CPU_DENORMALS_OPTIMIZATION", True)),
]


@pytest.mark.parametrize("pair, expected", PAIRS, ids=[f"{e[0]}={e[1]!r}" for _, e in PAIRS])
def test_a_property_called_with_a_value_returns_the_pair(pair: tuple[str, Any],
                                                         expected: tuple[str, Any]) -> None:
    assert pair == expected


def test_pairs_carry_typed_values() -> None:
    """As in OpenVINO, a pair's value is an ``OVAny`` whose ``.value`` is typed."""
    _, mode = hint.performance_mode(hint.PerformanceMode.LATENCY)
    assert isinstance(mode, ov.OVAny) and mode.value is hint.PerformanceMode.LATENCY
    assert hint.execution_mode("accuracy")[1].value is hint.ExecutionMode.ACCURACY
    assert streams.num(streams.Num.AUTO)[1].value == -1 and streams.num(streams.Num(2))[1].value == 2
    (policy,) = hint.model_distribution_policy({"PIPELINE_PARALLEL"})[1].value
    assert policy is hint.ModelDistributionPolicy.PIPELINE_PARALLEL
    nested = device.properties({"CPU": dict([streams.num(2), hint.inference_precision(ov.Type.f32)]),
                                "GPU": {hint.performance_mode: "THROUGHPUT"}})
    assert nested == ("DEVICE_PROPERTIES", {
        "CPU": {"NUM_STREAMS": 2, "INFERENCE_PRECISION_HINT": ov.Type.f32},
        "GPU": {"PERFORMANCE_HINT": hint.PerformanceMode.THROUGHPUT}})


# --- enums ----------------------------------------------------------------------------------------

ENUMS = [
    (hint.PerformanceMode, ["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"]),
    (hint.ExecutionMode, ["PERFORMANCE", "ACCURACY"]),
    (hint.Priority, ["LOW", "MEDIUM", "HIGH"]),
    (hint.ModelDistributionPolicy, ["TENSOR_PARALLEL", "PIPELINE_PARALLEL"]),
    (intel_auto.SchedulePolicy, ["ROUND_ROBIN", "DEVICE_PRIORITY", "EARLIEST_FINISH"]),
    (device.Type, ["INTEGRATED", "DISCRETE"]),
    (device.Capability, ["FP32", "BF16", "FP16", "INT8", "INT16", "BIN", "WINOGRAD", "EXPORT_IMPORT"]),
    (log.Level, ["NO", "ERR", "WARNING", "INFO", "DEBUG", "TRACE"]),
]


@pytest.mark.parametrize("enum, names", ENUMS, ids=[e.__name__ for e, _ in ENUMS])
def test_enums_have_openvinos_members(enum: Any, names: list[str]) -> None:
    assert [member.name for member in enum] == names


def test_enum_members_compare_equal_to_the_strings_inferplex_stores() -> None:
    assert hint.PerformanceMode.THROUGHPUT == "THROUGHPUT" and hint.PerformanceMode.THROUGHPUT != "LATENCY"
    assert hint.Priority.DEFAULT is hint.Priority.MEDIUM
    assert intel_auto.SchedulePolicy.DEFAULT is intel_auto.SchedulePolicy.DEVICE_PRIORITY
    assert device.Type.DISCRETE == "discrete" and device.Type.__name__ == "Type"
    assert device.Capability.FP32 == "FP32"


def test_streams_num() -> None:
    assert streams.Num().to_integer() == -1 and streams.Num.AUTO.to_integer() == -1
    assert streams.Num.NUMA.to_integer() == -2 and streams.Num(2).to_integer() == 2
    assert streams.Num(4) == 4 and streams.Num(4) == streams.Num(4) and streams.Num(4) != 5
    assert streams.Num.AUTO == "AUTO" and streams.Num.AUTO != streams.Num.NUMA
    with pytest.raises(PropertyError, match=r"Num\(0\).*integer >= 1"):
        streams.Num(0)


# --- refused values -------------------------------------------------------------------------------

REFUSED = [
    (lambda: hint.performance_mode("FASTEST"), "PERFORMANCE_HINT", "'FASTEST'", "LATENCY, THROUGHPUT"),
    (lambda: hint.inference_precision(ov.Type.i8), "INFERENCE_PRECISION_HINT", "<Type: 'int8_t'>",
     "f32, f16, bf16"),
    (lambda: hint.execution_mode("EXACT"), "EXECUTION_MODE_HINT", "'EXACT'", "PERFORMANCE, ACCURACY"),
    (lambda: hint.model_priority("URGENT"), "MODEL_PRIORITY", "'URGENT'", "LOW, MEDIUM, HIGH"),
    (lambda: streams.num(0), "NUM_STREAMS", "0", "AUTO (or -1) or an integer >= 1"),
    (lambda: streams.num(streams.Num.NUMA), "NUM_STREAMS", "NUMA", "AUTO (or -1) or an integer >= 1"),
    (lambda: device.priorities("GPU", "CPU,"), "MULTI_DEVICE_PRIORITIES", "'GPU,CPU,,'", "device list"),
    (lambda: device.properties({"CPU": 2}), "DEVICE_PROPERTIES", "{'CPU': 2}", "mapping of device name"),
    (lambda: intel_auto.schedule_policy("RANDOM"), "SCHEDULE_POLICY", "'RANDOM'", "ROUND_ROBIN"),
    (lambda: intel_auto.enable_runtime_fallback("maybe"), "ENABLE_RUNTIME_FALLBACK", "'maybe'", "True/False"),
    (lambda: intel_cpu.denormals_optimization("sometimes"), "CPU_DENORMALS_OPTIMIZATION", "'sometimes'",
     "True/False"),
]


@pytest.mark.parametrize("make, key, value, accepted", REFUSED, ids=[r[1] for r in REFUSED])
def test_bad_values_name_the_key_the_value_and_what_is_accepted(make: Any, key: str, value: str,
                                                                accepted: str) -> None:
    with pytest.raises(PropertyError) as info:
        make()
    assert key in str(info.value) and value in str(info.value) and accepted in str(info.value)


SET_REFUSED = [
    (lambda: hint.num_requests(-1), "PERFORMANCE_HINT_NUM_REQUESTS", "-1", "integer >= 0"),
    (lambda: hint.model_distribution_policy({hint.ModelDistributionPolicy.TENSOR_PARALLEL}),
     "MODEL_DISTRIBUTION_POLICY", "TENSOR_PARALLEL", "PIPELINE_PARALLEL"),
]


@pytest.mark.parametrize("make, key, value, accepted", SET_REFUSED, ids=[r[1] for r in SET_REFUSED])
def test_values_of_the_right_type_make_a_pair_and_are_refused_where_set(make: Any, key: str, value: str,
                                                                        accepted: str) -> None:
    """As OpenVINO's typed keys, a value of the key's type makes a pair; the device refuses it."""
    pair = make()
    assert pair[0] == key
    with pytest.raises(PropertyError) as info:
        ov.Core().set_property("HETERO" if key == "MODEL_DISTRIBUTION_POLICY" else "CPU", pair)
    assert key in str(info.value) and value in str(info.value) and accepted in str(info.value)


@pytest.mark.parametrize("prop", [props.supported_properties, props.execution_devices, device.full_name,
                                  device.type, props.range_for_streams, props.loaded_from_cache])
def test_read_only_properties_take_no_value(prop: Any) -> None:
    # a TypeError, as OpenVINO's read-only property functions raise for a value
    with pytest.raises(TypeError, match=rf"incompatible function arguments: property {prop()} is read-only"):
        prop("anything")


def test_log_level_sets_inferplex_s_logger_as_openvino_sets_its_own() -> None:
    import logging

    logger = logging.getLogger("inferplex")
    before = logger.level
    core = ov.Core()
    try:
        assert core.get_property("CPU", log.level) is log.Level.NO  # never set: OpenVINO's answer
        core.set_property("CPU", log.level(log.Level.WARNING))
        assert core.get_property("CPU", log.level) is log.Level.WARNING
        assert logger.getEffectiveLevel() == logging.WARNING
        core.set_property({"LOG_LEVEL": "LOG_DEBUG"})  # core-wide, in OpenVINO's string form
        assert logger.getEffectiveLevel() == logging.DEBUG
        core.set_property("CPU", {log.level: log.Level.NO})
        assert not logger.isEnabledFor(logging.CRITICAL)
        with pytest.raises(PropertyError, match=r"LOG_LEVEL.*LOUD.*LOG_NONE, LOG_ERROR"):
            core.set_property("CPU", {"LOG_LEVEL": "LOUD"})
    finally:
        logger.setLevel(before)


# --- use through the API, CPU ---------------------------------------------------------------------

def test_core_takes_a_pair_or_a_dict_and_reads_back_typed() -> None:
    core = ov.Core()
    core.set_property("CPU", hint.performance_mode(hint.PerformanceMode.THROUGHPUT))
    core.set_property("CPU", {streams.num: streams.Num(2), props.enable_profiling: True,
                              hint.model_priority: hint.Priority.HIGH, "INFERENCE_NUM_THREADS": 2})
    assert core.get_property("CPU", hint.performance_mode) is hint.PerformanceMode.THROUGHPUT
    assert core.get_property("CPU", hint.performance_mode()) == "THROUGHPUT"  # strings still compare
    assert core.get_property("CPU", streams.num) == 2
    assert core.get_property("CPU", props.enable_profiling) is True  # PERF_COUNT read as ENABLE_PROFILING
    assert core.get_property("CPU", hint.model_priority) is hint.Priority.HIGH
    assert core.get_property("CPU", props.inference_num_threads) == 2
    core.set_property("CPU", streams.num(streams.Num.AUTO))
    assert core.get_property("CPU", streams.num) == -1  # an int, as OpenVINO reads NUM_STREAMS back


def test_cpu_device_facts_are_typed() -> None:
    core = ov.Core()
    assert core.get_property("CPU", device.type) is device.Type.INTEGRATED
    assert core.get_property("CPU", device.id) == ""
    assert isinstance(core.get_property("CPU", device.full_name), str)
    capabilities = core.get_property("CPU", device.capabilities)
    assert isinstance(capabilities, list) and device.Capability.FP32 in capabilities
    low, high = core.get_property("CPU", props.range_for_streams)
    assert low == 1 and high >= 1
    first, last, step = core.get_property("CPU", props.range_for_async_infer_requests)
    assert (first, step) == (1, 1) and last >= 1
    assert core.get_property("CPU", props.available_devices) == [""]  # OpenVINO's: the family's device ids
    assert isinstance(core.get_property("CPU", props.optimal_number_of_infer_requests), int)
    assert core.get_property("CPU", hint.execution_mode) is hint.ExecutionMode.PERFORMANCE


def test_supported_properties_say_which_can_be_set() -> None:
    core = ov.Core()
    supported = core.get_property("CPU", props.supported_properties)
    assert supported["NUM_STREAMS"] == "RW" and supported["EXECUTION_MODE_HINT"] == "RW"
    assert supported["FULL_DEVICE_NAME"] == "RO" and supported["RANGE_FOR_STREAMS"] == "RO"
    for key in supported:  # every key listed can be read, as in OpenVINO
        core.get_property("CPU", key)
    with pytest.raises(PropertyError, match="read-only"):
        core.set_property("CPU", {"RANGE_FOR_STREAMS": (1, 2)})
    compiled = core.compile_model(MODEL, "CPU")
    listed = compiled.get_property(props.supported_properties)
    assert listed["EXECUTION_DEVICES"] == "RO" and listed["PERFORMANCE_HINT"] == "RO"
    for key in listed:
        compiled.get_property(key)


def test_compile_with_typed_config_and_read_back_typed() -> None:
    core = ov.Core()
    config = {hint.performance_mode: hint.PerformanceMode.THROUGHPUT, streams.num: 2,
              hint.inference_precision: ov.Type.f32, props.enable_profiling: False,
              hint.model_priority: hint.Priority.LOW}
    compiled = core.compile_model(MODEL, "CPU", config)
    # OpenVINO's CPU compiled model reads its hint as text, where the device reads the enum
    assert compiled.get_property(hint.performance_mode()) == "THROUGHPUT"
    assert type(compiled.get_property(hint.performance_mode())) is str
    assert core.get_property("CPU", hint.performance_mode()) is hint.PerformanceMode.LATENCY
    assert compiled.get_property(hint.inference_precision) == ov.Type.f32
    assert compiled.get_property(streams.num) == 2
    assert compiled.get_property(props.execution_devices) == ["CPU"]
    assert compiled.get_property(props.model_name) == "tiny"
    assert compiled.get_property(props.loaded_from_cache) is False
    assert compiled.get_property(hint.model_priority) is hint.Priority.LOW
    assert isinstance(compiled.get_property(hint.enable_cpu_pinning), bool)
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    paired = core.compile_model(MODEL, "CPU", hint.performance_mode(hint.PerformanceMode.LATENCY))
    assert paired.get_property(hint.performance_mode) == "LATENCY"
    np.testing.assert_array_equal(paired(X)[0], np.maximum(X, 0))



def test_cpu_defaults_and_scheduling_hints_read_as_openvino_reads_them() -> None:
    """OpenVINO's CPU answers NUM_STREAMS 1 before any compile (a compile's streams still
    follow its hint), lists EXPORT_IMPORT, and takes the hyper-threading and core-type hints."""
    core = ov.Core()
    assert core.get_property("CPU", streams.num) == 1
    assert device.Capability.EXPORT_IMPORT in core.get_property("CPU", device.capabilities)
    assert core.get_property("CPU", hint.scheduling_core_type) is hint.SchedulingCoreType.ANY_CORE
    assert isinstance(core.get_property("CPU", hint.enable_hyper_threading), bool)
    throughput = core.compile_model(MODEL, "CPU", {hint.performance_mode: hint.PerformanceMode.THROUGHPUT})
    assert throughput.get_property(streams.num) >= 1
    for engine in ("OPENVINO", "ONNXRUNTIME"):
        compiled = core.compile_model(MODEL, "CPU", {
            "ENGINE": engine, hint.enable_hyper_threading: False,
            hint.scheduling_core_type: hint.SchedulingCoreType.PCORE_ONLY})
        assert compiled.get_property(hint.enable_hyper_threading) is False
        assert compiled.get_property(hint.scheduling_core_type) is hint.SchedulingCoreType.PCORE_ONLY
        np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    with pytest.raises(PropertyError, match=r"SCHEDULING_CORE_TYPE.*ANY_CORE, PCORE_ONLY, ECORE_ONLY"):
        core.compile_model(MODEL, "CPU", {"SCHEDULING_CORE_TYPE": "BIG_CORES"})

def test_config_forms_openvino_refuses_are_refused() -> None:
    core = ov.Core()
    with pytest.raises(PropertyError, match=r"dict\(pairs\)"):
        core.compile_model(MODEL, "CPU", [hint.performance_mode(hint.PerformanceMode.LATENCY)])
    with pytest.raises(PropertyError, match=r"PERFORMANCE_HINT.*'FAST'.*LATENCY"):
        core.compile_model(MODEL, "CPU", {hint.performance_mode: "FAST"})
    compiled = core.compile_model(MODEL, "CPU", dict([streams.num(1), hint.num_requests(1)]))
    assert compiled.get_property(hint.num_requests) == "1"  # text, as OpenVINO's CPU compiled model reads it
    with pytest.raises(PropertyError, match="cannot be changed"):
        compiled.set_property(hint.performance_mode(hint.PerformanceMode.THROUGHPUT))


def test_execution_mode_accuracy_means_f32_unless_a_precision_is_set() -> None:
    core = ov.Core()
    core.set_property("CPU", hint.execution_mode(hint.ExecutionMode.ACCURACY))
    assert core.get_property("CPU", hint.inference_precision) == ov.Type.f32
    compiled = core.compile_model(MODEL, "CPU")
    assert compiled.get_property(hint.execution_mode) is hint.ExecutionMode.ACCURACY
    assert compiled.get_property(hint.inference_precision) == ov.Type.f32
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    core.set_property("CPU", hint.inference_precision(ov.Type.bf16))  # an explicit precision wins
    assert core.get_property("CPU", hint.inference_precision) == ov.Type.bf16


# --- emulated GPU ---------------------------------------------------------------------------------

def test_emulated_gpu_takes_typed_properties(gpu_core: ov.Core) -> None:
    assert gpu_core.get_property("GPU.0", device.type) is device.Type.DISCRETE
    assert gpu_core.get_property("GPU", device.id) == "0"
    assert {"FP32", "FP16"} <= set(gpu_core.get_property("GPU.0", device.capabilities))
    low, high = gpu_core.get_property("GPU.0", props.range_for_streams)
    assert 1 == low <= high
    assert gpu_core.get_property("GPU", props.available_devices) == ["0"]
    compiled = gpu_core.compile_model(MODEL, "GPU.0", {
        hint.performance_mode: hint.PerformanceMode.THROUGHPUT, hint.num_requests: 1,
        hint.execution_mode: hint.ExecutionMode.ACCURACY, hint.model_priority: hint.Priority.HIGH})
    assert compiled.get_property(hint.performance_mode) is hint.PerformanceMode.THROUGHPUT
    assert compiled.get_property(hint.inference_precision) == ov.Type.f32
    assert compiled.get_property(hint.model_priority) is hint.Priority.HIGH
    assert compiled.get_property(props.optimal_number_of_infer_requests) == 1
    assert compiled.get_property(props.execution_devices) == ["GPU.0"]
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    half = gpu_core.compile_model(MODEL, "GPU.0", hint.inference_precision(ov.Type.f16))
    assert half.get_property(hint.inference_precision) == ov.Type.f16
    np.testing.assert_allclose(half(X)[0], np.maximum(X, 0), atol=1e-3)


# --- virtual devices ------------------------------------------------------------------------------

def test_hetero_takes_priorities_device_properties_and_policy(gpu_core: ov.Core) -> None:
    config = {device.priorities: "GPU.0,CPU",
              device.properties: {"CPU": {hint.performance_mode: hint.PerformanceMode.LATENCY}},
              hint.model_distribution_policy: {hint.ModelDistributionPolicy.PIPELINE_PARALLEL}}
    compiled = gpu_core.compile_model(MODEL, "HETERO", config)
    assert compiled.get_property(device.priorities) == "GPU.0,CPU"
    assert compiled.get_property(hint.model_distribution_policy) == {
        hint.ModelDistributionPolicy.PIPELINE_PARALLEL}
    assert compiled.get_property(device.properties) == {"CPU": {"PERFORMANCE_HINT": "LATENCY"}}
    assert isinstance(compiled.get_property(props.execution_devices), list)
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    gpu_core.set_property("HETERO", device.priorities("CPU"))
    assert gpu_core.get_property("HETERO", device.priorities) == "CPU"
    assert gpu_core.get_property("HETERO", props.supported_properties)["FULL_DEVICE_NAME"] == "RO"


def test_auto_takes_schedule_policy_and_reads_it_back_typed(gpu_core: ov.Core) -> None:
    compiled = gpu_core.compile_model(MODEL, "AUTO:GPU.0,CPU", {
        hint.performance_mode: hint.PerformanceMode.CUMULATIVE_THROUGHPUT,
        intel_auto.schedule_policy: intel_auto.SchedulePolicy.ROUND_ROBIN,
        intel_auto.enable_runtime_fallback: True})
    assert compiled.get_property(hint.performance_mode) is hint.PerformanceMode.CUMULATIVE_THROUGHPUT
    assert compiled.get_property(intel_auto.schedule_policy) is intel_auto.SchedulePolicy.ROUND_ROBIN
    assert compiled.get_property(props.supported_properties)["SCHEDULE_POLICY"] == "RW"
    assert sorted(compiled.get_property(props.execution_devices)) == ["CPU", "GPU.0"]
    np.testing.assert_array_equal(compiled(X)[0], np.maximum(X, 0))
    compiled.set_property(intel_auto.schedule_policy(intel_auto.SchedulePolicy.DEVICE_PRIORITY))
    assert compiled.get_property(intel_auto.schedule_policy) is intel_auto.SchedulePolicy.DEVICE_PRIORITY


def test_virtual_devices_refuse_tensor_parallel(gpu_core: ov.Core) -> None:
    with pytest.raises(PropertyError, match=r"TENSOR_PARALLEL.*not implemented"):
        gpu_core.compile_model(MODEL, "HETERO:GPU.0,CPU",
                               {hint.model_distribution_policy: {"TENSOR_PARALLEL"}})
