"""Performance counters of both CPU engines as inferplex :class:`ProfilingRecord`s.

ONNX Runtime writes a JSON trace of every run when its profiler ends;
:func:`ort_last_run_records` keeps the node events of the last run.  OpenVINO
keeps per-op counters of the last run on each infer request;
:func:`openvino_records` turns them into records, one per op of the compiled
graph, with the kernel that ran it as ``exec_type`` (``"brgconv_avx512_amx_bf16"``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from inferplex.devices.base import ProfilingRecord

__all__ = ["openvino_records", "ort_last_run_records"]

ORT_PROVIDER = "CPUExecutionProvider"


def ort_last_run_records(events: list[dict[str, Any]]) -> list[ProfilingRecord]:
    """Node events of the last ``model_run`` in an ONNX Runtime profile."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    if not runs:
        return []
    last = runs[-1]
    start, end = last["ts"], last["ts"] + last["dur"]
    records = []
    for event in events:
        if event.get("cat") != "Node" or not start <= event.get("ts", -1) <= end:
            continue
        name = event.get("name", "")
        if not name.endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        elapsed = datetime.timedelta(microseconds=event.get("dur", 0))
        records.append(ProfilingRecord(
            node_name=name[: -len("_kernel_time")], node_type=args.get("op_name", ""),
            exec_type=args.get("provider", ORT_PROVIDER), real_time=elapsed, cpu_time=elapsed))
    return records


def openvino_records(counters: Iterable[Any]) -> list[ProfilingRecord]:
    """OpenVINO ``ProfilingInfo`` counters as records.

    OpenVINO's statuses are EXECUTED, NOT_RUN and OPTIMIZED_OUT; an op that was
    optimized out did not run, so it reads ``"NOT_RUN"`` as in OpenVINO's own
    two-valued C API.
    """
    records = []
    for counter in counters:
        status = "EXECUTED" if str(counter.status).rsplit(".", 1)[-1] == "EXECUTED" else "NOT_RUN"
        records.append(ProfilingRecord(
            node_name=counter.node_name, node_type=counter.node_type, exec_type=counter.exec_type,
            real_time=counter.real_time, cpu_time=counter.cpu_time, status=status))
    return records
