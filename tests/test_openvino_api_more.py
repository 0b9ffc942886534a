"""inferplex's OpenVINO API beside openvino itself: typed property values, pairs, packed tensors.

Each test asks the installed openvino for its answer and checks that inferplex
gives the same one (skipped where openvino is not installed).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex.properties import device, hint, intel_auto, log, streams

real = pytest.importorskip("openvino")
real_props = pytest.importorskip("openvino.properties")

# --- property enums ---------------------------------------------------------------------------

ENUMS = [
    (ov.properties.CacheMode, "CacheMode"),
    (ov.properties.WorkloadType, "WorkloadType"),
    (hint.Priority, "hint.Priority"),
    (hint.PerformanceMode, "hint.PerformanceMode"),
    (hint.SchedulingCoreType, "hint.SchedulingCoreType"),
    (hint.ModelDistributionPolicy, "hint.ModelDistributionPolicy"),
    (hint.ExecutionMode, "hint.ExecutionMode"),
    (device.Type, "device.Type"),
    (log.Level, "log.Level"),
    (intel_auto.SchedulePolicy, "intel_auto.SchedulePolicy"),
]


def _theirs(path: str) -> Any:
    value: Any = real_props
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("ours, path", ENUMS, ids=[p for _, p in ENUMS])
def test_enum_members_print_number_and_order_as_openvinos(ours: Any, path: str) -> None:
    theirs = _theirs(path)
    for name, member in theirs.__members__.items():
        mine = getattr(ours, name)
        assert (str(mine), repr(mine), int(mine), mine.value, mine.name) == \
            (str(member), repr(member), int(member), member.value, member.name)
        assert f"{mine}" == f"{member}" and ours(int(member)) is mine
    members = list(theirs.__members__)
    for first, second in itertools.pairwise(members):
        expected = theirs.__members__[first] < theirs.__members__[second]
        assert (getattr(ours, first) < getattr(ours, second)) == expected


@pytest.mark.parametrize("ours, path", ENUMS, ids=[p for _, p in ENUMS])
def test_enum_entries_list_openvinos_names_first_in_its_order(ours: Any, path: str) -> None:
    # pybind11's ``__entries``: {name: (member, docstring)}, aliases (DEFAULT) included
    theirs = getattr(_theirs(path), "__entries")
    mine = getattr(ours, "__entries")
    assert list(mine)[:len(theirs)] == list(theirs)
    for name, (member, doc) in theirs.items():
        assert (str(mine[name][0]), int(mine[name][0]), mine[name][1]) == (str(member), int(member), doc)


def test_enum_members_equal_their_member_and_stored_string_but_no_number() -> None:
    latency = hint.PerformanceMode.LATENCY
    assert latency == hint.PerformanceMode(1) and latency != hint.PerformanceMode.THROUGHPUT
    assert latency != 1 and real_props.hint.PerformanceMode.LATENCY != 1  # neither equals its number
    assert latency == "LATENCY" and log.Level.NO == "LOG_NONE"  # inferplex: the stored string too
    assert {latency: "a", hint.PerformanceMode.THROUGHPUT: "b"}[hint.PerformanceMode(1)] == "a"


def test_enum_values_set_and_read_back_through_a_core() -> None:
    core = ov.Core()
    core.set_property("CPU", {hint.performance_mode: hint.PerformanceMode.THROUGHPUT,
                              log.level: log.Level.WARNING})
    try:
        mode = core.get_property("CPU", hint.performance_mode)
        assert mode is hint.PerformanceMode.THROUGHPUT and str(mode) == "PerformanceMode.THROUGHPUT"
        assert int(core.get_property("CPU", log.level)) == int(real_props.log.Level.WARNING)
    finally:
        core.set_property("CPU", {log.level: log.Level.NO})


# --- pairs: what a typed key takes ----------------------------------------------------------------

PAIRS = [
    ("enable_profiling", 1), ("enable_profiling", 0), ("inference_num_threads", -8),
    ("hint.enable_cpu_pinning", 1), ("intel_auto.enable_startup_fallback", 0),
    ("intel_auto.enable_runtime_fallback", 1), ("device.id", "0"), ("device.priorities", "CPU,GPU"),
]


@pytest.mark.parametrize("path, value", PAIRS, ids=[f"{p}={v!r}" for p, v in PAIRS])
def test_pairs_hold_what_openvinos_hold(path: str, value: Any) -> None:
    mine: Any = ov.properties
    for part in path.split("."):
        mine = getattr(mine, part)
    theirs = _theirs(path)(value)
    key, held = mine(value)
    assert key == theirs[0] and held.value == theirs[1].value and type(held.value) is type(theirs[1].value)


def test_streams_pair_holds_the_integer_and_priorities_take_several_names() -> None:
    for num in (streams.Num.AUTO, streams.Num(3)):
        theirs = real_props.streams.num(getattr(real_props.streams.Num, num.name, None)
                                        or real_props.streams.Num(num.to_integer()))
        assert streams.num(num)[1].value == theirs[1].value
    assert device.priorities("CPU", "GPU")[1].value == real_props.device.priorities("CPU", "GPU")[1].value


@pytest.mark.parametrize("make", [lambda p: p.cache_dir(6), lambda p: p.device.priorities("CPU", 6),
                                  lambda p: p.inference_num_threads("8")])
def test_a_value_of_the_wrong_type_is_a_type_error_as_in_openvino(make: Any) -> None:
    with pytest.raises(TypeError):
        make(real_props)
    with pytest.raises(TypeError) as info:
        make(ov.properties)
    assert isinstance(info.value, ov.errors.PropertyError)


def test_a_pair_of_the_right_type_is_refused_where_it_is_set() -> None:
    pair = ov.properties.inference_num_threads(-8)  # made, as OpenVINO makes it
    with pytest.raises(ov.errors.PropertyError, match=r"INFERENCE_NUM_THREADS.*-8.*integer >= 0"):
        ov.Core().set_property("CPU", pair)


def test_a_trailing_comma_of_openvinos_device_list_is_taken() -> None:
    core = ov.Core()
    core.set_property("MULTI", device.priorities("CPU"))
    assert core.get_property("MULTI", device.priorities) == "CPU"


def test_core_wide_options_are_set_with_device_keys() -> None:
    core = ov.Core()
    core.set_property({"ENABLE_MMAP": False, hint.performance_mode: hint.PerformanceMode.LATENCY})
    theirs = real.Core()
    theirs.set_property({"ENABLE_MMAP": False})
    assert core.get_property("ENABLE_MMAP") is theirs.get_property("ENABLE_MMAP") is False
    assert core.get_property("CPU", hint.performance_mode) is hint.PerformanceMode.LATENCY
    with pytest.raises(ov.errors.PropertyError, match="ENABLE_MMAP"):
        core.set_property({"ENABLE_MMAP": "sometimes"})


# --- sub-byte tensors are packed ------------------------------------------------------------------

SUB_BYTE = ["u1", "u2", "u3", "u4", "i4", "u6", "nf4", "f4e2m1"]


@pytest.mark.parametrize("name", SUB_BYTE)
@pytest.mark.parametrize("shape", [[1, 3, 27, 27], [5], [2, 8]])
def test_sub_byte_tensors_hold_packed_bytes_as_openvinos(name: str, shape: list[int]) -> None:
    mine, theirs = ov.Tensor(getattr(ov.Type, name), shape), real.Tensor(getattr(real.Type, name), shape)
    assert (mine.data.shape, mine.data.dtype, mine.byte_size, mine.size, list(mine.shape)) == \
        (theirs.data.shape, theirs.data.dtype, theirs.byte_size, theirs.size, list(theirs.shape))


@pytest.mark.parametrize("name", ["u1", "u4", "i4", "u6"])
def test_a_packed_buffer_is_read_in_place(name: str) -> None:
    shape = [2, 3, 8, 8]
    size = real.Tensor(getattr(real.Type, name), shape).byte_size
    buffer = np.arange(size, dtype=np.uint8)
    tensor = ov.Tensor(buffer, shape, getattr(ov.Type, name))
    np.testing.assert_array_equal(tensor.data.view(np.uint8), buffer)
    tensor.data[0] = 77
    assert buffer[0] == 77  # shared, as OpenVINO's
    with pytest.raises(RuntimeError, match="bytes"):
        ov.Tensor(buffer[:-3], shape, getattr(ov.Type, name))


@pytest.mark.parametrize("name", ["u2", "u4", "i4", "f4e2m1"])
def test_packed_bytes_unpack_to_the_values_openvino_computes_with(name: str) -> None:
    """The values numpy sees in a packed tensor are those OpenVINO's CPU converts the same bytes to."""
    from openvino import opset13

    rng = np.random.default_rng(3)
    shape = [3, 6]
    theirs = real.Tensor(getattr(real.Type, name), shape)
    theirs.data[:] = rng.integers(0, 256, theirs.data.size).astype(np.uint8).view(theirs.data.dtype)
    param = opset13.parameter(shape, getattr(real.Type, name))
    converted = real.Core().compile_model(real.Model(opset13.convert(param, real.Type.f32), [param]), "CPU")
    expected = converted(theirs)[0]
    mine = ov.Tensor(theirs.data.copy(), shape, getattr(ov.Type, name))
    np.testing.assert_array_equal(np.asarray(mine).astype(np.float32), expected)


def test_values_of_an_ml_dtypes_array_are_packed_and_read_back() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([[-8, -1, 0], [3, 7, 5]], dtype=ml_dtypes.int4)
    tensor = ov.Tensor(values)
    assert tensor.element_type == ov.Type.i4 and list(tensor.shape) == [2, 3] and tensor.byte_size == 3
    np.testing.assert_array_equal(np.asarray(tensor), values)
    tensor.shape = [4]  # fits the capacity: the same bytes, fewer elements
    np.testing.assert_array_equal(np.asarray(tensor), values.reshape(-1)[:4])
    copy = ov.Tensor(ov.Type.i4, [1])
    copy.copy_from(tensor)
    assert list(copy.shape) == [4] and np.array_equal(np.asarray(copy), values.reshape(-1)[:4])
    with pytest.raises(ValueError, match="packed"):
        np.asarray(tensor, copy=False)  # its values exist only unpacked, in a new array


@pytest.mark.parametrize("name", ["u2", "u3", "u6", "f4e2m1"])
def test_pack_data_takes_openvinos_other_sub_byte_types(name: str) -> None:
    from openvino.helpers import pack_data as real_pack

    bits = getattr(real.Type, name).bitwidth
    data = np.random.default_rng(4).integers(0, 1 << bits, size=(3, 7)).astype(np.uint8)
    packed = ov.helpers.pack_data(data, name)
    np.testing.assert_array_equal(packed, real_pack(data, getattr(real.Type, name)))
    np.testing.assert_array_equal(ov.helpers.unpack_data(packed, name, [3, 7]), data)


# --- shapes and output names -------------------------------------------------------------------------


def test_partial_shapes_refuse_empty_dims_and_comparing_an_unknown_rank_with_a_sequence() -> None:
    for module in (real, ov):
        with pytest.raises(RuntimeError, match="Cannot get vector of dimensions"):
            module.PartialShape("[?,,3]")
        with pytest.raises(TypeError, match="Cannot compare dynamic shape"):
            _ = module.PartialShape.dynamic() == (1, 2)
        assert module.PartialShape.dynamic() == module.PartialShape.dynamic()


def _named_result_model(module: Any, opset: Any) -> Any:
    data = opset.parameter([2, 2], np.float32, name="x")
    added = opset.add(data, opset.constant(np.ones([1], np.float32)))
    result = opset.result(added)
    result.set_friendly_name("Result0")
    result.get_output_tensor(0).set_names({"sum"})
    return module.Model([result], [data])


def test_names_set_on_a_results_tensor_name_the_output() -> None:
    from openvino import opset13

    theirs, mine = _named_result_model(real, opset13), _named_result_model(ov, ov.opset8)
    assert mine.outputs[0].get_names() == theirs.outputs[0].get_names() == {"sum"}
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    request = ov.Core().compile_model(mine, "CPU").create_infer_request()
    request.infer({"x": x})
    np.testing.assert_array_equal(request.get_tensor("sum").data, x + 1)


# --- export and import with OpenVINO's encryption callbacks -------------------------------------------


def _relu_model() -> Any:
    data = ov.opset8.parameter([2, 3], np.float32, name="data")
    return ov.Model(ov.opset8.relu(data), [data], "relu")


def test_export_import_with_encryption_callbacks(tmp_path: Any) -> None:
    import base64

    config = {"CACHE_ENCRYPTION_CALLBACKS": [base64.b64encode, base64.b64decode]}
    core = ov.Core()
    blob = core.compile_model(_relu_model(), "CPU", config).export_model()
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    imported = core.import_model(blob, "CPU", config)
    np.testing.assert_array_equal(imported({"data": x})[0], np.maximum(x, 0))
    decrypted = core.import_model(base64.b64decode(blob), "CPU")  # the blob is encrypt(plain blob)
    np.testing.assert_array_equal(decrypted({"data": x})[0], np.maximum(x, 0))
    with pytest.raises(RuntimeError):
        core.import_model(blob, "CPU")  # not decrypted: not a blob
    with pytest.raises(ov.errors.PropertyError, match=r"\[encrypt, decrypt\]"):
        core.compile_model(_relu_model(), "CPU", {"CACHE_ENCRYPTION_CALLBACKS": base64.b64encode})


def test_compile_model_refuses_an_object_that_is_no_model_as_a_missing_path() -> None:
    class Named:
        def __str__(self) -> str:
            return "named object"

    for module in (real, ov):
        with pytest.raises(RuntimeError, match="Path: 'named object' does not exist"):
            module.compile_model(Named())


def test_results_are_an_ovdict_that_refuses_item_assignment_as_openvino_s_does() -> None:
    from onnx import TensorProto, helper

    from inferplex.utils.data_helpers import OVDict

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ov.Core().compile_model(model.SerializeToString(), "CPU")
    results = compiled({"x": np.array([-1.0, 2.0], np.float32)})
    assert isinstance(results, OVDict)
    np.testing.assert_array_equal(results["y"], [0.0, 2.0])
    with pytest.raises(TypeError, match="'OVDict' object does not support item assignment"):
        results["y"] = np.zeros(2, np.float32)  # type: ignore[index]


# --- op building: Python's number types, make_constant_node, reported op types ---------------


def test_python_float_and_int_build_f32_and_i32_as_openvino_does() -> None:
    import openvino.opset11 as real_opset
    from openvino.utils.types import get_element_type as real_element_type
    from openvino.utils.types import make_constant_node as real_constant

    from inferplex import opset11
    from inferplex.utils.types import get_element_type, make_constant_node

    def types(module: Any, make: Any) -> list[str]:
        built = [module.constant(np.array([1.5, 2.5]), dtype=float),
                 module.constant(np.array([1, 2]), dtype=int), module.parameter([2], dtype=float),
                 module.parameter([2], dtype=int), make([100], np.int64), make(0.5, float),
                 make(np.arange(3))]
        return [node.get_output_element_type(0).get_type_name() for node in built]

    assert types(opset11, make_constant_node) == types(real_opset, real_constant) == \
        ["f32", "i32", "f32", "i32", "i64", "f32", "i64"]
    kinds = (float, int, np.float16, bool)
    assert [real_element_type(t).get_type_name() for t in kinds] == \
        [get_element_type(t).get_type_name() for t in kinds]
    with pytest.raises(ov.errors.InputError, match="get_element_type takes a numpy dtype or type"):
        get_element_type("not a type")
    named = make_constant_node(3, np.int32, name="limit")
    assert named.get_friendly_name().startswith("limit/")
    assert real_constant(3, np.int32, name="limit").friendly_name.startswith("limit/")


def test_ops_built_from_several_onnx_ops_report_openvinos_type() -> None:
    import openvino.opset11 as real_opset

    from inferplex import opset11

    def names(module: Any) -> list[str]:
        x = module.parameter([2, 3], np.float32)
        built = [module.gelu(x, "erf"), module.gelu(x, "tanh"),
                 module.floor_mod(x, module.constant(np.float32(1.5))),
                 module.floor_mod(module.parameter([2], np.int32), module.constant(np.int32(2)))]
        return [node.get_type_name() for node in built]

    assert names(opset11) == names(real_opset) == ["Gelu", "Gelu", "FloorMod", "FloorMod"]


def test_reductions_refuse_axes_outside_the_rank_when_built_as_openvino_does() -> None:
    import openvino.opset13 as real_opset

    from inferplex import opset13
    from inferplex.errors import InputError

    for module, error in ((opset13, InputError), (real_opset, RuntimeError)):
        with pytest.raises(error, match="out of the tensor rank range"):
            module.reduce_mean(module.parameter([2, 3], np.float32), np.array([2]))
        with pytest.raises(error, match="out of the tensor rank range"):
            module.reduce_logical_or(module.parameter([2], np.bool_), np.array([-2]))
        summed = module.reduce_sum(module.parameter([2, 3], np.float32), np.array([-2]))
        assert list(summed.get_output_shape(0)) == [3]


def test_the_compiled_modules_names_are_this_packages_classes() -> None:
    """Programs name classes through ``openvino._pyopenvino`` (imports, type annotations)."""
    import inferplex._pyopenvino as compiled_names

    assert compiled_names.Model is ov.Model and compiled_names.Tensor is ov.Tensor
    x = ov.opset8.parameter([2, 3], np.float32, name="x")
    model = ov.Model([ov.opset8.relu(x)], [x])
    assert isinstance(model.input().get_tensor(), compiled_names.DescriptorTensor)
    assert ov._pyopenvino.Node is ov.Node  # noqa: SLF001 - reached as openvino._pyopenvino is


def test_node_evaluate_computes_an_op_on_host_tensors() -> None:
    first, second = np.array([3, 2, 3]), np.array([4, 2, 3])
    out = np.zeros(3, dtype=np.int64)
    node = ov.opset13.add(first, second)
    tensors = [ov.Tensor(array=first, shared_memory=True), ov.Tensor(array=second, shared_memory=True)]
    output = ov.Tensor(array=out, shared_memory=True)
    assert node.evaluate([output], tensors) is True
    np.testing.assert_array_equal(out, first + second)  # written in place, into the shared array
    values = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    relu_out = ov.Tensor(np.zeros((2, 3), np.float32))
    assert ov.opset13.relu(ov.opset13.parameter([2, 3], np.float32)).evaluate([relu_out], [ov.Tensor(values)])
    np.testing.assert_array_equal(relu_out.data, np.maximum(values, 0))
    # an op built from several ONNX nodes is not evaluated, as OpenVINO answers for such ops
    composite = ov.opset13.topk(ov.opset13.parameter([2, 3], np.float32), 2, 1, "max", "index")
    outputs = [ov.Tensor(np.zeros((2, 2), np.float32)), ov.Tensor(np.zeros((2, 2), np.int32))]
    assert composite.evaluate(outputs, [ov.Tensor(values), ov.Tensor(np.array(2, np.int64))]) is False
    with pytest.raises(ov.errors.InputError, match="takes 2 input and 1 output tensors, got 1 and 1"):
        node.evaluate([output], tensors[:1])
    with pytest.raises(ov.errors.InputError, match="Add input 1 takes i64 data, got a f32 tensor"):
        node.evaluate([output], [tensors[0], ov.Tensor(second.astype(np.float32))])


def test_graph_api_details_openvino_programs_use() -> None:
    reference = pytest.importorskip("openvino")
    for lib in (ov, reference):
        parameter = lib.opset13.parameter([2, 3], np.float32, name="x")
        assert parameter.element_type == lib.Type.f32
        relu = lib.opset13.relu(parameter)
        relu.set_rt_info("test_value", "test_key")
        assert relu.get_rt_info()["test_key"] == "test_value"
        add = lib.opset13.add(parameter, parameter)
        add.set_arguments([lib.opset13.constant(np.ones((2, 3), np.float64)),
                           lib.opset13.constant(np.ones((2, 3), np.float64))])  # ops, not outputs
        assert add.input(0).get_element_type() == lib.Type.f64
        scalar = lib.Layout.scalar()
        assert scalar == lib.Layout.scalar() and scalar != lib.Layout("NCHW") and not scalar.has_name("N")
        assert str(scalar) == "**SCALAR**"


# --- the GPU and NPU property modules ---------------------------------------------------------

_GPU_NPU_KEYS = {
    "intel_gpu": ["device_total_mem_size", "device_max_alloc_mem_size", "uarch_version",
                  "execution_units_count", "memory_statistics", "enable_loop_unrolling",
                  "disable_winograd_convolution"],
    "intel_gpu.hint": ["queue_throttle", "queue_priority", "host_task_priority", "available_device_mem",
                       "enable_large_allocations", "enable_lora_operation"],
    "intel_npu": ["device_alloc_mem_size", "device_total_mem_size", "driver_version", "compiler_version",
                  "compilation_mode_params", "compiler_type", "compiler_dynamic_quantization", "turbo",
                  "tiles", "max_tiles", "platform", "bypass_umd_caching", "defer_weights_load",
                  "disable_idle_memory_prunning", "enable_strides_for", "qdq_optimization",
                  "qdq_optimization_aggressive", "run_inferences_sequentially"],
}


@pytest.mark.parametrize("module", sorted(_GPU_NPU_KEYS))
def test_gpu_and_npu_property_keys_are_openvinos(module: str) -> None:
    import importlib

    ours = importlib.import_module(f"inferplex.properties.{module}")
    theirs = importlib.import_module(f"openvino.properties.{module}")
    for name in _GPU_NPU_KEYS[module]:
        assert getattr(ours, name)() == getattr(theirs, name)(), name


def test_gpu_and_npu_property_values_are_openvinos() -> None:
    from openvino.properties import intel_gpu as real_gpu
    from openvino.properties import intel_npu as real_npu

    from inferplex.properties import intel_gpu, intel_npu

    for level in ("LOW", "MEDIUM", "HIGH", "DEFAULT"):
        ours = getattr(intel_gpu.hint.ThrottleLevel, level)
        theirs = getattr(real_gpu.hint.ThrottleLevel, level)
        assert (str(ours), int(ours)) == (str(theirs), int(theirs))
    for kind in ("PLUGIN", "DRIVER", "PREFER_PLUGIN"):
        ours, theirs = getattr(intel_npu.CompilerType, kind), getattr(real_npu.CompilerType, kind)
        assert (str(ours), int(ours)) == (str(theirs), int(theirs))
    assert (intel_gpu.MemoryType.surface, intel_gpu.MemoryType.buffer) == \
        (real_gpu.MemoryType.surface, real_gpu.MemoryType.buffer)
    assert intel_gpu.CapabilityGPU.HW_MATMUL == real_gpu.CapabilityGPU.HW_MATMUL
    with pytest.raises(TypeError):
        intel_gpu.device_total_mem_size(1)  # read-only, as OpenVINO's


def test_the_gpu_answers_openvinos_gpu_facts_and_takes_its_queue_throttle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from inferplex.properties import intel_gpu

    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    core = ov.Core()
    assert core.get_property("GPU", intel_gpu.device_total_mem_size) == \
        core.get_property("GPU", "DEVICE_TOTAL_MEM_SIZE") > 0
    assert core.get_property("GPU", intel_gpu.execution_units_count) >= 1
    assert isinstance(core.get_property("GPU", intel_gpu.uarch_version), str)
    assert isinstance(core.get_property("GPU", intel_gpu.memory_statistics), dict)
    listed = core.get_property("GPU", "SUPPORTED_PROPERTIES")
    assert listed[intel_gpu.device_total_mem_size()] == "RO"
    core.set_property("GPU", dict([intel_gpu.hint.queue_throttle(intel_gpu.hint.ThrottleLevel.LOW)]))
    assert core.get_property("GPU", intel_gpu.hint.queue_throttle) == intel_gpu.hint.ThrottleLevel.LOW
    with pytest.raises(ov.errors.PropertyError, match="GPU_ENABLE_LOOP_UNROLLING"):
        core.set_property("GPU", {intel_gpu.enable_loop_unrolling: True})  # OpenVINO's GPU plugin's alone


def test_importing_the_package_gives_its_utils_modules() -> None:
    """``import openvino`` makes ``openvino.utils.types`` usable; so does ``import inferplex``."""
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    program = "import inferplex as ov; print(ov.utils.types.get_dtype(ov.Type.f16), " \
              "ov.utils.data_helpers.OVDict.__name__)"
    done = subprocess.run([sys.executable, "-c", program],
                          capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": src})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["float16", "OVDict"]


@pytest.mark.parametrize("share_inputs", [True, False])
@pytest.mark.parametrize("share_outputs", [True, False])
def test_a_compiled_models_own_request_shares_memory_as_openvinos(share_inputs: bool,
                                                                  share_outputs: bool) -> None:
    # compiled_model(inputs) runs on a request the model keeps as ``_infer_request``, as OpenVINO's does
    data = np.arange(-4, 4, dtype=np.float32).reshape(1, 8)
    found = []
    for package in (real, ov):
        parameter = package.opset13.parameter([1, 8], np.float32)
        model = package.Model([package.opset13.abs(parameter)], [parameter])
        compiled = package.Core().compile_model(model, "CPU")
        results = compiled(data, share_inputs=share_inputs, share_outputs=share_outputs)
        request = compiled._infer_request
        assert np.array_equal(results[0], np.abs(data))
        found.append((np.shares_memory(request.get_input_tensor(0).data, data),
                      np.shares_memory(request.get_output_tensor(0).data, results[0]),
                      bool(results[0].flags["OWNDATA"])))
    assert found[1] == found[0] == (share_inputs, share_outputs, not share_outputs)
