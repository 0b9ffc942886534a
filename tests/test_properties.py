"""Device strings, property values, Core properties, and the CPU stream layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.config.devices import DeviceSpec, DeviceTarget, parse_device_list, parse_device_string
from inferplex.config.schema import canonical_key, normalize_config, normalize_property
from inferplex.config.values import parse_bytes
from inferplex.devices.cpu import stream_layout
from inferplex.errors import DeviceNameError, PropertyError

from conftest import make_model

T = DeviceTarget

# --- device strings ------------------------------------------------------------------------------

VALID_DEVICE_STRINGS = [
    ("CPU", None, (T("CPU"),), ()),
    ("GPU", None, (T("GPU"),), ()),
    ("GPU.1", None, (T("GPU.1"),), ()),
    ("NPU_2.0", None, (T("NPU_2.0"),), ()),
    ("HETERO", "HETERO", (), ()),
    ("HETERO:GPU,CPU", "HETERO", (T("GPU"), T("CPU")), ()),
    ("HETERO:GPU.1,GPU.0,CPU", "HETERO", (T("GPU.1"), T("GPU.0"), T("CPU")), ()),
    ("MULTI", "MULTI", (), ()),
    ("MULTI:CPU", "MULTI", (T("CPU"),), ()),
    ("MULTI:CPU(2),GPU.0(4)", "MULTI", (T("CPU", 2), T("GPU.0", 4)), ()),
    ("MULTI:GPU.0(4),CPU", "MULTI", (T("GPU.0", 4), T("CPU")), ()),
    ("AUTO", "AUTO", (), ()),
    ("AUTO:GPU.1,CPU", "AUTO", (T("GPU.1"), T("CPU")), ()),
    ("AUTO:CPU(2)", "AUTO", (T("CPU", 2),), ()),
    ("AUTO:-CPU", "AUTO", (), ("CPU",)),
    ("AUTO:-CPU,-GPU.1", "AUTO", (), ("CPU", "GPU.1")),
]


@pytest.mark.parametrize("text, virtual, targets, exclusions", VALID_DEVICE_STRINGS,
                         ids=[row[0] for row in VALID_DEVICE_STRINGS])
def test_device_string_grammar(text: str, virtual: str | None, targets: tuple[DeviceTarget, ...],
                               exclusions: tuple[str, ...]) -> None:
    spec = parse_device_string(text)
    assert spec == DeviceSpec(virtual, targets, exclusions)
    assert spec.names == tuple(t.name for t in targets)
    assert spec.text == text


INVALID_DEVICE_STRINGS = [
    ("", "non-empty"),
    ("cpu", "malformed device name 'cpu'"),
    ("Cpu.0", "malformed device name"),
    ("GPU.", "malformed device name"),
    ("GPU.x", "malformed device name"),
    ("GPU 0", "malformed device name"),
    ("CPU(2)", "only accepted in MULTI/AUTO"),
    ("CPU:GPU", "unknown virtual device 'CPU'"),
    ("hetero:CPU", "unknown virtual device 'hetero'"),
    ("HETERO:", "empty device list"),
    ("HETERO:CPU(2)", "only accepted in MULTI/AUTO"),
    ("HETERO:-CPU", "only accepted in AUTO"),
    ("HETERO:GPU,,CPU", "single commas"),
    ("HETERO:GPU, CPU", "single commas"),
    ("HETERO:GPU,CPU,", "single commas"),
    ("MULTI:CPU,CPU", "more than once"),
    ("MULTI:CPU(0)", "at least 1"),
    ("MULTI:CPU(-1)", "malformed device name"),
    ("MULTI:CPU(x)", "malformed device name"),
    ("MULTI:-GPU", "only accepted in AUTO"),
    ("MULTI:HETERO", "cannot be listed inside MULTI"),
    ("AUTO:MULTI:CPU", "malformed device name"),
    ("AUTO:GPU,-CPU", "either a candidate list or exclusions"),
    ("AUTO:-CPU(2)", "request count"),
    ("AUTO:-CPU,-CPU", "more than once"),
]


@pytest.mark.parametrize("text, message", INVALID_DEVICE_STRINGS,
                         ids=[row[0] or "<empty>" for row in INVALID_DEVICE_STRINGS])
def test_malformed_device_strings(text: str, message: str) -> None:
    with pytest.raises(DeviceNameError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_device_string(text)


def test_non_string_device_name() -> None:
    with pytest.raises(DeviceNameError, match="non-empty string"):
        parse_device_string(None)  # type: ignore[arg-type]


def test_device_list_options() -> None:
    assert parse_device_list("GPU.0(4),CPU", allow_counts=True) == (T("GPU.0", 4), T("CPU"))
    assert parse_device_list("-CPU", allow_exclusions=True) == (T("-CPU"),)
    with pytest.raises(DeviceNameError, match="request count"):
        parse_device_list("GPU.0(4),CPU")
    with pytest.raises(DeviceNameError, match="empty device list"):
        parse_device_list("  ")


# --- property values -----------------------------------------------------------------------------

NORMALISED = [
    ("PERF_COUNT", "YES", "ENABLE_PROFILING", True),
    ("perf_count", "no", "ENABLE_PROFILING", False),
    ("ENABLE_PROFILING", True, "ENABLE_PROFILING", True),
    ("ENABLE_PROFILING", "off", "ENABLE_PROFILING", False),
    ("ENABLE_PROFILING", "1", "ENABLE_PROFILING", True),
    ("performance_hint", "throughput", "PERFORMANCE_HINT", "THROUGHPUT"),
    ("PERFORMANCE_HINT", " Latency ", "PERFORMANCE_HINT", "LATENCY"),
    ("PERFORMANCE_HINT", "CUMULATIVE_THROUGHPUT", "PERFORMANCE_HINT", "CUMULATIVE_THROUGHPUT"),
    ("PERFORMANCE_HINT_NUM_REQUESTS", "0", "PERFORMANCE_HINT_NUM_REQUESTS", 0),
    ("NUM_STREAMS", "4", "NUM_STREAMS", 4),
    ("NUM_STREAMS", 2.0, "NUM_STREAMS", 2),
    ("NUM_STREAMS", "auto", "NUM_STREAMS", "AUTO"),
    ("INFERENCE_NUM_THREADS", 8, "INFERENCE_NUM_THREADS", 8),
    ("INFERENCE_PRECISION_HINT", "FP16", "INFERENCE_PRECISION_HINT", "f16"),
    ("INFERENCE_PRECISION_HINT", "bfloat16", "INFERENCE_PRECISION_HINT", "bf16"),
    ("INFERENCE_PRECISION_HINT", "F32", "INFERENCE_PRECISION_HINT", "f32"),
    ("MEMORY_LIMIT", "20GiB", "MEMORY_LIMIT", 20 * 2**30),
    ("MEMORY_LIMIT", "512 MB", "MEMORY_LIMIT", 512 * 10**6),
    ("MEMORY_LIMIT", "1.5GB", "MEMORY_LIMIT", 1_500_000_000),
    ("MEMORY_LIMIT", "64kib", "MEMORY_LIMIT", 65536),
    ("MEMORY_LIMIT", "1024", "MEMORY_LIMIT", 1024),
    ("MEMORY_LIMIT", 4096, "MEMORY_LIMIT", 4096),
    ("DEVICE_PRIORITIES", "GPU,CPU", "MULTI_DEVICE_PRIORITIES", "GPU,CPU"),
    ("MULTI_DEVICE_PRIORITIES", ["GPU.0(4)", "CPU"], "MULTI_DEVICE_PRIORITIES", "GPU.0(4),CPU"),
    ("DEVICE_PROPERTIES", {"CPU": {"NUM_STREAMS": 2}}, "DEVICE_PROPERTIES", {"CPU": {"NUM_STREAMS": 2}}),
    ("MODEL_DISTRIBUTION_POLICY", {"PIPELINE_PARALLEL"}, "MODEL_DISTRIBUTION_POLICY", "PIPELINE_PARALLEL"),
    ("SCHEDULE_POLICY", "round_robin", "SCHEDULE_POLICY", "ROUND_ROBIN"),
]


@pytest.mark.parametrize("key, value, canonical, parsed", NORMALISED,
                         ids=[f"{k}={v!r}" for k, v, _, _ in NORMALISED])
def test_property_normalisation(key: str, value: Any, canonical: str, parsed: Any) -> None:
    assert normalize_property(key, value) == (canonical, parsed)


REFUSED = [
    ("ENABLE_PROFILING", "maybe", "'YES'/'NO'"),
    ("ENABLE_PROFILING", 2, "'YES'/'NO'"),
    ("NUM_STREAMS", 0, "integer >= 1"),
    ("NUM_STREAMS", True, "integer >= 1"),
    ("NUM_STREAMS", 2.5, "integer >= 1"),
    ("INFERENCE_NUM_THREADS", -1, "integer >= 0"),
    ("PERFORMANCE_HINT", "FASTEST", "LATENCY, THROUGHPUT, CUMULATIVE_THROUGHPUT"),
    ("INFERENCE_PRECISION_HINT", "int8", "f32, f16, bf16"),
    ("MEMORY_LIMIT", "20 parsecs", "'20GiB'"),
    ("MEMORY_LIMIT", -5, "'20GiB'"),
    ("MULTI_DEVICE_PRIORITIES", "GPU,,CPU", "comma-separated device list"),
    ("DEVICE_PROPERTIES", {"CPU": 2}, "mapping of device name"),
]


@pytest.mark.parametrize("key, value, accepted", REFUSED, ids=[f"{k}={v!r}" for k, v, _ in REFUSED])
def test_bad_values_name_key_value_and_what_is_accepted(key: str, value: Any, accepted: str) -> None:
    with pytest.raises(PropertyError) as info:
        normalize_property(key, value, target="CPU")
    message = str(info.value)
    assert key in message and repr(value) in message and accepted in message and "CPU" in message


def test_unknown_and_read_only_keys() -> None:
    with pytest.raises(PropertyError, match=r"unknown property 'NOPE'.*accepted keys:.*NUM_STREAMS"):
        normalize_property("NOPE", 1)
    with pytest.raises(PropertyError, match=r"unknown property 'MEMORY_LIMIT'.*accepted keys: NUM_STREAMS$"):
        normalize_property("MEMORY_LIMIT", 1, accepted_keys=("NUM_STREAMS",))
    with pytest.raises(PropertyError, match="read-only"):
        normalize_property("EXECUTION_DEVICES", ["CPU"])
    assert canonical_key(" perf_count ") == "ENABLE_PROFILING"


def test_normalize_config_collects_every_problem() -> None:
    with pytest.raises(PropertyError) as info:
        normalize_config({"NUM_STREAMS": 0, "NOPE": 1, "PERFORMANCE_HINT": "LATENCY"})
    assert "NUM_STREAMS" in str(info.value) and "'NOPE'" in str(info.value)
    assert normalize_config(None) == {}
    with pytest.raises(PropertyError, match="dict of property name"):
        normalize_config([("NUM_STREAMS", 1)])  # type: ignore[arg-type]


def test_parse_bytes() -> None:
    assert parse_bytes("2TiB") == 2 * 2**40
    assert parse_bytes("3B") == 3
    with pytest.raises(PropertyError, match=r"MEMORY_LIMIT.*'20GiB'"):
        parse_bytes("1.2.3GB")


def test_typed_mirror_spells_the_string_keys() -> None:
    hint = ov.properties.hint
    assert normalize_property(hint.performance_mode, hint.PerformanceMode.THROUGHPUT) == \
        ("PERFORMANCE_HINT", "THROUGHPUT")
    assert normalize_property(hint.model_distribution_policy,
                              hint.ModelDistributionPolicy.PIPELINE_PARALLEL)[1] == "PIPELINE_PARALLEL"


# --- Core properties ------------------------------------------------------------------------------

MODEL = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [("x", TensorProto.FLOAT, ["N", 4])], [("y", TensorProto.FLOAT, ["N", 4])])


def test_cpu_device_properties_are_set_and_read_back() -> None:
    core = ov.Core()
    assert core.get_property("CPU", "FULL_DEVICE_NAME")
    assert core.get_property("CPU", "DEVICE_TOTAL_MEM_SIZE") > 0
    assert "NUM_STREAMS" in core.get_property("CPU", "SUPPORTED_PROPERTIES")
    # Two streams: OpenVINO's CPU engine runs at most one stream per core (this machine has 2).
    core.set_property("CPU", {"PERF_COUNT": "YES", "NUM_STREAMS": "2"})
    assert core.get_property("CPU", "ENABLE_PROFILING") is True
    assert core.get_property("CPU", "NUM_STREAMS") == 2
    assert core.get_property("CPU", "OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 2
    assert ov.Core().get_property("CPU", "OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1  # per Core


def test_device_settings_reach_compiled_models_and_config_wins() -> None:
    core = ov.Core()
    core.set_property("CPU", {"NUM_STREAMS": 2, "PERFORMANCE_HINT": "THROUGHPUT"})
    compiled = core.compile_model(MODEL, "CPU")
    assert compiled.get_property("NUM_STREAMS") == 2
    assert compiled.get_property("PERFORMANCE_HINT") == "THROUGHPUT"
    overridden = core.compile_model(MODEL, "CPU", {"NUM_STREAMS": 1})
    assert overridden.get_property("NUM_STREAMS") == 1
    assert overridden.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 2  # two per stream under THROUGHPUT
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)  # and both still compute
    np.testing.assert_array_equal(compiled(x)[0], overridden(x)[0])
    np.testing.assert_array_equal(compiled(x)[0], np.maximum(x, 0))


def test_global_set_property_reaches_devices_and_virtual_devices() -> None:
    core = ov.Core()
    core.set_property({"PERFORMANCE_HINT": "THROUGHPUT", "MULTI_DEVICE_PRIORITIES": "CPU"})
    assert core.get_property("CPU", "PERFORMANCE_HINT") == "THROUGHPUT"
    for virtual in ("HETERO", "MULTI", "AUTO"):
        assert core.get_property(virtual, "PERFORMANCE_HINT") == "THROUGHPUT"
        assert core.get_property(virtual, "MULTI_DEVICE_PRIORITIES") == "CPU"
    with pytest.raises(PropertyError, match="MULTI_DEVICE_PRIORITIES"):
        core.get_property("CPU", "MULTI_DEVICE_PRIORITIES")  # not a CPU setting


def test_virtual_device_properties() -> None:
    core = ov.Core()
    core.set_property("HETERO", {"DEVICE_PRIORITIES": "CPU"})
    assert core.get_property("HETERO", "MULTI_DEVICE_PRIORITIES") == "CPU"
    assert core.get_property("MULTI", "FULL_DEVICE_NAME") == "MULTI"  # as OpenVINO names it
    assert "MEMORY_LIMIT" in core.get_property("AUTO", "SUPPORTED_PROPERTIES")
    assert core.get_property("AUTO", "PERFORMANCE_HINT") == "LATENCY"  # never set: what AUTO does
    with pytest.raises(PropertyError, match="needs properties"):
        core.set_property("CPU")


def test_set_property_on_an_unknown_device() -> None:
    with pytest.raises(DeviceNameError, match="'NPU'"):
        ov.Core().set_property("NPU", {"NUM_STREAMS": 1})


def test_compiled_model_properties() -> None:
    compiled = ov.Core().compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
    assert compiled.get_property("PERFORMANCE_HINT") == "LATENCY"
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32  # typed, as OpenVINO
    supported = compiled.get_property("SUPPORTED_PROPERTIES")
    assert "OPTIMAL_NUMBER_OF_INFER_REQUESTS" in supported and "PERFORMANCE_HINT" in supported


# --- CPU stream layout ------------------------------------------------------------------------------

LAYOUTS = [
    # config, cores, (streams, threads per stream)
    ({}, 2, (1, 2)),
    ({}, 16, (1, 16)),
    ({"PERFORMANCE_HINT": "LATENCY"}, 2, (1, 2)),
    ({"PERFORMANCE_HINT": "LATENCY"}, 4, (1, 4)),
    ({"PERFORMANCE_HINT": "LATENCY"}, 16, (1, 16)),
    ({"PERFORMANCE_HINT": "THROUGHPUT"}, 2, (2, 1)),
    ({"PERFORMANCE_HINT": "THROUGHPUT"}, 4, (4, 1)),
    ({"PERFORMANCE_HINT": "THROUGHPUT"}, 16, (4, 4)),
    ({"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}, 16, (4, 4)),
    ({"PERFORMANCE_HINT": "THROUGHPUT", "PERFORMANCE_HINT_NUM_REQUESTS": 2}, 16, (2, 8)),
    ({"PERFORMANCE_HINT": "THROUGHPUT", "PERFORMANCE_HINT_NUM_REQUESTS": 1}, 4, (1, 4)),
    ({"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_NUM_THREADS": 8}, 16, (2, 4)),
    ({"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": 8}, 16, (1, 8)),
    ({"NUM_STREAMS": 2}, 2, (2, 1)),
    ({"NUM_STREAMS": 2}, 4, (2, 2)),
    ({"NUM_STREAMS": 2}, 16, (2, 8)),
    ({"NUM_STREAMS": 3, "PERFORMANCE_HINT": "LATENCY"}, 16, (3, 5)),  # NUM_STREAMS wins
    ({"NUM_STREAMS": 8}, 2, (8, 1)),  # more streams than cores: one thread each
    ({"NUM_STREAMS": "AUTO", "PERFORMANCE_HINT": "THROUGHPUT"}, 4, (4, 1)),
]


@pytest.mark.parametrize("config, cores, expected", LAYOUTS,
                         ids=[f"{c}-{n}cores" for c, n, _ in LAYOUTS])
def test_cpu_stream_layout(config: dict[str, Any], cores: int, expected: tuple[int, int]) -> None:
    streams, threads = stream_layout(normalize_config(config), cores=cores)
    assert (streams, threads) == expected
    assert streams * threads <= max(cores, streams)  # never more threads than cores


def test_a_devices_own_key_reaches_its_plugin_unparsed() -> None:
    # Keys inferplex has no parser for pass through to the plugin that declares them.
    assert normalize_property("NPU_TILE_MODE", "wide", ("NPU_TILE_MODE",)) == ("NPU_TILE_MODE", "wide")
    with pytest.raises(PropertyError, match="unknown property 'NPU_TILE_MODE'"):
        normalize_property("NPU_TILE_MODE", "wide", ("NUM_STREAMS",))


def _gpu_core(monkeypatch: pytest.MonkeyPatch) -> ov.Core:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    return ov.Core()


@pytest.mark.parametrize("value, expected", [(True, "YES"), (False, "NO"), ("auto", "AUTO"), ("true", "YES")])
def test_gpu_channels_last_values(value: Any, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU plugin parses its own keys, wherever they are given."""
    core = _gpu_core(monkeypatch)
    core.set_property("GPU", {"GPU_CHANNELS_LAST": value})
    assert core.get_property("GPU.0", "GPU_CHANNELS_LAST") == expected
    with pytest.raises(PropertyError, match=r"GPU_CHANNELS_LAST.*'sometimes'.*AUTO, YES, NO"):
        core.set_property("GPU", {"GPU_CHANNELS_LAST": "sometimes"})
    with pytest.raises(PropertyError, match=r"GPU_CHANNELS_LAST.*'sometimes'.*AUTO, YES, NO"):
        core.set_property("MULTI", {"GPU_CHANNELS_LAST": "sometimes"})


@pytest.mark.parametrize("value, expected", [("low", "LOW"), ("Medium", "MEDIUM"), (" HIGH ", "HIGH")])
def test_gpu_queue_throttle_values(value: Any, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    core = _gpu_core(monkeypatch)
    core.set_property("GPU.0", {"GPU_QUEUE_THROTTLE": value})
    assert core.get_property("GPU.0", "GPU_QUEUE_THROTTLE") == expected
    with pytest.raises(PropertyError, match=r"GPU_QUEUE_THROTTLE.*'fast'.*LOW, MEDIUM, HIGH"):
        core.set_property("GPU.0", {"GPU_QUEUE_THROTTLE": "fast"})


def test_core_wide_properties_read_with_one_argument_as_in_openvino() -> None:
    core = ov.Core()
    assert core.get_property("CACHE_DIR") == ""
    assert core.get_property("ENABLE_MMAP") is True
    assert core.get_property("FORCE_TBB_TERMINATE") is False
    core.set_property({"CACHE_DIR": "models-cache"})
    assert core.get_property("CACHE_DIR") == "models-cache"
    assert core.get_property("CPU", "CACHE_DIR") == "models-cache"
    with pytest.raises(PropertyError, match="no property 'NOT_A_KEY'"):
        core.get_property("NOT_A_KEY")


# --- virtual devices' properties before any set_property ------------------------------------------

@pytest.mark.parametrize("virtual", ["AUTO", "MULTI", "HETERO"])
def test_every_listed_virtual_device_property_reads_back(virtual: str) -> None:
    # OpenVINO answers every key a device lists in SUPPORTED_PROPERTIES, set or not
    core = ov.Core()
    keys = core.get_property(virtual, "SUPPORTED_PROPERTIES")
    values = {key: core.get_property(virtual, key) for key in keys}
    assert values["MULTI_DEVICE_PRIORITIES"] == ""
    assert values["LOG_LEVEL"] == ov.properties.log.Level.NO
    assert values["MODEL_PRIORITY"] == ov.properties.hint.Priority.MEDIUM
    assert values["PERFORMANCE_HINT_NUM_REQUESTS"] == 0
    assert values["ENABLE_PROFILING"] is False
    assert values["NUM_STREAMS"] == core.get_property("CPU", "NUM_STREAMS")


def test_unset_virtual_device_hints_say_what_a_compile_does() -> None:
    core = ov.Core()
    hint = ov.properties.hint.PerformanceMode
    assert core.get_property("AUTO", "PERFORMANCE_HINT") == hint.LATENCY
    assert core.get_property("MULTI", "PERFORMANCE_HINT") == hint.CUMULATIVE_THROUGHPUT
    assert core.get_property("AUTO", "ENABLE_STARTUP_FALLBACK") is True
    assert core.get_property("AUTO", "SCHEDULE_POLICY") == "DEVICE_PRIORITY"
    core.set_property("AUTO", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert core.get_property("AUTO", "PERFORMANCE_HINT") == hint.THROUGHPUT
    assert core.get_property("MULTI", "PERFORMANCE_HINT") == hint.CUMULATIVE_THROUGHPUT


def test_unknown_virtual_device_property_names_the_accepted_keys() -> None:
    with pytest.raises(PropertyError, match=r"AUTO has no property 'NOT_A_KEY'; it has: .*PERFORMANCE_HINT"):
        ov.Core().get_property("AUTO", "NOT_A_KEY")
