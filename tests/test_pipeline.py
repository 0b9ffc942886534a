"""PIPELINE_PARALLEL: memory model, balanced cuts, limits, errors, and runs across devices."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.devices.registry import DeviceRegistry
from inferplex.engine.request import Request
from inferplex.engine.runner import Runner
from inferplex.errors import MemoryPlanError
from inferplex.hetero import compile_hetero, plan_hetero
from inferplex.placement.graph import GraphIndex, annotate
from inferplex.placement.pipeline import MemoryModel, plan_stages

from conftest import ort_run
from hetero_plugins import LimitedPlugin, _model, _weight, chain_model, named

PIPELINE = {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"}


def _memory(proto) -> MemoryModel:  # noqa: ANN001
    model = annotate(ir.serde.deserialize_model(named(proto)), fixed_dims={})
    return MemoryModel(GraphIndex.build(model.graph))


def test_memory_model_counts_shared_weights_once_and_live_activations() -> None:
    memory = _memory(chain_model(4, 16))
    whole = memory.need(range(len(memory.order)))
    assert whole.weights == 4 * 16 * 16 * 4 + 16 * 4  # the shared bias once
    assert whole.activations == 2 * 16 * 4  # batch 1: at most an op's input and output live
    first_two = memory.need(range(0, 6))
    assert first_two.weights == 2 * 16 * 16 * 4 + 16 * 4


def test_equal_devices_get_balanced_stages_even_when_one_would_do() -> None:
    memory = _memory(chain_model(8, 16))
    stages = plan_stages(memory, ["GPU.0", "GPU.1"], {"GPU.0": 1 << 30, "GPU.1": 1 << 30})
    assert [s.device for s in stages] == ["GPU.0", "GPU.1"]
    assert abs(stages[0].weight_bytes - stages[1].weight_bytes) <= 16 * 16 * 4 + 64


def test_cut_minimises_crossing_bytes() -> None:
    # layer 1 widens to 256 columns then narrows: cutting inside it moves 16x the bytes
    nodes, inits, current = [], [], "x"
    widths = [16, 16, 256, 16, 16]
    for i in range(4):
        inits.append(_weight(f"w{i}", (widths[i], widths[i + 1]), i))
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        current = f"r{i}"
    proto = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                   [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, 16])], inits)
    memory = _memory(proto)
    stages = plan_stages(memory, ["GPU.0", "GPU.1"], {"GPU.0": 1 << 30, "GPU.1": 1 << 30})
    crossing = memory.crossing_bytes()[stages[0].op_count]
    assert crossing == 16 * 4


def test_model_that_fits_nowhere_lists_each_device() -> None:
    memory = _memory(chain_model(8, 16))
    with pytest.raises(MemoryPlanError) as info:
        plan_stages(memory, ["GPU.0", "GPU.1", "CPU"], {"GPU.0": 2000, "GPU.1": 2000, "CPU": 1000})
    text = str(info.value)
    assert all(d in text for d in ("GPU.0", "GPU.1", "CPU")) and "capacity" in text


def test_unequal_devices_fill_in_priority_order() -> None:
    memory = _memory(chain_model(8, 16))
    stages = plan_stages(memory, ["GPU.0", "CPU"], {"GPU.0": 6000, "CPU": 1 << 30})
    assert [s.device for s in stages] == ["GPU.0", "CPU"]
    assert stages[0].need_bytes <= 6000 and stages[0].op_count > stages[1].op_count


def _registry(count: int) -> tuple[DeviceRegistry, LimitedPlugin]:
    registry = DeviceRegistry()
    plugin = LimitedPlugin(count=count, memory_bytes=1 << 30)
    registry.register("LIMITED", plugin)
    return registry, plugin


@pytest.mark.parametrize("count", [2, 4])
def test_larger_than_one_device_runs_across_devices(count: int) -> None:
    registry, _ = _registry(count)
    proto = named(chain_model(16, 16))
    devices = [f"LIMITED.{i}" for i in range(count)]
    limit = 18000 // count + 1500  # whole model needs ~19.6 KB
    config = {**PIPELINE, "DEVICE_PROPERTIES": {"LIMITED": {"MEMORY_LIMIT": limit}}}
    executor = compile_hetero(registry, ir.serde.deserialize_model(proto), devices, config)
    stages = executor.get_property("PIPELINE_STAGES")
    assert [s.device for s in stages] == devices
    assert all(s.need_bytes <= s.capacity_bytes == limit for s in stages)
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    expected = ort_run(proto, {"x": x})[0]
    np.testing.assert_allclose(executor.run(Request({"x": x})).outputs["y"], expected, rtol=1e-5, atol=1e-6)
    done, results = threading.Event(), []

    def collect(outcome: object) -> None:
        results.append(outcome)
        if len(results) == 8:
            done.set()

    for _ in range(8):
        _submit(executor, {"x": x}, collect)
    assert done.wait(20)
    for outcome in results:
        np.testing.assert_allclose(outcome.outputs["y"], expected, rtol=1e-5, atol=1e-6)
    executor.close()


def test_plan_is_visible_and_memory_limit_strings_work() -> None:
    registry, _ = _registry(2)
    config = {**PIPELINE, "MEMORY_LIMIT": 12000}
    plan = plan_hetero(registry, ir.serde.deserialize_model(named(chain_model(16, 16))),
                       ["LIMITED.0", "LIMITED.1"], config)
    assert plan.policy == "PIPELINE_PARALLEL" and len(plan.stages) == 2
    text = plan.describe()
    assert "weights" in text and "LIMITED.1" in text


def _gpu_plugin_present() -> bool:
    return importlib.util.find_spec("torch") is not None and \
        importlib.util.find_spec("inferplex.devices.gpu.plugin") is not None


@pytest.mark.skipif(not _gpu_plugin_present(), reason="the GPU plugin (torch) is not installed")
@pytest.mark.parametrize("count", [2, 4])
def test_pipeline_across_emulated_gpus(count: int, monkeypatch: pytest.MonkeyPatch) -> None:


    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", str(count))
    core = ov.Core()
    proto = named(chain_model(16, 16))
    devices = ",".join(f"GPU.{i}" for i in range(count))
    compiled = core.compile_model(core.read_model(proto), f"HETERO:{devices}", {
        **PIPELINE, "DEVICE_PROPERTIES": {"GPU": {"MEMORY_LIMIT": f"{(18000 // count + 1500) / 1000}KB"}}})
    stages = compiled.get_property("PIPELINE_STAGES")
    assert [s.device for s in stages] == devices.split(",")
    x = np.random.default_rng(2).standard_normal((2, 16)).astype(np.float32)
    queue = ov.AsyncInferQueue(compiled, 2 * count)
    results: list[np.ndarray] = []
    queue.set_callback(lambda request, _: results.append(request.results["y"].copy()))
    for _ in range(3 * count):
        queue.start_async({"x": x})
    queue.wait_all()
    expected = ort_run(proto, {"x": x})[0]
    assert len(results) == 3 * count
    for got in results:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _submit(runner: Runner, inputs: dict[str, Any], done: Any) -> None:
    """Start one request on ``runner``; ``done`` gets its RunResult or its error."""
    request = Request(inputs)
    request.future.add_done_callback(
        lambda f: done(f.exception() if f.exception() is not None else f.result()))
    runner.submit(request)
