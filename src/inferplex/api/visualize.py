"""A model as a Graphviz ``digraph``, as OpenVINO's ``VisualizeTree`` pass draws it.

Each op is a box labelled with its friendly name and type (Results in crimson), each
Parameter and Constant a dashed box that also shows its element type and shape (a
Constant a few of its values too), and an edge runs from each producer to each op that
reads it.  A node modifier (OpenVINO's ``nm``) may add Graphviz attributes to a box.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NodeModifier", "model_as_dot", "write_visualization"]

_log = logging.getLogger("inferplex")

NodeModifier = Callable[[Any, list[str]], Any]
"""``nm(node, attributes)``: may append Graphviz attributes (``'color="red"'``) to a node's list."""

_SHOWN_VALUES = 8
"""How many of a Constant's values its box shows."""


def model_as_dot(model: Any, modifier: NodeModifier | None = None) -> str:
    """``model`` (an ``inferplex.Model``) as Graphviz text."""
    ops = model.get_ordered_ops()
    ids = {_key(op): f"node{index}" for index, op in enumerate(ops)}
    lines = ["digraph", "{"]
    for op in ops:
        attributes = _attributes(op)
        if modifier is not None:
            modifier(op, attributes)
        lines.append(f"    {ids[_key(op)]} [{' '.join(attributes)}]")
        for value in op.input_values():
            source = ids.get(_key(value.get_node()))
            if source is not None:
                lines.append(f"    {source} -> {ids[_key(op)]}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_visualization(model: Any, file_name: str | os.PathLike[str], modifier: NodeModifier | None = None,
                        dot_only: bool = False) -> None:
    """Write ``model``'s graph: ``file_name`` itself with ``dot_only``; else ``<file_name>.dot``, and
    ``file_name`` in its own format (``.svg``, ``.png``) where Graphviz's ``dot`` is installed."""
    path = Path(file_name)
    dot_path = path if dot_only else path.with_name(path.name + ".dot")
    dot_path.parent.mkdir(parents=True, exist_ok=True)
    dot_path.write_text(model_as_dot(model, modifier), encoding="utf-8")
    if dot_only or not path.suffix or shutil.which("dot") is None:
        return
    done = subprocess.run(["dot", f"-T{path.suffix[1:]}", str(dot_path), "-o", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        _log.warning("inferplex: Graphviz could not draw %s: %s", path, done.stderr.strip())


def _key(op: Any) -> tuple[str, str]:
    """An op's identity in the drawing: views of one op are distinct objects with these equal."""
    return op.get_type_name(), op.get_friendly_name()


def _attributes(op: Any) -> list[str]:
    kind = op.get_type_name()
    name = _quoted(op.get_friendly_name())
    if kind in ("Parameter", "Constant"):
        port = op.output(0)
        label = f"{name}\\n{kind}\\n{{{port.get_element_type().get_type_name()}}}{port.get_partial_shape()}"
        if kind == "Constant":
            label += f"\\nvalue: {_preview(op)}"
        color = "blue" if kind == "Parameter" else "black"
        return ["shape=box", "style=dashed", f"color={color}", f'label="{label}"']
    color = "crimson penwidth=1.5" if kind == "Result" else "black"
    return ["shape=box", f"color={color}", f'label="{name}\\n{kind}"']


def _preview(constant: Any) -> str:
    values = np.asarray(constant.get_data()).reshape(-1)
    shown = ", ".join(str(v) for v in values[:_SHOWN_VALUES])
    return f"[ {shown}{', ...' if values.size > _SHOWN_VALUES else ''} ]"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
