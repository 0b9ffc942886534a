"""The ``RAY`` device family: ``RAY.0`` ... ``RAY.N-1``, one per alive node of a reachable Ray cluster.

A ``RAY.i`` device runs the whole model on its node, through inferplex there
(:mod:`inferplex.devices.ray.node_server`): the node compiles it on its own
device string, ``AUTO`` with ``CUMULATIVE_THROUGHPUT`` by default, so that every
device of the node serves.  Under MULTI and AUTO a node is one more member, its
requests run by a DevicePool like any device's.

Settings of a ``RAY`` device (also through ``DEVICE_PROPERTIES={"RAY": {...}}``
or ``{"RAY.1": {...}}``):

- ``NODE_DEVICE``: the device string the node compiles for (default ``"AUTO"``),
  e.g. ``"CPU"``, ``"GPU.0"``, ``"MULTI:GPU.0,CPU"``.
- ``NODE_PROPERTIES``: the config the node compiles with (a dict), applied last.
- ``PERFORMANCE_HINT``, ``PERFORMANCE_HINT_NUM_REQUESTS``, ``INFERENCE_PRECISION_HINT``,
  ``EXECUTION_MODE_HINT``, ``ENABLE_PROFILING`` pass down to the node.  A
  throughput hint (what MULTI members get) becomes ``CUMULATIVE_THROUGHPUT``
  where the node's device is AUTO or MULTI, so every device of the node serves.
- ``REQUESTS_PER_CALL`` (0-256, default 0: twice the node's own optimal number of
  requests, at least 4) and ``CALLS_IN_FLIGHT`` (1-16, default 2): requests that
  arrive while ``CALLS_IN_FLIGHT`` calls to the node are in flight go out together
  as one actor call of up to ``REQUESTS_PER_CALL`` (see
  :mod:`inferplex.devices.ray.program`); ``REQUESTS_PER_CALL=1`` sends each request in
  a call of its own.

The model goes to the object store once per distinct model (``ray.put`` of its
ONNX bytes, shared by the nodes it is compiled on); each node's actor reads it
from there.  ``DEVICE_TYPE`` is ``"remote"``: AUTO's default order puts the
nodes after the host, so plain ``AUTO`` with a latency hint keeps to this
machine; ``AUTO:RAY`` with ``CUMULATIVE_THROUGHPUT`` uses every node.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inferplex.config.devices import parse_device_string
from inferplex.config.values import Parser, Reject
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo
from inferplex.devices.ray import cluster
from inferplex.devices.ray.program import (
    DEFAULT_CALLS_IN_FLIGHT,
    MAX_CALLS_IN_FLIGHT,
    MAX_REQUESTS_PER_CALL,
    RayProgram,
    requests_per_call,
    start_actor,
)
from inferplex.errors import CompileError, DeviceNameError

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["RayPlugin", "node_settings"]

_FORWARDED = ("PERFORMANCE_HINT_NUM_REQUESTS", "INFERENCE_PRECISION_HINT", "EXECUTION_MODE_HINT",
              "ENABLE_PROFILING")
_SUPPORTED = ("PERFORMANCE_HINT", *_FORWARDED, "NODE_DEVICE", "NODE_PROPERTIES", "REQUESTS_PER_CALL",
              "CALLS_IN_FLIGHT")


def _device_string(value: Any) -> str:
    """A device string of the node's own devices (a node does not reach back into the cluster)."""
    accepted = "a device string of the node's own devices such as 'AUTO', 'CPU' or 'MULTI:GPU.0,CPU'"
    try:
        spec = parse_device_string(value)
    except (DeviceNameError, TypeError) as error:
        raise Reject(f"{accepted} ({error})") from None
    names = [target.name for target in spec.targets] or [str(value)]
    if any(name.split(".")[0] == "RAY" for name in names):
        raise Reject(accepted)
    return str(value)


def _properties(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Reject("a dict of property names to values, e.g. {'PERFORMANCE_HINT': 'THROUGHPUT'}")
    return dict(value)


def _int_between(low: int, high: int, meaning: str) -> Parser:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
            raise Reject(f"an integer from {low} to {high} ({meaning})")
        number = int(value)
        if not low <= number <= high:
            raise Reject(f"an integer from {low} to {high} ({meaning})")
        return number

    return parse


_PARSERS: dict[str, Parser] = {
    "NODE_DEVICE": _device_string,
    "NODE_PROPERTIES": _properties,
    "REQUESTS_PER_CALL": _int_between(0, MAX_REQUESTS_PER_CALL, "0: twice the node's optimal number of "
                                      "requests, at least 4"),
    "CALLS_IN_FLIGHT": _int_between(1, MAX_CALLS_IN_FLIGHT, f"default {DEFAULT_CALLS_IN_FLIGHT}"),
}


def node_settings(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The device string and config a node compiles with, from a ``RAY`` device's config."""
    device = str(config.get("NODE_DEVICE", "AUTO"))
    whole_node = parse_device_string(device).virtual in ("AUTO", "MULTI")
    properties: dict[str, Any] = {key: config[key] for key in _FORWARDED if key in config}
    hint = config.get("PERFORMANCE_HINT")
    if whole_node and hint in (None, "THROUGHPUT", "CUMULATIVE_THROUGHPUT"):
        properties["PERFORMANCE_HINT"] = "CUMULATIVE_THROUGHPUT"
    elif hint is not None:
        properties["PERFORMANCE_HINT"] = "THROUGHPUT" if hint == "CUMULATIVE_THROUGHPUT" else hint
    properties.update(config.get("NODE_PROPERTIES") or {})
    return device, properties


class _ModelInStore:
    """A model's bytes in the object store; freed when no program (nor the cache) holds this."""

    __slots__ = ("__weakref__", "ref")

    def __init__(self, ref: Any) -> None:
        self.ref = ref


class RayPlugin(DevicePlugin):
    """The nodes of a reachable Ray cluster as devices (see the module docstring)."""

    family = "RAY"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: weakref.WeakValueDictionary[str, _ModelInStore] = weakref.WeakValueDictionary()

    def devices(self) -> list[str]:
        return [f"RAY.{index}" for index in range(len(cluster.alive_nodes()))]

    def supported_properties(self) -> tuple[str, ...]:
        return _SUPPORTED

    def property_parsers(self) -> Mapping[str, Parser]:
        return _PARSERS

    def node(self, device: str) -> cluster.RayNode:
        """The cluster node ``RAY.i`` names now."""
        nodes = cluster.alive_nodes()
        _, _, index = device.partition(".")
        if not index.isdigit() or int(index) >= len(nodes):
            raise DeviceNameError(f"{device!r} is not a node of the Ray cluster; its nodes now: "
                                  f"{', '.join(f'RAY.{i}' for i in range(len(nodes))) or 'none'}")
        return nodes[int(index)]

    def device_property(self, device: str, key: str) -> Any:
        node = self.node(device)
        facts = {
            "FULL_DEVICE_NAME": node.describe,
            "DEVICE_TYPE": lambda: "remote",
            "DEVICE_ID": lambda: node.node_id,
            "NODE_ADDRESS": lambda: node.address,
            "NODE_RESOURCES": lambda: dict(node.resources),
            "DEVICE_TOTAL_MEM_SIZE": lambda: int(node.resources.get("memory", 0)),
            "NODE_DEVICE": lambda: "AUTO",
            "NODE_PROPERTIES": dict,
        }
        if key not in facts:
            raise KeyError(key)
        return facts[key]()

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        """A guess before compiling (the node's CPUs as its optimal number of requests, and the
        program's rule on top); the compiled program knows from the node's own."""
        cpus = max(1, int(self.node(device).resources.get("CPU", 1)))
        in_flight = int(config.get("CALLS_IN_FLIGHT", DEFAULT_CALLS_IN_FLIGHT))
        return (in_flight + 1) * (int(config.get("REQUESTS_PER_CALL", 0)) or requests_per_call(cpus))

    def memory(self, device: str) -> MemoryInfo:
        total = int(self.node(device).resources.get("memory", 0))
        return MemoryInfo(total, total)

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        """Every op: the node runs the whole model, its own AUTO choosing among its devices
        (a model the node cannot compile fails at compile with the node's reason)."""
        self.node(device)
        return {str(node.name) for node in model.graph}

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        node = self.node(device)
        node_device, node_config = node_settings(config)
        stored = self._model_in_store(model)
        # the program holds ``stored`` through ``start``: the bytes stay while it may start an actor
        start = functools.partial(start_actor, device, node, stored, node_device, node_config)
        return RayProgram(device, node, start, bool(config.get("ENABLE_PROFILING")),
                          int(config.get("REQUESTS_PER_CALL", 0)),
                          int(config.get("CALLS_IN_FLIGHT", DEFAULT_CALLS_IN_FLIGHT)))

    def _model_in_store(self, model: ir.Model) -> _ModelInStore:
        """The model's ONNX bytes in the object store, put once per distinct model."""
        import ray

        from inferplex.devices.cache import model_bytes

        try:
            data = model_bytes(model)
        except ValueError as error:  # protobuf refuses a message over 2 GiB
            raise CompileError(f"the model cannot be sent to a Ray node as one ONNX message: "
                               f"{error}") from error
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            stored = self._models.get(digest)
            if stored is None:
                stored = _ModelInStore(ray.put(data))
                self._models[digest] = stored
        return stored
