"""Facts about the host CPU: its name, usable cores, memory and instruction sets.

Read from the operating system (``/proc/cpuinfo`` and ``sched_getaffinity`` on
Linux); other systems get what :mod:`platform` and :mod:`os` tell.  The
instruction sets decide OpenVINO's default precision (bf16 where the CPU has
AMX or AVX512_BF16) and are shown by ``inferplex devices``.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache

from inferplex.devices.base import MemoryInfo

__all__ = ["cores", "cpu_name", "instruction_sets", "memory", "native_bf16", "vendor"]

_ISA_FLAGS = (
    # (shown name, /proc/cpuinfo flags of which any one means the CPU has it)
    ("AMX", ("amx_bf16", "amx_tile", "amx_int8")),
    ("AVX512_FP16", ("avx512_fp16",)),
    ("AVX512_BF16", ("avx512_bf16",)),
    ("AVX512_VNNI", ("avx512_vnni",)),
    ("AVX512", ("avx512f",)),
    ("AVX_VNNI", ("avx_vnni",)),
    ("AVX2", ("avx2",)),
    ("FMA", ("fma",)),
    ("SSE4_2", ("sse4_2",)),
    ("SVE", ("sve",)),
    ("NEON", ("asimd", "neon")),
    ("BF16", ("bf16",)),  # Arm's BFloat16 extension
    ("FP16", ("asimdhp", "fphp")),
)
"""Instruction sets worth naming, newest and widest first."""


def cores() -> int:
    """Cores this process may run on (its affinity mask on Linux), at least 1."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, str, frozenset[str]]:
    """(model name, vendor id, flags) from /proc/cpuinfo; empty where it cannot be read."""
    name, vendor_id, flags = "", "", frozenset[str]()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = value.strip()
                elif key == "vendor_id" and not vendor_id:
                    vendor_id = value.strip()
                elif key in ("flags", "Features") and not flags:  # x86 / Arm spelling
                    flags = frozenset(value.split())
                if name and vendor_id and flags:
                    break
    except OSError:
        pass
    return name, vendor_id, flags


def cpu_name() -> str:
    """The CPU's model name (``"Intel(R) Xeon(R) Platinum 8480+"``), or the best the system tells."""
    return _cpuinfo()[0] or platform.processor() or platform.machine() or "CPU"


def instruction_sets() -> tuple[str, ...]:
    """Named instruction sets the CPU has, newest and widest first, e.g. ``("AVX512", "AVX2", "FMA")``."""
    flags = _cpuinfo()[2]
    return tuple(name for name, names in _ISA_FLAGS if any(flag in flags for flag in names))


def vendor() -> str:
    """The x86 vendor id (``"GenuineIntel"``, ``"AuthenticAMD"``), or ``""`` where the system tells none."""
    return _cpuinfo()[1]


def native_bf16() -> bool:
    """Whether the CPU computes bf16 natively (AMX or AVX512_BF16): OpenVINO then defaults to bf16."""
    return bool({"AMX", "AVX512_BF16"} & set(instruction_sets()))


def memory() -> MemoryInfo:
    """Physical memory of the host: total and available now."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError):
        free = total
    return MemoryInfo(total, free)
