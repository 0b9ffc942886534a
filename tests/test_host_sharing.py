"""A host device working beside accelerators leaves them cores (devices/sharing.py)."""

from __future__ import annotations

import pytest

import inferplex as ov
from inferplex.devices.sharing import HOST_CORES_PER_ACCELERATOR, share_the_host


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "2")
    return ov.Core().registry


def test_the_host_leaves_cores_to_each_accelerator(registry) -> None:  # noqa: ANN001
    cores = int(registry.device_property("CPU", "NUMBER_OF_CORES"))
    configs: dict[str, dict[str, object]] = {"GPU.0": {}, "GPU.1": {}, "CPU": {}}
    share_the_host(registry, configs)
    assert configs["CPU"]["INFERENCE_NUM_THREADS"] == max(1, cores - 2 * HOST_CORES_PER_ACCELERATOR)
    assert configs["CPU"]["THREAD_SPINNING"] is False
    assert configs["GPU.0"] == {} and configs["GPU.1"] == {}


def test_multi_also_lowers_the_host_priority_and_keeps_the_users(registry) -> None:  # noqa: ANN001
    configs: dict[str, dict[str, object]] = {"GPU.0": {}, "CPU": {}}
    share_the_host(registry, configs, yield_cores=True)
    assert configs["CPU"]["THREAD_PRIORITY"] == "LOW"
    kept: dict[str, dict[str, object]] = {"GPU.0": {}, "CPU": {"THREAD_PRIORITY": "NORMAL"}}
    share_the_host(registry, kept, yield_cores=True)
    assert kept["CPU"]["THREAD_PRIORITY"] == "NORMAL"
    hetero: dict[str, dict[str, object]] = {"GPU.0": {}, "CPU": {}}
    share_the_host(registry, hetero)  # HETERO: the host's subgraph is on every request's path
    assert "THREAD_PRIORITY" not in hetero["CPU"]


def test_a_thread_count_or_spinning_the_user_set_is_kept(registry) -> None:  # noqa: ANN001
    configs: dict[str, dict[str, object]] = {"GPU.0": {},
                                             "CPU": {"INFERENCE_NUM_THREADS": 7, "THREAD_SPINNING": True}}
    share_the_host(registry, configs)
    assert configs["CPU"] == {"INFERENCE_NUM_THREADS": 7, "THREAD_SPINNING": True}


def test_the_host_alone_or_accelerators_alone_are_untouched(registry) -> None:  # noqa: ANN001
    host_only: dict[str, dict[str, object]] = {"CPU": {}}
    share_the_host(registry, host_only)
    assert host_only == {"CPU": {}}
    gpus_only: dict[str, dict[str, object]] = {"GPU.0": {}, "GPU.1": {}}
    share_the_host(registry, gpus_only)
    assert gpus_only == {"GPU.0": {}, "GPU.1": {}}


def test_a_cumulative_compile_gives_the_cpu_fewer_threads(registry) -> None:  # noqa: ANN001
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ov.Core().compile_model(model, "MULTI:GPU.0,CPU")
    try:  # each key is read from the first member, in priority order, that has it
        cores = int(registry.device_property("CPU", "NUMBER_OF_CORES"))
        threads = compiled.get_property("INFERENCE_NUM_THREADS")  # the CPU's, over all its streams
        assert threads <= max(1, cores - HOST_CORES_PER_ACCELERATOR)
        assert threads < cores or cores == 1  # without the GPU it would take every core
        assert compiled.get_property("THREAD_PRIORITY") == ("LOW" if _linux() else "NORMAL")
        # The GPU's waits keep spinning beside the CPU: sleeping on blocking events (LOW) served
        # less, with and without the CPU (bench/multi_diagnostics.py --throttle).
        assert compiled.get_property("GPU_QUEUE_THROTTLE") == "MEDIUM"
    finally:
        compiled.release()


def test_auto_startup_helper_leaves_cores_to_the_device_it_stands_in_for(registry) -> None:  # noqa: ANN001
    import time

    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ov.Core().compile_model(model, "AUTO:GPU.0,CPU")
    try:  # the CPU serves first, or stays for runtime fallback: wait until it is a member
        deadline = time.monotonic() + 30
        while "CPU" not in compiled.get_property("DEVICE_STATISTICS") and time.monotonic() < deadline:
            time.sleep(0.01)
        cores = int(registry.device_property("CPU", "NUMBER_OF_CORES"))
        # GPU.0 has none of these keys: they are read from the CPU
        assert compiled.get_property("INFERENCE_NUM_THREADS") <= max(1, cores - HOST_CORES_PER_ACCELERATOR)
        assert compiled.get_property("THREAD_SPINNING") is False
        assert compiled.get_property("THREAD_PRIORITY") == ("LOW" if _linux() else "NORMAL")
    finally:
        compiled.release()


def _contrib_op_between_matmuls() -> object:
    """MatMul -> com.microsoft ExpandDims (CPU only) -> MatMul: HETERO:GPU,CPU makes three subgraphs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), n) for n in ("a", "b")]
    inits.append(numpy_helper.from_array(np.array(0, dtype=np.int32), "axis"))
    nodes = [helper.make_node("MatMul", ["x", "a"], ["h"], name="up"),
             helper.make_node("ExpandDims", ["h", "axis"], ["g"], name="expand", domain="com.microsoft"),
             helper.make_node("MatMul", ["g", "b"], ["y"], name="down")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    return model


def test_a_hetero_cpu_subgraph_beside_a_gpu_shares_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    import onnxruntime as ort

    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    core = ov.Core()
    model = _contrib_op_between_matmuls()
    compiled = core.compile_model(model, "HETERO:GPU,CPU")
    runners = compiled._runner.runners  # HETERO's subgraphs: no public read of a member's settings
    assert [r.device for r in runners] == ["GPU.0", "CPU", "GPU.0"]
    cpu_program = runners[1].pool.program
    cores = int(core.get_property("CPU", "NUMBER_OF_CORES"))
    assert cpu_program.get_property("THREAD_SPINNING") is False
    assert cpu_program.get_property("INFERENCE_NUM_THREADS") == max(1, cores - HOST_CORES_PER_ACCELERATOR)
    assert cpu_program.get_property("THREAD_PRIORITY") == "NORMAL"
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})
    np.testing.assert_allclose(compiled({"x": x})["y"], want[0], rtol=1e-5, atol=1e-5)


def test_cpu_thread_spinning_is_a_property(core) -> None:  # noqa: ANN001
    model = _contrib_op_between_matmuls()
    assert core.compile_model(model, "CPU").get_property("THREAD_SPINNING") is True
    quiet = core.compile_model(model, "CPU", {"THREAD_SPINNING": "NO"})
    assert quiet.get_property("THREAD_SPINNING") is False
    streams = core.compile_model(model, "CPU", {"NUM_STREAMS": 2})
    assert streams.get_property("THREAD_SPINNING") is False  # several streams: an idle one sleeps
    with pytest.raises(ov.errors.PropertyError, match="THREAD_SPINNING"):
        core.compile_model(model, "CPU", {"THREAD_SPINNING": "sometimes"})


def _linux() -> bool:
    import platform

    return platform.system() == "Linux"


def _thread_nice_values() -> dict[int, int]:
    """This process's threads and their nice values (field 19 of /proc/self/task/TID/stat)."""
    import os

    values = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        values[int(tid)] = int(fields[16])  # fields after "(comm)" start at field 3
    return values


@pytest.mark.skipif(not _linux(), reason="per-thread priority is Linux's")
def test_low_thread_priority_puts_onnx_runtime_threads_at_nice_19(core) -> None:  # noqa: ANN001
    import threading

    import numpy as np
    import onnxruntime as ort

    model = _contrib_op_between_matmuls()
    before = _thread_nice_values()
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 3, "THREAD_PRIORITY": "LOW",
                                                 "ENGINE": "ONNXRUNTIME"})
    new = {tid: nice for tid, nice in _thread_nice_values().items() if tid not in before}
    # ONNX Runtime's pool for 3 threads: 2 threads of its own (the caller's thread is the third).
    assert len(new) >= 2 and set(new.values()) == {19}, new
    assert compiled.get_property("THREAD_PRIORITY") == "LOW"
    me = threading.get_native_id()
    assert _thread_nice_values()[me] == before[me]  # the caller's own priority is untouched
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(compiled({"x": x})["y"], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    normal = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 3, "ENGINE": "ONNXRUNTIME"})
    assert normal.get_property("THREAD_PRIORITY") == "NORMAL"
    with pytest.raises(ov.errors.PropertyError, match="THREAD_PRIORITY"):
        core.compile_model(model, "CPU", {"THREAD_PRIORITY": "HIGH"})
