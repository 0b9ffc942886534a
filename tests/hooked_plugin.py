"""A device whose runs call a test's hook first: the CPU's engine under another name.

``hooked_compile(model, config, hook)`` compiles on a fresh Core's ``HOOKED``
device; ``hook(inputs, worker)`` runs before each real run (a gate, a barrier),
so tests steer concurrency through the public API, not through internals.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import onnx_ir as ir

import inferplex as ov
from inferplex.devices.cpu import CpuPlugin

Hook = Callable[[Mapping[str, Any], int], None]


class HookedProgram(ov.DeviceProgram):
    def __init__(self, inner: ov.DeviceProgram, hook: Hook) -> None:
        self.inner, self.hook = inner, hook
        self.device = "HOOKED"
        self.num_workers = inner.num_workers

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        self.hook(inputs, worker)
        return self.inner.run(inputs, worker, keep_on_device)

    def get_property(self, key: str) -> Any:
        return self.inner.get_property(key)

    def property_names(self) -> tuple[str, ...]:
        return self.inner.property_names()

    def close(self) -> None:
        self.inner.close()


class HookedPlugin(ov.DevicePlugin):
    """The CPU plugin as device ``HOOKED``, calling ``hook`` before each run."""

    family = "HOOKED"

    def __init__(self, hook: Hook) -> None:
        self.cpu, self.hook = CpuPlugin(), hook

    def devices(self) -> list[str]:
        return ["HOOKED"]

    def supported_properties(self) -> tuple[str, ...]:
        return self.cpu.supported_properties()

    def device_property(self, device: str, key: str) -> Any:
        return self.cpu.device_property("CPU", key)

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        return self.cpu.supported_nodes(model, "CPU", config)

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> ov.DeviceProgram:
        return HookedProgram(self.cpu.compile(model, "CPU", config), self.hook)

    def memory(self, device: str) -> ov.MemoryInfo:
        return self.cpu.memory("CPU")

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        return self.cpu.optimal_number_of_infer_requests("CPU", config)


def hooked_compile(model: Any, config: Mapping[str, Any] | None, hook: Hook) -> ov.CompiledModel:
    """``model`` compiled on a fresh Core's HOOKED device, ``hook`` before each run."""
    core = ov.Core()
    core.register_plugin(HookedPlugin(hook), "HOOKED")
    return core.compile_model(model, "HOOKED", config)
