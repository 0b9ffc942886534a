"""A device program served from a worker process (inferplex.worker_process), on emulated GPUs.

Each check compares with ONNX Runtime on the whole model or with the same
program compiled in this process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.devices import remote as worker_process
from inferplex.errors import InferenceError, InputError
from inferplex.multi.members import wants_own_process

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not worker_process.supported(), reason="worker processes need POSIX")]

WIDTH = 16
RNG = np.random.default_rng(0)
WEIGHT = RNG.standard_normal((WIDTH, WIDTH)).astype(np.float32)


def dynamic_model() -> onnx.ModelProto:
    """``y = relu(x @ W)``, ``s = sum(x)`` with a dynamic batch: two outputs of different sizes."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
         helper.make_node("Relu", ["h"], ["y"], name="relu"),
         helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(WEIGHT, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def reference(x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(dynamic_model().SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


@pytest.fixture(scope="module")
def registry() -> object:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core().registry


@pytest.fixture(scope="module")
def program(registry):  # noqa: ANN001, ANN201
    model = ir.from_proto(dynamic_model())
    config = registry.config_for("GPU.0", {"ENABLE_PROFILING": True, "NUM_STREAMS": 2})
    compiled = worker_process.compile_in_worker_process(registry, model, "GPU.0", config)
    yield compiled
    compiled.close()


def test_results_match_onnx_runtime_on_both_workers(program) -> None:  # noqa: ANN001
    assert program.num_workers == 2 * 2 and program.device == "GPU.0"  # two slots per device worker
    for worker, batch in ((0, 1), (1, 3), (3, 5)):
        x = RNG.standard_normal((batch, WIDTH)).astype(np.float32)
        got = program.run({"x": x}, worker)
        want = reference(x)
        np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["s"], want[1], rtol=1e-5, atol=1e-4)


def test_the_shared_buffer_grows_for_a_large_request_and_results_stay_right(program) -> None:  # noqa: ANN001
    for batch in (50_000, 2, 70_000):  # 3.2 MiB and 4.5 MiB of input: past the first buffer size
        x = RNG.standard_normal((batch, WIDTH)).astype(np.float32)
        got = program.run({"x": x}, 1)
        want = reference(x)
        np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["s"], want[1], rtol=1e-3)


def test_a_shared_buffer_offers_each_mapping_for_pinning_and_undoes_it_first() -> None:
    from inferplex.devices.remote.buffers import SharedBuffer, new_buffer_fd, read_arrays, write_arrays

    calls: list[tuple[str, int, int]] = []

    def pin(address: int, size: int):  # noqa: ANN202
        calls.append(("pin", address, size))
        return lambda: calls.append(("unpin", address, size))

    buffer = SharedBuffer(new_buffer_fd(), pin=pin)
    assert calls == [] and not buffer.pinned  # nothing mapped yet
    small = {"x": np.arange(1000, dtype=np.float32)}
    described, _ = write_arrays(buffer, small)
    first = buffer.view(np.dtype(np.uint8), (1,), 0).ctypes.data
    assert calls == [("pin", first, buffer.size)] and buffer.pinned
    large = {"x": RNG.standard_normal((3 << 20) // 4).astype(np.float32)}
    described, _ = write_arrays(buffer, large)  # grows: the old mapping is unpinned before it goes
    second = buffer.view(np.dtype(np.uint8), (1,), 0).ctypes.data
    assert calls[1:] == [("unpin", first, 1 << 20), ("pin", second, buffer.size)]
    np.testing.assert_array_equal(read_arrays(buffer, described, copy=True)["x"], large["x"])
    buffer.close()
    assert calls[-1] == ("unpin", second, buffer.size) and not buffer.pinned
    unpinnable = SharedBuffer(new_buffer_fd(), pin=lambda address, size: None)
    write_arrays(unpinnable, small)
    assert not unpinnable.pinned
    unpinnable.close()


def test_outputs_are_the_callers_own_copies(program) -> None:  # noqa: ANN001
    first = program.run({"x": np.ones((2, WIDTH), np.float32)}, 0)["y"]
    kept = first.copy()
    program.run({"x": -np.ones((2, WIDTH), np.float32)}, 0)  # overwrites the shared buffer
    np.testing.assert_array_equal(first, kept)


def test_bad_inputs_raise_the_same_errors_as_in_this_process(registry, program) -> None:  # noqa: ANN001
    local = registry.compile(ir.from_proto(dynamic_model()), "GPU.0", registry.config_for("GPU.0"))
    for bad in ({"nope": np.ones((1, WIDTH), np.float32)}, {"x": np.ones((1, WIDTH), np.int64)},
                {"x": np.ones((1, WIDTH + 1), np.float32)}):
        with pytest.raises(InputError) as here:
            local.run(bad)
        with pytest.raises(InputError) as there:
            program.run(bad, 0)
        assert str(there.value) == str(here.value)
    with pytest.raises(InputError, match="mapping"):
        program.run([np.ones((1, WIDTH), np.float32)], 0)  # type: ignore[arg-type]
    np.testing.assert_allclose(program.run({"x": np.ones((1, WIDTH), np.float32)}, 0)["y"],
                               reference(np.ones((1, WIDTH), np.float32))[0], rtol=1e-5)


def test_properties_and_counters_come_from_the_worker_process(program) -> None:  # noqa: ANN001
    assert program.get_property("NUM_STREAMS") == 2
    assert program.get_property("ENABLE_PROFILING") is True
    with pytest.raises(ov.errors.PropertyError, match="NOT_A_KEY"):
        program.get_property("NOT_A_KEY")
    names = program.property_names()
    assert {"NUM_STREAMS", "ENABLE_PROFILING", "CUDA_GRAPHS", "EXECUTION_DEVICES"} <= set(names)
    assert {name: program.get_property(name) for name in names}["NUM_STREAMS"] == 2
    program.run({"x": np.ones((4, WIDTH), np.float32)}, 1)
    names = {record.node_name for record in program.profiling_info(1)}
    assert {"matmul", "relu", "sum"} <= names


def test_a_compile_error_is_the_same_as_in_this_process(registry) -> None:  # noqa: ANN001
    expand = helper.make_node("ExpandDims", ["x", "axis"], ["y"], name="expand", domain="com.microsoft")
    axis = helper.make_tensor("axis", TensorProto.INT32, [], [0])
    graph = helper.make_graph([expand], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [axis])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model = ir.from_proto(proto)
    with pytest.raises(ov.errors.InferplexError) as here:
        registry.compile(model, "GPU.0", registry.config_for("GPU.0"))
    with pytest.raises(ov.errors.InferplexError) as there:
        worker_process.compile_in_worker_process(registry, model, "GPU.0", registry.config_for("GPU.0"))
    assert isinstance(there.value, ov.errors.UnsupportedOpError)
    assert type(there.value) is type(here.value) and str(there.value) == str(here.value)
    assert "expand (ExpandDims)" in str(there.value)


def _worker_processes() -> set[int]:
    """Pids of this process's children that serve a device program."""
    import os
    from pathlib import Path

    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        if parent == os.getpid() and b"inferplex.devices.remote.child" in command:
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker process in /proc")
def test_a_dead_worker_process_fails_its_requests_and_multi_reruns_them_elsewhere() -> None:
    import os
    import signal

    before = _worker_processes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        core = ov.Core()
        compiled = core.compile_model(dynamic_model(), "MULTI:GPU.0,CPU",
                                      {"MULTI_WORKER_PROCESSES": "YES", "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
    [gpu_process] = _worker_processes() - before  # GPU.0's; the host device stays in this process
    x = RNG.standard_normal((3, WIDTH)).astype(np.float32)
    np.testing.assert_allclose(compiled({"x": x})["y"], reference(x)[0], rtol=1e-5, atol=1e-5)
    os.kill(gpu_process, signal.SIGKILL)
    request = compiled.create_infer_request()
    for index in range(20):
        x = RNG.standard_normal((index + 1, WIDTH)).astype(np.float32)
        request.infer({"x": x})
        np.testing.assert_allclose(request.results["y"], reference(x)[0], rtol=1e-5, atol=1e-5)
    stats = compiled.get_property("DEVICE_STATISTICS")
    assert stats["GPU.0"]["failures"] >= 1 and stats["CPU"]["requests"] >= 20
    compiled.release()


def test_close_ends_the_worker_process(registry) -> None:  # noqa: ANN001
    program = worker_process.compile_in_worker_process(
        registry, ir.from_proto(dynamic_model()), "GPU.1", registry.config_for("GPU.1"))
    process = program._process
    assert process.poll() is None
    program.close()
    program.close()  # idempotent
    assert process.poll() is not None
    with pytest.raises(InferenceError, match="closed"):
        program.run({"x": np.ones((1, WIDTH), np.float32)}, 0)


@pytest.mark.parametrize(("setting", "devices", "own"), [
    # emulated GPUs are not GIL-bound: their work shares the host's cores anyway
    ("AUTO", ["GPU.0", "GPU.1", "CPU"], [False, False, False]),
    ("YES", ["GPU.0"], [True]),
    ("YES", ["GPU.0", "GPU.1", "CPU"], [True, True, False]),  # the host device stays in this process
    ("NO", ["GPU.0", "GPU.1"], [False, False]),
])
def test_which_members_get_a_worker_process(registry, setting, devices, own) -> None:  # noqa: ANN001
    assert wants_own_process(registry, devices, setting) == dict(zip(devices, own, strict=True))


def test_auto_gives_gil_bound_devices_a_process_of_their_own(registry, monkeypatch) -> None:  # noqa: ANN001
    plugin, _ = registry.resolve("GPU.0")
    original = plugin.device_property
    monkeypatch.setattr(plugin, "device_property",
                        lambda device, key: True if key == "GIL_BOUND" else original(device, key))
    assert wants_own_process(registry, ["GPU.0", "GPU.1", "CPU"], "AUTO") == \
        {"GPU.0": True, "GPU.1": True, "CPU": False}
    assert wants_own_process(registry, ["GPU.0", "CPU"], "AUTO") == {"GPU.0": True, "CPU": False}
    assert wants_own_process(registry, ["GPU.0"], "AUTO") == {"GPU.0": True}


def test_the_setting_is_validated(core) -> None:  # noqa: ANN001
    with pytest.raises(ov.errors.PropertyError, match=r"WORKER_PROCESSES.*SOMETIMES"):  # the alias's key
        core.compile_model(dynamic_model(), "MULTI:CPU", {"MULTI_WORKER_PROCESSES": "SOMETIMES"})


_HUNG_AT_EXIT = """
import os, signal, sys, time
import numpy as np
import inferplex as ov
from test_worker_process import dynamic_model

def children():
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        found.add(int(entry.name))
            except OSError:
                pass
    return found

compiled = ov.Core().compile_model(dynamic_model(), "MULTI:GPU.0,GPU.1",
                                   {"WORKER_PROCESSES": "YES", "EXIT_TIMEOUT": 1})
compiled({"x": np.ones((2, 16), np.float32)})
workers = children()
print("workers", " ".join(map(str, sorted(workers))), flush=True)
for pid in workers:
    os.kill(pid, signal.SIGSTOP)  # a hung device: its worker process answers nothing
for pid in workers:  # stopped before any request reaches it
    while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
        time.sleep(0.01)
def ended(request):
    try:
        request.wait()
        print("ended with a result", flush=True)
    except ov.errors.InferenceError as error:
        print("ended with", type(error).__name__, flush=True)

requests = [compiled.create_infer_request() for _ in range(3)]
for request in requests:
    request.set_callback(ended, request)
    request.start_async({"x": np.ones((2, 16), np.float32)})
print("main done", time.time(), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes in /proc")
def test_hung_worker_processes_cannot_hold_the_process_at_exit() -> None:
    import os
    import subprocess
    import sys
    import time

    tests = Path(__file__).parent
    env = {**os.environ, "INFERPLEX_EMULATED_GPUS": "2",
           "PYTHONPATH": os.pathsep.join([str(tests.parent / "src"), str(tests)])}
    done = subprocess.run([sys.executable, "-c", _HUNG_AT_EXIT], capture_output=True, text=True, env=env,
                          timeout=150)
    end = time.time()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    main_done = float(next(line for line in lines if line.startswith("main done")).split()[2])
    assert end - main_done < 10, f"exit took {end - main_done:.1f} s past the main code"
    workers = [int(pid) for pid in next(line for line in lines if line.startswith("workers")).split()[1:]]
    assert len(workers) == 2 and not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert "GPU.0 gave no result within 1.0 s at exit" in done.stderr
    assert lines.count("ended with InferenceError") == 3
