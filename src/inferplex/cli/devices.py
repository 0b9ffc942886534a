"""``inferplex devices``: every device, its key properties, and a PASS/FAIL self-check.

The self-check compiles a two-node model (MatMul, Relu) built in memory on the
device, runs it once and compares the result with numpy.  The exit status is 1
when any checked device fails.  ``--virtual`` also checks HETERO, MULTI and AUTO
over every device.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from inferplex._core import Core
from inferplex.cli.inputs import tiny_model
from inferplex.cli.output import format_bytes

__all__ = ["add_arguments", "check_device", "run_devices"]

_TOLERANCE = 1e-3  # GPUs may compute float32 matmuls in TF32


@dataclass(frozen=True)
class DeviceCheck:
    """Outcome of the self-check on one device."""

    device: str
    passed: bool
    detail: str
    """Max abs error on success; the error on failure."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--virtual", action="store_true",
                        help="also check HETERO, MULTI and AUTO over every device")


def check_device(core: Core, device: str) -> DeviceCheck:
    """Compile the self-check model on ``device``, run it, compare with numpy."""
    model, feeds, expected = tiny_model()
    try:
        compiled = core.compile_model(model, device)
        try:
            got = np.asarray(compiled(feeds)[0])
        finally:
            compiled.release()
    except Exception as error:  # noqa: BLE001 - a failing device is a FAIL row, not a crash
        return DeviceCheck(device, False, f"{type(error).__name__}: {error}")
    if got.shape != expected.shape:
        return DeviceCheck(device, False, f"output shape {list(got.shape)}, expected "
                                          f"{list(expected.shape)}")
    max_error = float(np.max(np.abs(got.astype(np.float64) - expected)))
    if not np.allclose(got, expected, rtol=_TOLERANCE, atol=_TOLERANCE):
        return DeviceCheck(device, False, f"wrong result: max abs error {max_error:.3g}")
    return DeviceCheck(device, True, f"max abs error {max_error:.1e}")


def _property(core: Core, device: str, key: str) -> Any:
    try:
        return core.get_property(device, key)
    except Exception:  # noqa: BLE001 - a property a device lacks is shown as '-'
        return "-"


def _version(core: Core, device: str) -> str:
    try:
        version = core.get_versions(device).get(device)
        return "-" if version is None else f"{version.build_number} {version.description}"
    except Exception:  # noqa: BLE001 - shown as '-'
        return "-"


def _engine(core: Core, device: str) -> str:
    """The engine that runs the device, with its version where the device tells it apart
    (the CPU: ``OPENVINO (openvino 2026.4.1)``); else the device's version string."""
    version = _property(core, device, "ENGINE_VERSION")
    if version == "-":
        return _version(core, device)
    return f"{_property(core, device, 'ENGINE')} ({version})"


def _instruction_sets(core: Core, device: str) -> str:
    """The instruction sets a device names (the CPU: AMX, AVX512_BF16, AVX2, ...); '-' where none."""
    names = _property(core, device, "INSTRUCTION_SETS")
    return " ".join(names) if isinstance(names, (list, tuple)) and names else "-"


def _unavailable_families(core: Core) -> list[tuple[str, str]]:
    """Device families whose plugin cannot load here, with the reason."""
    missing = []
    for family in core.registry.families():
        try:
            core.registry.plugin(family).devices()
        except Exception as error:  # noqa: BLE001 - reported as a row
            missing.append((family, f"{type(error).__name__}: {error}"))
    return missing


def run_devices(args: argparse.Namespace, out: Console, err: Console) -> int:
    logger = logging.getLogger("inferplex")
    level = logger.level
    logger.setLevel(logging.ERROR)  # families that cannot load get a row of their own instead
    try:
        return _list_devices(args, out, err)
    finally:
        logger.setLevel(level)


def _list_devices(args: argparse.Namespace, out: Console, err: Console) -> int:
    core = Core()
    devices = core.available_devices
    table = Table(title="inferplex devices", title_justify="left")
    for column in ("device", "full name", "memory", "optimal requests", "engine", "precision", "ISA",
                   "self-check"):
        table.add_column(column, overflow="fold")
    checks = []
    for device in devices:
        check = check_device(core, device)
        checks.append(check)
        table.add_row(device, str(_property(core, device, "FULL_DEVICE_NAME")),
                      format_bytes(_property(core, device, "DEVICE_TOTAL_MEM_SIZE")),
                      str(_property(core, device, "OPTIMAL_NUMBER_OF_INFER_REQUESTS")),
                      _engine(core, device), str(_property(core, device, "INFERENCE_PRECISION_HINT")),
                      _instruction_sets(core, device), _verdict(check))
    for family, reason in _unavailable_families(core):
        table.add_row(family, "unavailable", "-", "-", "-", "-", "-", f"not loaded: {reason}")
    if args.virtual and devices:
        for device in _virtual_devices(devices):
            check = check_device(core, device)
            checks.append(check)
            table.add_row(device, "virtual", "-", "-", "-", "-", "-", _verdict(check))
    out.print(table)
    if not args.virtual:
        out.print("Virtual devices: HETERO:<devices> (split one model), MULTI:<devices> (spread "
                  "requests), AUTO (pick the best device), e.g. -d HETERO:" + ",".join(devices)
                  + "; check them with --virtual")
    failed = [c for c in checks if not c.passed]
    for check in failed:
        out.print(f"{check.device} FAIL: {check.detail}")
    if failed:
        err.print(f"inferplex: self-check failed on {', '.join(c.device for c in failed)}")
    return 1 if failed else 0


def _virtual_devices(devices: list[str]) -> list[str]:
    members = ",".join(devices)
    return [f"HETERO:{members}", f"MULTI:{members}", "AUTO"]


def _verdict(check: DeviceCheck) -> str:
    return "PASS" if check.passed else "FAIL (reason below)"
