"""The nodes of a Ray cluster as devices: ``RAY.0`` ... ``RAY.N-1`` (optional extra ``inferplex[ray]``).

- :mod:`~inferplex.devices.ray.cluster`: finding the cluster (``RAY_ADDRESS`` or a
  ``ray.init()`` the program made) and its alive nodes, in node-id order.
- :mod:`~inferplex.devices.ray.plugin`: the ``RAY`` device family.
- :mod:`~inferplex.devices.ray.node_server`: the actor that serves a model on a node.
- :mod:`~inferplex.devices.ray.program`: the caller's side of one node's compiled model.
- :mod:`~inferplex.devices.ray._coalesce`: the runs sent to a node gathered into actor calls.

Nothing here imports ray until a cluster is reachable and a ``RAY`` device is
listed or compiled: ``import inferplex`` works without ray installed.
"""

from inferplex.devices.ray.plugin import RayPlugin

__all__ = ["RayPlugin"]
