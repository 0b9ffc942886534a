"""Inputs a request owns are page-locked where its device can page-lock host memory.

A test device (the CPU's engine under the name ``PINNING``) implements
``DeviceProgram.pin_host_memory`` by recording each call; its runs record the
address of each input they read.  Results are checked against ONNX Runtime.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
from hooked_plugin import HookedPlugin, HookedProgram
from onnx import TensorProto, helper

import inferplex as ov

IMAGE = [1, 3, 224, 224]  # 602,112 bytes of f32: large enough to be page-locked
MODEL = helper.make_model(helper.make_graph(
    [helper.make_node("Mul", ["image", "gain"], ["scaled"]),
     helper.make_node("Relu", ["scaled"], ["y"])],
    "pinned", [helper.make_tensor_value_info("image", TensorProto.FLOAT, IMAGE),
               helper.make_tensor_value_info("gain", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, IMAGE)]),
    opset_imports=[helper.make_opsetid("", 17)])


class _Ledger:
    def __init__(self) -> None:
        self.pinned: dict[int, int] = {}  # address -> size, while locked
        self.pins = 0
        self.read: list[int] = []  # address of the image each run read

    def pin(self, address: int, size: int) -> Callable[[], None]:
        assert address not in self.pinned
        self.pinned[address] = size
        self.pins += 1
        return lambda: self.pinned.pop(address)


class _PinningPlugin(HookedPlugin):
    family = "PINNING"

    def __init__(self, ledger: _Ledger) -> None:
        super().__init__(lambda inputs, _worker: ledger.read.append(inputs["image"].ctypes.data))
        self.ledger = ledger

    def devices(self) -> list[str]:
        return ["PINNING"]

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> ov.DeviceProgram:
        program = HookedProgram(self.cpu.compile(model, "CPU", config), self.hook)
        program.device = "PINNING"
        program.pin_host_memory = self.ledger.pin  # type: ignore[method-assign]
        return program


def _expected(feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(MODEL.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_owned_inputs_are_pinned_once_read_in_place_and_unpinned_when_let_go() -> None:
    ledger = _Ledger()
    core = ov.Core()
    core.register_plugin(_PinningPlugin(ledger), "PINNING")
    request = core.compile_model(MODEL, "PINNING").create_infer_request()
    rng = np.random.default_rng(0)
    for _ in range(3):  # copied into the request's own array: pinned once, reused by later runs
        feeds = {"image": rng.standard_normal(IMAGE).astype(np.float32), "gain": np.array([2.0], np.float32)}
        np.testing.assert_allclose(request.infer(feeds)["y"], _expected(feeds), rtol=1e-6)
    assert ledger.pins == 1 and list(ledger.pinned.values()) == [int(np.prod(IMAGE)) * 4]
    assert set(ledger.read) == set(ledger.pinned)  # the runs read the pinned array itself

    own = rng.standard_normal(IMAGE).astype(np.float32)
    shared = {"image": own, "gain": np.array([0.5], np.float32)}
    np.testing.assert_allclose(request.infer(shared, share_inputs=True)["y"], _expected(shared), rtol=1e-6)
    assert ledger.read[-1] == own.ctypes.data and not ledger.pinned  # the caller's memory: nothing locked

    converted = {"image": own.astype(np.float64), "gain": np.array([0.5], np.float32)}
    for _ in range(2):  # shared but converted: a new copy each call, never page-locked
        np.testing.assert_allclose(request.infer(converted, share_inputs=True)["y"], _expected(shared),
                                   rtol=1e-6)
    assert ledger.pins == 1 and not ledger.pinned

    request.infer({"image": own, "gain": np.array([1.0], np.float32)})  # copied in again: that array lasts
    assert ledger.pins == 2 and len(ledger.pinned) == 1 and ledger.read[-1] in ledger.pinned
    del request
    gc.collect()
    assert not ledger.pinned
