"""MULTI and AUTO: one model on several devices, requests spread over them.

Entry points for the Core:

- :func:`compile_multi` for ``MULTI:<list>`` (and ``MULTI`` with
  ``MULTI_DEVICE_PRIORITIES``);
- :func:`compile_auto` for ``AUTO``, ``AUTO:<list>``, ``AUTO:-<device>``.

Both compile the members (:mod:`.members`) and return a
:class:`~inferplex.engine.dispatcher.Dispatcher` (the scheduling itself lives in
:mod:`inferplex.engine.dispatcher` and :mod:`inferplex.scheduling`), whose ``get_property``
also answers ``DEVICE_STATISTICS`` (per-device ``requests``, ``share``,
``throughput``, ``latency_ms``, ``failures``, ``timeouts``, ``quarantines``,
``returns``, ``workers``, ``state``, and on host devices ``host_gain``), ``MULTI_DEVICE_PRIORITIES``,
``SCHEDULE_POLICY`` and ``PERFORMANCE_HINT`` (unset: CUMULATIVE_THROUGHPUT for
MULTI, LATENCY for AUTO), all listed by ``property_names``; ``set_property``
changes ``MULTI_DEVICE_PRIORITIES`` (request counts stay as compiled) and
``SCHEDULE_POLICY`` without recompiling.

Config keys read here besides the standard ones: ``MULTI_REQUEST_TIMEOUT``
(seconds one attempt may run before it counts as failed; default none) and
``MULTI_QUARANTINE_TIME`` (first cool-down of a failing device; default 5 s),
``WORKER_PROCESSES`` (AUTO | YES | NO: which members serve from a worker
process of their own, see :mod:`inferplex.devices.remote`) and
``MULTI_CHECK_HOST_GAIN`` (YES | NO: hold the host device back while it costs the
accelerators more than it adds, see :mod:`inferplex.scheduling.host_gain`).
Keys of the members' programs read through the compiled model (a device key
passed down, ``NUM_STREAMS`` say) come from the first member, in priority
order, that has them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from inferplex.config.devices import DeviceTarget, parse_device_list
from inferplex.engine.dispatch_state import Member
from inferplex.engine.dispatcher import Dispatcher
from inferplex.errors import DeviceNameError
from inferplex.multi.auto import auto_candidates, compile_auto, device_rank
from inferplex.multi.members import compile_members
from inferplex.scheduling.options import DEFAULT_POLICY, QUARANTINE_KEY, TIMEOUT_KEY, SchedulerOptions

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.registry import DeviceRegistry

__all__ = [
    "DEFAULT_POLICY",
    "QUARANTINE_KEY",
    "TIMEOUT_KEY",
    "Dispatcher",
    "Member",
    "SchedulerOptions",
    "auto_candidates",
    "compile_auto",
    "compile_multi",
    "device_rank",
]



def compile_multi(registry: DeviceRegistry, model: ir.Model, targets: Sequence[DeviceTarget],
                  config: Mapping[str, Any]) -> Dispatcher:
    """Compile ``model`` on every target at once and spread requests over them.

    ``targets``: devices in priority order (empty: ``config["MULTI_DEVICE_PRIORITIES"]``);
    ``num_requests`` of a target sizes its worker pool (``None``: the device's
    optimal number).  Devices that fail to compile are dropped with a warning;
    when all fail, one CompileError lists every reason.
    """
    if not targets:
        priorities = config.get("MULTI_DEVICE_PRIORITIES") or ()
        if not priorities:
            raise DeviceNameError("MULTI needs devices: write 'MULTI:GPU,CPU' or set "
                                  "MULTI_DEVICE_PRIORITIES, e.g. {'MULTI_DEVICE_PRIORITIES': 'GPU,CPU'}")
        if isinstance(priorities, str):
            targets = parse_device_list(priorities, allow_counts=True)
        else:
            targets = [DeviceTarget(str(name)) for name in priorities]
    hint = config.get("PERFORMANCE_HINT")
    member_hint = "THROUGHPUT" if hint in (None, "CUMULATIVE_THROUGHPUT") else None
    members = compile_members(registry, model, targets, config, member_hint)
    return Dispatcher(members, SchedulerOptions.from_config(config), resolve=registry.full_name)
