"""A host device working beside accelerators leaves them cores (multi/members.py)."""

from __future__ import annotations

import pytest

import inferplex as ov
from inferplex.multi.members import HOST_CORES_PER_ACCELERATOR, share_the_host


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "2")
    return ov.Core().registry


def test_the_host_leaves_cores_to_each_accelerator(registry) -> None:  # noqa: ANN001
    cores = int(registry.device_property("CPU", "NUMBER_OF_CORES"))
    configs: dict[str, dict[str, object]] = {"GPU.0": {}, "GPU.1": {}, "CPU": {}}
    share_the_host(registry, configs)
    assert configs["CPU"]["INFERENCE_NUM_THREADS"] == max(1, cores - 2 * HOST_CORES_PER_ACCELERATOR)
    assert "INFERENCE_NUM_THREADS" not in configs["GPU.0"]


def test_a_thread_count_the_user_set_is_kept(registry) -> None:  # noqa: ANN001
    configs: dict[str, dict[str, object]] = {"GPU.0": {}, "CPU": {"INFERENCE_NUM_THREADS": 7}}
    share_the_host(registry, configs)
    assert configs["CPU"]["INFERENCE_NUM_THREADS"] == 7


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
    from inferplex.multi import compile_multi
    from inferplex.properties import parse_device_list

    executor = compile_multi(registry, ov.Core().read_model(model).ir,
                             parse_device_list("GPU.0,CPU"), {})
    try:
        cpu_program = executor._devices["CPU"].executor.program
        cores = int(registry.device_property("CPU", "NUMBER_OF_CORES"))
        threads = cpu_program.get_property("INFERENCE_NUM_THREADS")  # over all its streams
        assert threads <= max(1, cores - HOST_CORES_PER_ACCELERATOR)
        assert threads < cores or cores == 1  # without the GPU it would take every core
    finally:
        executor.close()
