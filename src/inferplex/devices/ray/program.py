"""The caller's side of a ``RAY.i`` device: a DeviceProgram whose runs are calls to the node's actor.

Runs go to the node's actor gathered into calls (group commit, see
:mod:`~inferplex.devices.ray._coalesce`): a run sent while the node has fewer
than ``CALLS_IN_FLIGHT`` calls in flight goes at once; the runs that arrive
while it has that many go out together, up to ``REQUESTS_PER_CALL`` in one call,
as soon as one of those calls returns.  The caller's process thus makes one Ray
call (submit, ``ray.get``, read the reply) per call rather than per run, which is
what bounds a driver spreading requests over many nodes, and a lone run does
not wait for company.  A call sends its runs' inputs as one argument (Ray
serializes numpy arrays out of band and moves them through its object store
when they are large); the outputs come back as Ray hands them, read-only numpy
arrays that are zero-copy views of the object store where Ray stored them
there.  Nothing is pickled by hand, and the reply is checked for shape before
use: a tag and one entry per run, each a tag then numpy arrays by output name
(or that run's own error: a run the node refuses fails alone).

A reply is read only once it is in this process's node (:func:`wait_then_get`:
``ray.wait`` with ``fetch_local``, then ``ray.get``), never by a ``ray.get`` that
waits for it.  A ``ray.get`` that waits for an object of the object store (a
reply over Ray's 100 KiB inline limit) while other threads of the process
submit calls whose inputs go to the store stalls them and itself in steps of a
whole second (Ray's get re-checks once a second, holding the process's
connection to its store meanwhile): with several nodes' calls in flight, each
call took seconds, the longer the more nodes, and MULTI over several nodes served
less than one node alone.  ``ray.wait`` holds no such connection, and a lone call costs
the same either way.

``REQUESTS_PER_CALL`` defaults to twice the node's own
``OPTIMAL_NUMBER_OF_INFER_REQUESTS`` (at least 4), ``CALLS_IN_FLIGHT`` to 2, and
``num_workers`` (the runs the program takes at once; MULTI and AUTO sum these)
to enough for every call in flight and the next one gathering: while the node
runs one call, the next is already on its way, so the network's round trip
does not leave the node's devices idle.

Faults: a run whose actor or node dies ends with an :class:`InferenceError`
naming the device and the node, as does every run of the calls in flight, so
MULTI's runtime fallback re-runs them elsewhere and quarantines the device. The
next run after that (MULTI retries a device once its quarantine ends) starts a
new actor on the same node, which compiles the model again from the bytes
already in the object store; where the node is gone, that run fails too and the
device stays quarantined. Ray itself does not restart the actor
(``max_restarts=0``): a restart would re-run calls from a dead actor's queue
that the caller has already re-run elsewhere. :meth:`RayProgram.close` kills the
actor.
"""

from __future__ import annotations

import datetime
import threading
import uuid
import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from inferplex import errors
from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.devices.ray import cluster
from inferplex.devices.ray._coalesce import Coalescer, Outcome
from inferplex.devices.ray.cluster import RayNode
from inferplex.devices.ray.node_server import MAX_CONCURRENCY
from inferplex.errors import CompileError, InferenceError, InferplexError, InputError

__all__ = ["DEFAULT_CALLS_IN_FLIGHT", "MAX_CALLS_IN_FLIGHT", "MAX_REQUESTS_PER_CALL", "ActorStarter",
           "RayProgram", "error_from_reply", "requests_per_call", "start_actor", "wait_then_get"]

_LOCAL_PROPERTIES = ("NODE_ID", "FULL_DEVICE_NAME", "NODE_EXECUTION_DEVICES",
                     "NODE_OPTIMAL_NUMBER_OF_INFER_REQUESTS", "REQUESTS_PER_CALL", "CALLS_IN_FLIGHT",
                     "NODE_CALLS")

DEFAULT_CALLS_IN_FLIGHT = 2
"""Calls to one node's actor in flight at once, unless ``CALLS_IN_FLIGHT`` says otherwise."""

MAX_REQUESTS_PER_CALL = 256
"""The largest ``REQUESTS_PER_CALL`` (the program takes ``(CALLS_IN_FLIGHT + 1)`` times as many runs)."""

MAX_CALLS_IN_FLIGHT = MAX_CONCURRENCY // 2
"""The largest ``CALLS_IN_FLIGHT``: the actor runs :data:`MAX_CONCURRENCY` calls at once,
and property reads need some too."""


def requests_per_call(node_optimal: int) -> int:
    """The default ``REQUESTS_PER_CALL``: twice the node's own optimal number of requests, at least 4,
    so that a call keeps every infer request of the node busy with the next request waiting."""
    return max(4, min(2 * node_optimal, MAX_REQUESTS_PER_CALL))

ActorStarter = Callable[[], tuple[Any, dict[str, Any]]]
"""Starts a node's actor and waits until it has compiled: (actor handle, its facts)."""


def error_from_reply(device: str, reply: Any,
                     fallback: type[InferplexError] = InferenceError) -> InferplexError:
    """The caller-side exception for an ``("error", kind, message)`` reply (or a malformed one).

    An inferplex error on the node comes back as the same class; any other as
    ``fallback`` naming its class.
    """
    if isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "error":
        kind, message = str(reply[1]), str(reply[2])
        cls = getattr(errors, kind, None)
        if isinstance(cls, type) and issubclass(cls, InferplexError):
            return cls(f"{device}: {message}")
        return fallback(f"{device} failed: {kind}: {message}")
    return fallback(f"{device} sent a reply of an unknown form ({type(reply).__name__}); "
                    f"is the node running the same inferplex version?")


def _as_numpy(value: Any) -> np.ndarray:
    """A host numpy array of an input (torch tensors are copied to the host first)."""
    if isinstance(value, np.ndarray):
        return value
    to_host = getattr(value, "cpu", None)  # a torch tensor from a GPU neighbour in a HETERO chain
    if callable(to_host):
        value = to_host()
    return np.asarray(value)


class RayProgram(DeviceProgram):
    """A model compiled on one Ray node, run through its actor (see the module docstring).

    ``per_call``: most runs in one actor call (0: twice the node's own optimal
    number of requests, at least 4); ``in_flight``: most calls in flight at once.
    """

    tensor_kind = "numpy"

    def __init__(self, device: str, node: RayNode, start: ActorStarter, profiling: bool,
                 per_call: int = 0, in_flight: int = DEFAULT_CALLS_IN_FLIGHT) -> None:
        import ray

        actor, facts = start()
        self.device = device
        self.node = node
        self.node_optimal = int(facts["optimal"])
        self.node_devices = [str(d) for d in facts.get("execution_devices", [])]
        per_call = per_call or requests_per_call(self.node_optimal)
        self.num_workers = (in_flight + 1) * per_call
        self._ray = ray
        self._start = start  # holds the model's bytes in the object store while the program lives
        self._held: list[Any] = [actor]  # the live actor, or none after it died
        self._calls = Coalescer(self._send, self._collect, per_call, in_flight)
        self._profiling = profiling
        self._records: list[list[ProfilingRecord]] = [[] for _ in range(self.num_workers)]
        self._closed = False
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _kill, ray, self._held)

    def _actor(self) -> Any:
        """The live actor; a new one on the node where the last one died (see the module docstring)."""
        with self._lock:
            if self._closed:
                raise InferenceError(f"the program on {self.device} was closed")
            if not self._held:
                cluster.forget_nodes()
                if self.node.node_id not in {node.node_id for node in cluster.alive_nodes()}:
                    raise InferenceError(f"{self.device} is gone: the cluster no longer lists "
                                         f"{self.node.describe()} as alive")
                try:
                    actor, _ = self._start()
                except InferplexError as error:
                    raise InferenceError(f"{self.device} could not start a new actor on "
                                         f"{self.node.describe()}: {error}") from error
                self._held.append(actor)
            return self._held[0]

    def _died(self, actor: Any) -> None:
        """Forget ``actor`` (the next run starts another); kill it, should it only be unreachable."""
        with self._lock:
            if not (self._held and self._held[0] is actor):
                return  # another call saw it first
            self._held.clear()
        _kill(self._ray, [actor])

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        self.check_runnable(worker, self._closed)
        if not isinstance(inputs, Mapping):
            raise InputError(f"inputs must be a mapping of input name to tensor, got {type(inputs).__name__}")
        arrays = {str(name): _as_numpy(value) for name, value in inputs.items()}
        outputs, rows = self._calls.run(arrays)
        if self._profiling:
            self._records[worker] = [_record(row) for row in rows]
        return outputs

    def _send(self, batch: list[Mapping[str, Any]]) -> tuple[Any, Any]:
        """Submit one call carrying ``batch``: (the actor, the reply's reference)."""
        actor = self._actor()
        return actor, actor.infer_many.remote(batch)

    def _collect(self, sent: tuple[Any, Any], runs: int) -> list[Outcome]:
        """Wait for a call's reply: per run (outputs, rows) or its own error."""
        actor, reference = sent
        try:
            reply = wait_then_get(self._ray, reference)
        except self._ray.exceptions.RayActorError as error:
            self._died(actor)
            message = (f"the Ray actor serving {self.device} ({self.node.describe()}) died or cannot be "
                       f"reached: {type(error).__name__}: {_first_line(error)}")
            return [_failed(message, error) for _ in range(runs)]
        except self._ray.exceptions.RayError as error:
            message = (f"the call to {self.device} ({self.node.describe()}) failed in Ray: "
                       f"{type(error).__name__}: {_first_line(error)}")
            return [_failed(message, error) for _ in range(runs)]
        if not (isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok"
                and isinstance(reply[1], list) and len(reply[1]) == runs):
            if isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "error":
                return [error_from_reply(self.device, reply) for _ in range(runs)]
            return [InferenceError(f"{self.device} sent a reply of an unknown form for a call of {runs} "
                                   f"requests; is the node running the same inferplex version?")
                    for _ in range(runs)]
        return [self._checked(entry) for entry in reply[1]]

    def _checked(self, reply: Any) -> Outcome:
        """One run's outputs and profiling rows, after checking its form, or its error."""
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "ok"):
            return error_from_reply(self.device, reply)
        _, outputs, rows = reply
        if not (isinstance(outputs, dict) and all(isinstance(k, str) and isinstance(v, np.ndarray)
                                                  for k, v in outputs.items())):
            return InferenceError(f"{self.device} sent outputs that are not numpy arrays by name")
        return outputs, list(rows) if isinstance(rows, list) else []

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        return list(self._records[worker]) if 0 <= worker < self.num_workers else []

    def get_property(self, key: str) -> Any:
        """``NODE_ID``, ``FULL_DEVICE_NAME``, ``NODE_EXECUTION_DEVICES``,
        ``NODE_OPTIMAL_NUMBER_OF_INFER_REQUESTS``, ``REQUESTS_PER_CALL``, ``CALLS_IN_FLIGHT`` and
        ``NODE_CALLS`` (``{"device", "calls", "requests", "largest"}``: the actor calls made so far,
        the requests they carried, the most in one) here; other keys from the node's compiled model."""
        stats = self._calls.stats()
        local = {"NODE_ID": self.node.node_id, "FULL_DEVICE_NAME": self.node.describe(),
                 "NODE_EXECUTION_DEVICES": list(self.node_devices),
                 "NODE_OPTIMAL_NUMBER_OF_INFER_REQUESTS": self.node_optimal,
                 "REQUESTS_PER_CALL": self._calls.per_call, "CALLS_IN_FLIGHT": self._calls.in_flight,
                 "NODE_CALLS": {"device": self.device, "calls": stats.calls, "requests": stats.requests,
                                "largest": stats.largest}}
        if key in local:
            return local[key]
        try:
            reply = wait_then_get(self._ray, self._actor().get_property.remote(key))
        except self._ray.exceptions.RayError as error:
            raise InferenceError(f"{self.device} could not be asked for {key!r}: "
                                 f"{_first_line(error)}") from error
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok":
            return reply[1]
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        return _LOCAL_PROPERTIES

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer()


def _kill(ray: Any, held: list[Any]) -> None:
    """Kill a node's actor for good (its node frees what the compiled model held)."""
    for actor in held:
        try:
            if ray.is_initialized():
                ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001, S110 - already dead, or the cluster is gone: nothing to free
            pass
    held.clear()


def start_actor(device: str, node: RayNode, stored: Any, node_device: str,
                node_config: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Start the actor serving the model on ``node`` and wait until it has compiled there.

    ``stored.ref`` is the object-store reference of the model's ONNX bytes.
    Raises CompileError (or the node's own inferplex error, such as ModelError)
    naming the device, the node's device string and the node.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from inferplex.devices.ray.node_server import actor_class

    where = f"{device} ({node_device} on {node.describe()})"
    actor = actor_class().options(
        name=f"inferplex {device} {uuid.uuid4().hex[:12]}",
        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=MAX_CONCURRENCY,
    ).remote(stored.ref, node_device, dict(node_config), int(node.resources.get("GPU", 0)))
    try:
        reply = wait_then_get(ray, actor.ready.remote())
    except ray.exceptions.RayError as error:
        _kill(ray, [actor])
        raise CompileError(f"{where} could not start the actor that serves the model: "
                           f"{type(error).__name__}: {_first_line(error)}") from error
    if not (isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok" and isinstance(reply[1], dict)):
        _kill(ray, [actor])
        raise error_from_reply(where, reply, CompileError)
    return actor, reply[1]


def wait_then_get(ray: Any, reference: Any) -> Any:
    """The value of ``reference`` once it is here: ``ray.wait`` (fetching it to this node), then
    ``ray.get`` of what is already local (see the module docstring for why not ``ray.get`` alone)."""
    ray.wait([reference], num_returns=1, timeout=None, fetch_local=True)
    return ray.get(reference)


def _failed(message: str, cause: BaseException) -> InferenceError:
    """One run's error for a call that failed as a whole (each run gets its own exception object)."""
    error = InferenceError(message)
    error.__cause__ = cause
    return error


def _record(row: Any) -> ProfilingRecord:
    name, node_type, exec_type, real, cpu, status = row
    return ProfilingRecord(node_name=str(name), node_type=str(node_type), exec_type=str(exec_type),
                           real_time=datetime.timedelta(seconds=float(real)),
                           cpu_time=datetime.timedelta(seconds=float(cpu)), status=str(status))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
