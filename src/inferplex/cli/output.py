"""Console helpers shared by the commands: consoles, ports, compiled-model properties."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from inferplex._compiled_model import CompiledModel
from inferplex._ports import Port
from inferplex.api.types import Type
from inferplex.config.values import as_text
from inferplex.errors import InferplexError

__all__ = ["consoles", "describe_ports", "format_bytes", "print_compiled", "print_hetero_plan",
           "read_optional"]

_PIPE_WIDTH = 120


def consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles; created per command so that redirected streams are honoured."""
    out = Console(file=sys.stdout, highlight=False, markup=False)
    if not out.is_terminal:
        out.width = max(out.width, _PIPE_WIDTH)  # wide tables stay readable in logs and files
    err = Console(file=sys.stderr, highlight=False, markup=False, stderr=True)
    return out, err


def format_bytes(count: Any) -> str:
    """``17179869184`` -> ``"16.0 GiB"``; anything that is not a number is shown as it is."""
    if not isinstance(count, (int, float)) or isinstance(count, bool):
        return str(count)
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(count)  # pragma: no cover - the loop always returns


def describe_ports(ports: Sequence[Port]) -> dict[str, dict[str, Any]]:
    """``{name: {"shape": [1, 3, 224, 224], "element_type": "f32"}}`` ("?" for dynamic dims)."""
    return {p.any_name: {"shape": [d if isinstance(d, int) else "?" for d in p.dims or []],
                         "element_type": p.element_type.get_type_name()} for p in ports}


def read_optional(compiled: CompiledModel, key: str) -> Any:
    """A compiled model's property, or None when it does not have it."""
    try:
        return compiled.get_property(key)
    except (InferplexError, KeyError):
        return None


def print_compiled(out: Console, compiled: CompiledModel, keys: Sequence[str]) -> dict[str, Any]:
    """Print the compiled model's properties among ``keys`` that it has; return them."""
    found = {key: value for key in keys if (value := read_optional(compiled, key)) is not None}
    shown = {k: v.get_type_name() if isinstance(v, Type) else as_text(v) for k, v in found.items()}
    out.print("Compiled model: " + ", ".join(f"{k}={v}" for k, v in shown.items()), soft_wrap=True)
    return found


def print_hetero_plan(out: Console, compiled: CompiledModel) -> str | None:
    """Print HETERO's subgraph plan (HETERO_SUBGRAPHS) when the compiled model has one."""
    plan = read_optional(compiled, "HETERO_SUBGRAPHS")
    if plan is None:
        out.print("HETERO subgraph plan: not reported by this compiled model")
        return None
    describe = getattr(plan, "describe", None)
    text = str(describe() if callable(describe) else plan)
    out.print("HETERO subgraph plan:")
    out.print(text)
    return text
