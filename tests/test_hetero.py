"""HETERO: affinities, split, errors, execution (sync, async, transfers, counters), dot files."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest

import inferplex as ov
from inferplex.devices.base import DeviceProgram
from inferplex.devices.registry import DeviceRegistry
from inferplex.engine.request import Request
from inferplex.engine.runner import Runner
from inferplex.errors import AffinityError, DeviceNameError, InferenceError, UnsupportedOpError
from inferplex.hetero import compile_hetero, plan_hetero, query_hetero
from inferplex.placement.graph import GraphIndex
from inferplex.placement.split import split_into_subgraphs

from conftest import ort_run
from hetero_plugins import LimitedPlugin, chain_model, contrib_model, diamond_model, glue_model, named

RNG = np.random.default_rng(0)


def _x(rows: int = 2, cols: int = 8) -> np.ndarray:
    return RNG.standard_normal((rows, cols)).astype(np.float32)


def _registry(**limited: object) -> tuple[DeviceRegistry, LimitedPlugin]:
    registry = DeviceRegistry()
    plugin = LimitedPlugin(**limited)  # type: ignore[arg-type]
    registry.register("LIMITED", plugin)
    registry.register("HOST", LimitedPlugin("HOST", 1, tensor_kind="numpy",
                                            extra_domains=["com.microsoft"]))
    return registry, plugin


def _ir(proto):  # noqa: ANN001, ANN202
    return ir.serde.deserialize_model(named(proto))


# --- split: cycles, constants, order ----------------------------------------------------


def _acyclic_in_order(index: GraphIndex, subgraphs) -> None:  # noqa: ANN001
    owner = {n: s.index for s in subgraphs for n in s.nodes}
    for node in index.placed_nodes():
        for pred in index.predecessors(node):
            assert owner[pred.name] <= owner[node.name], (pred.name, node.name)


@pytest.mark.parametrize("assignment", [
    {"sig": "B"},                       # diamond branch on another device
    {"relu": "B", "add": "B"},          # A -> B -> A -> B with a residual around
    {"sig": "B", "tanh": "B", "mm1": "B"},
    {"mm0": "B", "mul_residual": "B", "add_residual": "B"},
])
def test_split_never_makes_cycles(assignment: dict[str, str]) -> None:
    model = _ir(diamond_model())
    index = GraphIndex.build(model.graph)
    affinity = {n.name: assignment.get(n.name, "A") for n in model.graph}
    subgraphs = split_into_subgraphs(index, affinity)
    _acyclic_in_order(index, subgraphs)
    assert sorted(n for s in subgraphs for n in s.nodes) == sorted(affinity)
    for sub in subgraphs:  # one device per subgraph
        assert {affinity[n] for n in sub.nodes} == {sub.device}


def test_independent_branches_of_one_device_merge() -> None:
    model = _ir(diamond_model())
    index = GraphIndex.build(model.graph)
    affinity = {n.name: "A" for n in model.graph} | {"sig": "B", "tanh": "B"}
    assert [s.device for s in split_into_subgraphs(index, affinity)] == ["A", "B", "A"]


def test_constants_are_copied_never_transferred() -> None:
    registry, _ = _registry(excluded={"Concat"})
    model = _ir(glue_model())
    plan = plan_hetero(registry, model, ["LIMITED", "HOST"], {})
    moved = {t.value for t in plan.transfers}
    assert not moved & {"zero", "minus1", "w0", "w1"}
    executor = compile_hetero(registry, model, ["LIMITED", "HOST"], {})
    x = _x()
    np.testing.assert_allclose(executor.run(Request({"x": x})).outputs["y"],
                               ort_run(glue_model(), {"x": x})[0], rtol=1e-5, atol=1e-6)
    executor.close()


def test_split_is_deterministic() -> None:
    registry, _ = _registry(excluded={"Sigmoid", "Tanh"})
    plans = {plan_hetero(registry, _ir(diamond_model()), ["LIMITED", "HOST"], {}) for _ in range(3)}
    assert len(plans) == 1


# --- glue folding ------------------------------------------------------------------------


def test_glue_ops_join_a_neighbour() -> None:
    registry, _ = _registry(excluded={"Concat"})
    plan = plan_hetero(registry, _ir(glue_model()), ["LIMITED", "HOST"], {})
    assert (plan.subgraphs_before_folding, len(plan.subgraphs)) == (3, 2)
    assert plan.subgraphs[0].nodes == ("shape", "gather_n", "concat_shape")


# --- automatic, manual, combined ---------------------------------------------------------


def test_query_maps_every_op_to_the_first_supporting_device() -> None:
    registry, _ = _registry(excluded={"Sigmoid"})
    model = _ir(diamond_model())
    answer = query_hetero(registry, model, ["LIMITED.1", "HOST"], {})
    assert answer == {n.name: ("HOST.0" if n.name == "sig" else "LIMITED.1") for n in model.graph}


def test_unsupported_everywhere_lists_each_op() -> None:
    registry, _ = _registry(excluded={"Sigmoid", "Tanh"})
    with pytest.raises(UnsupportedOpError, match=r"Sigmoid 'sig'.*Tanh 'tanh'"):
        query_hetero(registry, _ir(diamond_model()), ["LIMITED"], {})


def test_manual_mode_needs_every_affinity_and_known_devices() -> None:
    registry, _ = _registry()
    model = _ir(diamond_model())
    model.graph.node(0).metadata_props["affinity"] = "LIMITED.1"
    model.graph.node(1).metadata_props["affinity"] = "NPU"
    with pytest.raises(AffinityError) as info:
        compile_hetero(registry, model, ["LIMITED.1", "HOST"], {})
    text = str(info.value)
    assert "6 op(s) have no affinity" in text and "'relu' -> 'NPU'" in text


def test_query_edit_set_compile() -> None:
    registry, _ = _registry()
    model = _ir(diamond_model())
    answer = query_hetero(registry, model, ["LIMITED", "HOST"], {})
    assert set(answer.values()) == {"LIMITED.0"}
    answer["tanh"] = "HOST"
    for node in model.graph:
        node.metadata_props["affinity"] = answer[node.name]
    assert query_hetero(registry, model, ["LIMITED", "HOST"], {})["tanh"] == "LIMITED.0"
    executor = compile_hetero(registry, model, ["LIMITED", "HOST"], {})
    assert executor.get_property("HETERO_NUMBER_OF_SUBMODELS") == 3
    x = _x()
    np.testing.assert_allclose(executor.run(Request({"x": x})).outputs["y"],
                               ort_run(diamond_model(), {"x": x})[0], rtol=1e-5, atol=1e-6)
    executor.close()


@pytest.mark.parametrize("devices", [[], ["NPU"], ["LIMITED.7", "CPU2"], ["LIMITED", "LIMITED.0"]])
def test_bad_device_lists(devices: list[str]) -> None:
    registry, _ = _registry()
    with pytest.raises(DeviceNameError):
        compile_hetero(registry, _ir(diamond_model()), devices, {})


# --- execution ---------------------------------------------------------------------------


def test_a_plugin_error_mid_compile_closes_the_programs_already_compiled() -> None:
    registry, _ = _registry(excluded={"Concat"})
    model = _ir(glue_model())
    assert len(plan_hetero(registry, model, ["LIMITED", "HOST"], {}).subgraphs) > 1
    compile_one = registry.compile
    compiled: list[DeviceProgram] = []
    closed: list[str] = []

    def compile_then_fail(submodel: ir.Model, device: str, config: Mapping[str, Any],
                          own_process: bool = False) -> DeviceProgram:
        if compiled:  # the first subgraph compiles; the plugin raises its own error on the next
            raise RuntimeError("out of device memory")
        program = compile_one(submodel, device, config)
        program.close = lambda: closed.append(device)  # type: ignore[method-assign]
        compiled.append(program)
        return program

    registry.compile = compile_then_fail  # type: ignore[method-assign, assignment]
    with pytest.raises(RuntimeError, match="out of device memory"):
        compile_hetero(registry, model, ["LIMITED", "HOST"], {})
    assert closed == [compiled[0].device]


def test_whole_model_on_first_device_is_one_program() -> None:
    registry, plugin = _registry()
    model = _ir(chain_model())
    executor = compile_hetero(registry, model, ["LIMITED", "HOST"], {})
    assert executor.get_property("HETERO_NUMBER_OF_SUBMODELS") == 1
    assert plugin.compiled[0][1] is model  # the model itself: nothing over the device alone
    executor.close()


def test_tensors_stay_native_and_cross_once_with_counters() -> None:
    registry, plugin = _registry(excluded={"Sigmoid"})
    executor = compile_hetero(registry, _ir(diamond_model()), ["LIMITED", "HOST"],
                              {"ENABLE_PROFILING": True})
    x = _x()
    result = executor.run(Request({"x": x}))
    np.testing.assert_allclose(result.outputs["y"], ort_run(diamond_model(), {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    transfers = [r for r in result.profiling if r.node_type == "Transfer"]
    assert sorted(r.node_name for r in transfers) == [
        "subgraph1: transfer a LIMITED.0->HOST.0", "subgraph2: transfer b HOST.0->LIMITED.0"]
    assert all(r.bytes == x.nbytes for r in transfers)
    assert {r.node_name.split(":")[0] for r in result.profiling} == {"subgraph0", "subgraph1",
                                                                     "subgraph2"}
    # host -> device: x and b; c, a and h0 went subgraph0 -> subgraph2 without leaving LIMITED.0
    assert plugin.counters == {"host_to_device": 2, "to_host": 1, "to_native": 1}
    executor.close()


def test_gpu_to_gpu_moves_device_to_device() -> None:
    registry, plugin = _registry()
    model = _ir(chain_model(4))
    for node in model.graph:
        node.metadata_props["affinity"] = "LIMITED.0" if node.name < "mm2" else "LIMITED.1"
    executor = compile_hetero(registry, model, ["LIMITED.0", "LIMITED.1"], {})
    assert executor.execution_devices == ["LIMITED.0", "LIMITED.1"]
    executor.run(Request({"x": _x(2, 16)}))
    assert plugin.counters.get("to_host", 0) == 0 and plugin.counters["to_native"] >= 1
    executor.close()


def test_async_overlaps_and_ends_every_request_once() -> None:
    registry, plugin = _registry(excluded={"Sigmoid"}, delay=0.02)
    executor = compile_hetero(registry, _ir(diamond_model()), ["LIMITED", "HOST"], {})
    x = _x()
    expected = ort_run(diamond_model(), {"x": x})[0]
    outcomes: list[object] = []
    lock, finished = threading.Lock(), threading.Event()

    def done(outcome: object) -> None:
        with lock:
            outcomes.append(outcome)
            if len(outcomes) == 12:
                finished.set()

    for _ in range(12):
        _submit(executor, {"x": x}, done)
    assert finished.wait(20)
    assert len(outcomes) == 12
    for outcome in outcomes:
        np.testing.assert_allclose(outcome.outputs["y"], expected, rtol=1e-5, atol=1e-6)
    plugin.fail_on = "LIMITED.0"
    failed: list[object] = []
    event = threading.Event()
    _submit(executor, {"x": x}, lambda o: (failed.append(o), event.set()))
    assert event.wait(5) and isinstance(failed[0], InferenceError)
    assert "LIMITED.0" in str(failed[0])
    executor.close()


def test_visualize_env_writes_dot_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, _ = _registry(excluded={"Sigmoid"})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENVINO_HETERO_VISUALIZE", "1")
    compile_hetero(registry, _ir(diamond_model()), ["LIMITED", "HOST"], {}).close()
    affinity = (tmp_path / "hetero_affinity_diamond.dot").read_text()
    subgraphs = (tmp_path / "hetero_subgraphs_diamond.dot").read_text()
    assert affinity.startswith("digraph") and "HOST.0" in affinity
    assert subgraphs.count("subgraph cluster_") == 3 and "color=red" in subgraphs


# --- through the Core --------------------------------------------------------------------


def test_core_hetero_with_device_properties_and_async_queue() -> None:
    core = ov.Core()
    plugin = LimitedPlugin(ops=None, excluded={"Trilu"}, workers=1)
    core.register_plugin(plugin)
    core.set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": "LIMITED,CPU"})
    model = core.read_model(named(contrib_model()))
    compiled = core.compile_model(model, "HETERO", {
        "DEVICE_PROPERTIES": {"LIMITED": {"ENABLE_PROFILING": True}}})
    assert compiled.get_property("HETERO_NUMBER_OF_SUBMODELS") == 3
    x = _x()
    expected = ort_run(named(contrib_model()), {"x": x})[0]
    queue = ov.AsyncInferQueue(compiled, 3)
    seen: list[int] = []
    queue.set_callback(lambda request, userdata: seen.append(userdata) or np.testing.assert_allclose(
        request.results["y"], expected, rtol=1e-5, atol=1e-6))
    for i in range(9):
        queue.start_async({"x": x}, i)
    queue.wait_all()
    assert sorted(seen) == list(range(9))


def _submit(runner: Runner, inputs: dict[str, Any], done: Any) -> None:
    """Start one request on ``runner``; ``done`` gets its RunResult or its error."""
    request = Request(inputs)
    request.future.add_done_callback(
        lambda f: done(f.exception() if f.exception() is not None else f.result()))
    runner.submit(request)
