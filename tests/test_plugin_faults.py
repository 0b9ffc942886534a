"""A device plugin that breaks its contract reaches the user as an inferplex error naming the device.

Through the public API only: a test plugin (the CPU under the name ``FAULT``)
whose program's run returns what a broken plugin might (nothing, a list,
another output, another element type, a non-array), on one device, as a
HETERO subgraph and as a MULTI member (where the request is re-run on the CPU,
whose result matches ONNX Runtime's).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest
from hooked_plugin import HookedPlugin
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InferenceError, PluginError

from conftest import make_model, ort_run

MODEL = make_model([helper.make_node("Add", ["x", "x"], ["s"], name="add"),
                    helper.make_node("Tanh", ["s"], ["y"], name="tanh")],
                   [("x", TensorProto.FLOAT, [2, 8])], [("y", TensorProto.FLOAT, [2, 8])])
X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
EXPECTED = ort_run(MODEL, {"x": X})[0]

Outputs = Callable[[], Any]
BROKEN: dict[str, tuple[Outputs, str]] = {
    "nothing": (lambda: None, "its run returned NoneType; it must return a dict"),
    "a list": (lambda: [EXPECTED], "its run returned list; it must return a dict"),
    "another output": (lambda: {"z": EXPECTED}, "output 'y' is missing"),
    "another type": (lambda: {"y": EXPECTED.astype(np.int64)}, "output 'y' is int64, the model says float32"),
    "a string": (lambda: {"y": "y"}, "output 'y' is a str, not an array"),
}


class _Program(ov.DeviceProgram):
    def __init__(self, inner: ov.DeviceProgram, outputs: Outputs) -> None:
        self.inner, self.outputs = inner, outputs
        self.device = "FAULT"
        self.num_workers = inner.num_workers

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        self.inner.run(inputs, worker, keep_on_device)
        return self.outputs()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.inner.close()


class _FaultPlugin(HookedPlugin):
    """The CPU as device ``FAULT``, whose runs hand back ``outputs()`` instead of their results."""

    family = "FAULT"

    def __init__(self, outputs: Outputs) -> None:
        super().__init__(lambda inputs, worker: None)
        self.outputs = outputs

    def devices(self) -> list[str]:
        return ["FAULT"]

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> ov.DeviceProgram:
        return _Program(self.cpu.compile(model, "CPU", config), self.outputs)

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        return 1


def _compiled(outputs: Outputs, device: str, config: Mapping[str, Any] | None = None) -> ov.CompiledModel:
    core = ov.Core()
    core.register_plugin(_FaultPlugin(outputs), "FAULT")
    return core.compile_model(MODEL, device, config)


def _run_async(compiled: ov.CompiledModel) -> ov.InferRequest:
    request = compiled.create_infer_request()
    request.start_async({"x": X})
    request.wait()
    return request


@pytest.mark.parametrize("device", ["FAULT", "HETERO:FAULT,CPU"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_run_result_is_a_plugin_error_naming_the_device(device: str, case: str) -> None:
    outputs, message = BROKEN[case]
    compiled = _compiled(outputs, device)
    pattern = f"FAULT broke the device program contract: {message}"
    with pytest.raises(PluginError, match=pattern):
        compiled({"x": X})
    with pytest.raises(PluginError, match=pattern):
        _run_async(compiled)
    request = compiled.create_infer_request()
    seen: list[BaseException] = []

    def read_in_callback(_: Any) -> None:
        try:
            request.results["y"]
        except PluginError as error:
            seen.append(error)

    request.set_callback(read_in_callback)
    request.start_async({"x": X})
    with pytest.raises(PluginError):
        request.wait()
    assert len(seen) == 1 and isinstance(seen[0], PluginError)


def test_a_queue_over_a_broken_device_ends_every_job_with_the_plugin_error() -> None:
    compiled = _compiled(BROKEN["nothing"][0], "FAULT")
    queue = ov.AsyncInferQueue(compiled, 2)
    errors: list[str] = []

    def callback(request: ov.InferRequest, _: Any) -> None:
        try:
            request.results["y"]
        except PluginError as error:
            errors.append(str(error))

    queue.set_callback(callback)
    for _ in range(6):
        queue.start_async({"x": X})
    queue.wait_all()
    assert len(errors) == 6 and all("FAULT broke the device program contract" in e for e in errors)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_multi_reruns_a_broken_result_on_another_device(case: str) -> None:
    compiled = _compiled(BROKEN[case][0], "MULTI:FAULT,CPU")
    for _ in range(3):
        np.testing.assert_allclose(compiled({"x": X})["y"], EXPECTED, rtol=1e-6)
        np.testing.assert_allclose(_run_async(compiled).results["y"], EXPECTED, rtol=1e-6)


def test_multi_without_fallback_names_the_broken_device() -> None:
    compiled = _compiled(BROKEN["a list"][0], "MULTI:FAULT", {"ENABLE_RUNTIME_FALLBACK": False})
    with pytest.raises(InferenceError, match="FAULT broke the device program contract"):
        compiled({"x": X})


@pytest.mark.parametrize("device", ["CPU", "HETERO:CPU"])
def test_a_sequence_output_is_not_mistaken_for_a_broken_result(device: str) -> None:
    """Only tensor outputs must be arrays: a sequence output is a list (as ONNX Runtime returns it)."""
    graph = helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
         helper.make_node("SequenceConstruct", ["x", "t"], ["seq"], name="pack")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    got = ov.Core().compile_model(model, device)({"x": X})["seq"]
    want = ort_run(model, {"x": X})[0]
    assert len(got) == len(want) == 2
    for value, reference in zip(got, want, strict=True):
        np.testing.assert_allclose(value, reference, rtol=1e-6)


class _NoQueryPlugin(_FaultPlugin):
    """A plugin whose op query raises its own exception."""

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        raise RuntimeError("query failed inside the plugin")


def test_a_plugin_whose_op_query_raises_gives_a_compile_error_naming_it() -> None:
    from inferplex.errors import CompileError

    core = ov.Core()
    core.register_plugin(_NoQueryPlugin(lambda: {"y": EXPECTED}), "FAULT")
    for call in (lambda: core.query_model(MODEL, "HETERO:FAULT,CPU"),
                 lambda: core.compile_model(MODEL, "HETERO:FAULT,CPU")):
        with pytest.raises(CompileError, match=r"FAULT.*_NoQueryPlugin\.supported_nodes raised RuntimeError"):
            call()
