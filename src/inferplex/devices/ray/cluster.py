"""Finding the Ray cluster and its nodes, without importing ray until one is asked for.

A cluster counts as reachable when the program already called ``ray.init()``
(``ray.is_initialized()``), or when Ray's own ``RAY_ADDRESS`` environment
variable names one: inferplex then connects to it with ``ray.init(address=...)``
the first time the ``RAY`` devices are listed.  Before that, a ``host:port``
address is probed with a plain TCP connection (:data:`CONNECT_TIMEOUT`
seconds), since ``ray.init`` waits minutes on an address where nothing
answers; an address that does not answer is a :class:`~inferplex.errors.DeviceError`
naming it.  Without either, there are no ``RAY`` devices and ray is not imported.

Nodes are listed alive ones only, ordered by node id (hex), so ``RAY.0`` ...
``RAY.N-1`` name the same machines in every process that sees the same
cluster.  The list is read from the cluster's control store at most every
:data:`NODE_LIST_TTL` seconds.  A process that serves a model on a node lists no
``RAY`` devices (:func:`serving_on_a_node`): the node runs the model on its own.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from inferplex.errors import DeviceError

__all__ = ["CONNECT_TIMEOUT", "NODE_LIST_TTL", "UNREACHABLE_TTL", "RayNode", "alive_nodes", "cluster_address",
           "connected", "forget_nodes", "serving_on_a_node"]

CONNECT_TIMEOUT = 3.0
"""Seconds the TCP probe of ``RAY_ADDRESS`` waits before the cluster counts as unreachable."""

NODE_LIST_TTL = 1.0
"""Seconds a read of the node list is reused (device names are resolved often)."""

UNREACHABLE_TTL = 30.0
"""Seconds an address found unreachable stays so before it is probed again (each probe may wait
:data:`CONNECT_TIMEOUT`, and plain AUTO lists every device)."""

_lock = threading.Lock()
_cached: tuple[float, list[RayNode]] = (0.0, [])
_on_a_node = False
_unreachable: tuple[float, str, DeviceError | None] = (0.0, "", None)


@dataclass(frozen=True)
class RayNode:
    """One alive node of the cluster."""

    node_id: str
    """Ray's node id (hex): what the node's actor is pinned to."""
    address: str
    """The node's IP address, as the cluster knows it."""
    resources: dict[str, float] = field(default_factory=dict, compare=False)
    """The node's total logical resources (``CPU``, ``GPU``, ``memory`` in bytes, ...)."""

    def describe(self) -> str:
        """``"Ray node 5f1c2a9e at 10.0.0.7: 4 CPU, 1 GPU, 16.0 GiB"`` (FULL_DEVICE_NAME)."""
        held = [f"{self.resources.get('CPU', 0):g} CPU"]
        if self.resources.get("GPU"):
            held.append(f"{self.resources['GPU']:g} GPU")
        if self.resources.get("memory"):
            held.append(f"{self.resources['memory'] / 2**30:.1f} GiB")
        return f"Ray node {self.node_id[:8]} at {self.address}: {', '.join(held)}"


def cluster_address() -> str | None:
    """The address inferplex would connect to (``RAY_ADDRESS``), or None where it is unset."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    return address or None


def _ray_initialized() -> bool:
    ray = sys.modules.get("ray")  # only a program that imported ray can have called ray.init()
    return ray is not None and bool(ray.is_initialized())


def serving_on_a_node() -> None:
    """Mark this process as a node's server: it lists no RAY devices (a node's AUTO must not
    reach back into the cluster, which would start actors from actors without end)."""
    global _on_a_node
    _on_a_node = True


def connected() -> bool:
    """Connect to the cluster where one is reachable; False where none is configured.

    Raises DeviceError when ``RAY_ADDRESS`` is set and the cluster does not
    answer there, or when ray is not installed although ``RAY_ADDRESS`` asks
    for a cluster.
    """
    if _on_a_node:
        return False
    if _ray_initialized():
        return True
    address = cluster_address()
    if address is None:
        return False
    try:
        import ray
    except ImportError as error:
        raise DeviceError(f"RAY_ADDRESS is set to {address!r} but ray is not installed; "
                          f"install inferplex[ray] (pip install 'inferplex[ray]')") from error
    with _lock:
        if ray.is_initialized():
            return True
        _connect(ray, address)
    return True


def _connect(ray: Any, address: str) -> None:
    """``ray.init(address)``, or DeviceError; a failure is remembered for :data:`UNREACHABLE_TTL` s."""
    global _unreachable
    when, where, failure = _unreachable
    if failure is not None and where == address and time.monotonic() - when < UNREACHABLE_TTL:
        raise failure
    try:
        _probe(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING, configure_logging=False,
                     ignore_reinit_error=True)
        except Exception as error:  # noqa: BLE001 - any failure to connect means: unreachable
            raise DeviceError(f"the Ray cluster at {address!r} (RAY_ADDRESS) cannot be reached: "
                              f"{type(error).__name__}: {error}") from error
    except DeviceError as error:
        _unreachable = (time.monotonic(), address, error)
        raise


def _probe(address: str) -> None:
    """Raise DeviceError unless something accepts a TCP connection at ``host:port`` (other forms pass)."""
    target = address.removeprefix("ray://")
    host, colon, port = target.rpartition(":")
    if not colon or not port.isdigit() or not host:
        return  # "auto", "local": Ray finds the cluster itself and fails fast
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as error:
        raise DeviceError(f"the Ray cluster at {address!r} (RAY_ADDRESS) cannot be reached: nothing "
                          f"answers there within {CONNECT_TIMEOUT:g} s ({error}); start one with "
                          f"'ray start --head' or set RAY_ADDRESS to its 'host:port'") from error


def alive_nodes() -> list[RayNode]:
    """Alive nodes ordered by node id; empty where no cluster is configured (see the module docstring)."""
    global _cached
    if not connected():
        return []
    now = time.monotonic()
    with _lock:
        taken, nodes = _cached
        if nodes and now - taken < NODE_LIST_TTL:
            return list(nodes)
    import ray

    listed = [_node(entry) for entry in ray.nodes() if entry.get("Alive")]
    nodes = sorted(listed, key=lambda node: node.node_id)
    with _lock:
        _cached = (time.monotonic(), nodes)
    return list(nodes)


def _node(entry: dict[str, Any]) -> RayNode:
    resources = {str(k): float(v) for k, v in dict(entry.get("Resources") or {}).items()
                 if isinstance(v, (int, float))}
    return RayNode(str(entry["NodeID"]), str(entry.get("NodeManagerAddress", "")), resources)


def forget_nodes() -> None:
    """Drop the cached node list (the next read asks the cluster)."""
    global _cached
    with _lock:
        _cached = (0.0, [])
