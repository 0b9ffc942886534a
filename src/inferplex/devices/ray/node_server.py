"""What runs on a Ray node: one actor per compiled model and node, serving it through inferplex there.

:class:`NodeServer` is a plain class; :func:`actor_class` turns it into a Ray
actor class when the first ``RAY`` device compiles (so importing this module
imports neither ray nor any engine).  On the node the actor reads the model
bytes with inferplex's own ``read_model`` (the same checks as on the caller's
side: malformed ONNX and external data are refused), compiles it there on the
node's device string (default ``AUTO`` with ``CUMULATIVE_THROUGHPUT``, so every
device of the node serves) and keeps one infer request per request the node's
compiled model takes at once (its ``OPTIMAL_NUMBER_OF_INFER_REQUESTS``).

One call carries a list of requests (the caller gathers the requests that
arrive while its earlier calls are in flight): :meth:`NodeServer.infer_many`
starts each on a free infer request as soon as one is free (``start_async``), so
the call's requests run at once on every infer request the node has, and a
request frees its infer request as soon as it ends.  The actor is threaded: Ray
runs up to :data:`MAX_CONCURRENCY` of its calls at once, so the next call's
requests are already on the node, waiting for infer requests, when one frees.

The node's inferplex sees only the devices Ray says the node has: where the
node holds no GPU in Ray's resources, the actor hides the host's GPUs from it
(``CUDA_VISIBLE_DEVICES`` empty, and no emulated GPUs) before anything starts CUDA.  Ray itself leaves
them visible to an actor that asks for none, so nodes that split one host (CPU
nodes beside a GPU node) would otherwise each compile the model for the host's
GPU too and serve from it at once.

Every reply is plain data, built here and read by the caller without trusting
it: ``("ok", value)`` or ``("error", error class name, message)``, where value
holds only numpy arrays, strings, numbers, lists and dicts.  A call's reply is
``("ok", [one reply per request])``: a request the node refuses or fails ends
with its own ``("error", ...)`` entry, and the others of its call are unaffected.
"""

from __future__ import annotations

import os
import queue
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from inferplex.config.values import OptionEnum

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
    if isinstance(value, OptionEnum):
        return value.text  # "CUMULATIVE_THROUGHPUT", which the driver's enum member equals
    return str(value)


class NodeServer:
    """One model compiled by inferplex on this node (see the module docstring)."""

    def __init__(self, model_bytes: bytes, device: str, properties: Mapping[str, Any],
                 node_gpus: int = -1) -> None:
        """``node_gpus``: the GPUs the node holds in Ray's resources (0: the host's GPUs are
        hidden from this process; below 0: unknown, left as they are)."""
        if node_gpus == 0:
            _hide_gpus()
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

    def infer_many(self, batch: list[Mapping[str, np.ndarray]]) -> Reply:
        """Run a call's requests: ``("ok", [reply per request])``, each ``("ok", outputs by name,
        profiling rows)`` or ``("error", kind, message)``; ``("error", ...)`` for the whole call."""
        if self._failure is not None:
            return _error(self._failure)
        if not isinstance(batch, list):
            return ("error", "InputError", f"a call carries a list of requests, got {type(batch).__name__}")
        if len(batch) == 1:  # a lone request runs on this thread: no hand-over to wait for
            return ("ok", [self._infer_one(batch[0])])
        replies: list[Reply] = [("error", "InferenceError", "the request did not run")] * len(batch)
        started: deque[tuple[int, Any]] = deque()
        for index, inputs in enumerate(batch):
            request = self._free_request(started, replies)
            try:
                # The arrays Ray hands over are read-only views of its object store: read in place.
                request.start_async(_inputs(inputs), share_inputs=True)
            except Exception as error:  # noqa: BLE001 - this request is refused; the others run
                replies[index] = _error(error)
                self._requests.put(request)
                continue
            started.append((index, request))
        while started:
            index, request = started.popleft()
            replies[index] = self._ended(request)
            self._requests.put(request)
        return ("ok", replies)

    def _free_request(self, started: deque[tuple[int, Any]], replies: list[Reply]) -> Any:
        """A free infer request; where none is free, this call's oldest started one once it ends
        (waiting for other calls' requests is safe only while this call holds none)."""
        if not started:
            return self._requests.get()
        try:
            return self._requests.get_nowait()
        except queue.Empty:
            index, request = started.popleft()
            replies[index] = self._ended(request)
            return request

    def _infer_one(self, inputs: Mapping[str, np.ndarray]) -> Reply:
        request = self._requests.get()
        try:
            results = request.infer(_inputs(inputs), share_inputs=True)
            return ("ok", {name: np.asarray(results[index]) for index, name in enumerate(self._outputs)},
                    self._rows(request))
        except Exception as error:  # noqa: BLE001 - told to the caller in its own class
            return _error(error)
        finally:
            self._requests.put(request)

    def _ended(self, request: Any) -> Reply:
        """Wait for a started request; its reply, its outputs copied out of the request's tensors
        (the next request on it writes there)."""
        try:
            request.wait()
            results = request.results
            outputs = {name: np.array(results[index], copy=True) for index, name in enumerate(self._outputs)}
            return ("ok", outputs, self._rows(request))
        except Exception as error:  # noqa: BLE001 - told to the caller in its own class
            return _error(error)

    def _rows(self, request: Any) -> list[tuple[str, str, str, float, float, str]]:
        return [_profiling_row(info) for info in request.get_profiling_info()] if self._profiling else []

    def get_property(self, key: str) -> Reply:
        """A property of the node's compiled model, as plain data."""
        if self._failure is not None:
            return _error(self._failure)
        try:
            return ("ok", _plain(self._compiled.get_property(key)))
        except Exception as error:  # noqa: BLE001 - told to the caller in its own class
            return _error(error)


def _hide_gpus() -> None:
    """Hide the host's GPUs from this process and the worker processes it starts (a node
    without GPUs in Ray's resources); before CUDA starts, which reads this once."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.pop("INFERPLEX_EMULATED_GPUS", None)  # nor GPUs emulated on the host's CPU


def _inputs(inputs: Any) -> dict[str, Any]:
    """A request's inputs by name, as the caller sent them (a mapping; anything else is refused)."""
    if not isinstance(inputs, Mapping):
        raise TypeError(f"a request's inputs are a mapping of input name to array, "
                        f"got {type(inputs).__name__}")
    return dict(inputs)


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
