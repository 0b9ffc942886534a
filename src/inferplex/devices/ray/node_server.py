"""What runs on a Ray node: one actor per compiled model and node, serving it through inferplex there.

:class:`NodeServer` is a plain class; :func:`actor_class` turns it into a Ray
actor class when the first ``RAY`` device compiles (so importing this module
imports neither ray nor any engine).  On the node the actor reads the model
bytes with inferplex's own ``read_model`` (the same checks as on the caller's
side: malformed ONNX and external data are refused), compiles it there on the
node's device string (default ``AUTO`` with ``CUMULATIVE_THROUGHPUT``, so every
device of the node serves) and keeps one infer request per request the node's
compiled model takes at once (its ``OPTIMAL_NUMBER_OF_INFER_REQUESTS``).

The actor is threaded: Ray runs up to :data:`MAX_CONCURRENCY` of its calls at
once, each taking a free infer request (or waiting for one), so a caller that
keeps more requests in flight than the node runs has the next one's inputs
already on the node when a request frees.

Every reply is plain data, built here and read by the caller without trusting
it: ``("ok", value)`` or ``("error", error class name, message)``, where value
holds only numpy arrays, strings, numbers, lists and dicts.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["MAX_CONCURRENCY", "NodeServer", "actor_class"]

MAX_CONCURRENCY = 32
"""Calls one node actor runs at once (Ray's ``max_concurrency`` of a threaded actor)."""

Reply = tuple[Any, ...]


def _error(error: BaseException) -> Reply:
    return ("error", type(error).__name__, str(error))


def _plain(value: Any) -> Any:
    """``value`` as strings, numbers, lists and dicts only (enums and typed values as their text)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


class NodeServer:
    """One model compiled by inferplex on this node (see the module docstring)."""

    def __init__(self, model_bytes: bytes, device: str, properties: Mapping[str, Any]) -> None:
        self._failure: BaseException | None = None
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._profiling = bool(properties.get("ENABLE_PROFILING") or properties.get("PERF_COUNT"))
        try:
            import inferplex
            from inferplex.devices.ray.cluster import serving_on_a_node

            serving_on_a_node()
            core = inferplex.Core()
            model = core.read_model(bytes(model_bytes))
            self._compiled = core.compile_model(model, device, dict(properties))
            self._outputs = [port.get_any_name() for port in self._compiled.outputs]
            self._optimal = max(1, int(self._compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
            for _ in range(self._optimal):
                self._requests.put(self._compiled.create_infer_request())
        except Exception as error:  # noqa: BLE001 - told to the caller by ready(), in its own class
            self._failure = error

    def ready(self) -> Reply:
        """``("ok", facts)`` once compiled (node requests, execution devices, pid), or why not."""
        if self._failure is not None:
            return _error(self._failure)
        devices = self._compiled.get_property("EXECUTION_DEVICES")
        return ("ok", {"optimal": self._optimal, "execution_devices": _plain(devices), "pid": os.getpid()})

    def infer(self, inputs: Mapping[str, np.ndarray]) -> Reply:
        """Run one request: ``("ok", outputs by name, profiling rows)`` or ``("error", kind, message)``."""
        if self._failure is not None:
            return _error(self._failure)
        request = self._requests.get()
        try:
            # The arrays Ray hands over are read-only views of its object store: read in place.
            results = request.infer(dict(inputs), share_inputs=True)
            outputs = {name: np.asarray(results[index]) for index, name in enumerate(self._outputs)}
            rows = [_profiling_row(info) for info in request.get_profiling_info()] if self._profiling else []
        except Exception as error:  # noqa: BLE001 - told to the caller in its own class
            return _error(error)
        finally:
            self._requests.put(request)
        return ("ok", outputs, rows)

    def get_property(self, key: str) -> Reply:
        """A property of the node's compiled model, as plain data."""
        if self._failure is not None:
            return _error(self._failure)
        try:
            return ("ok", _plain(self._compiled.get_property(key)))
        except Exception as error:  # noqa: BLE001 - told to the caller in its own class
            return _error(error)


def _profiling_row(info: Any) -> tuple[str, str, str, float, float, str]:
    return (str(info.node_name), str(info.node_type), str(info.exec_type),
            info.real_time.total_seconds(), info.cpu_time.total_seconds(), str(info.status))


def actor_class() -> Any:
    """:class:`NodeServer` as a Ray actor class (imports ray)."""
    global _ACTOR
    if _ACTOR is None:
        import ray

        _ACTOR = ray.remote(NodeServer)
    return _ACTOR


_ACTOR: Any = None
