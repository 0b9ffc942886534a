"""GraphViz files of a HETERO placement, like OpenVINO's ``OPENVINO_HETERO_VISUALIZE``.

``hetero_affinity_<model>.dot`` colours every op by its device;
``hetero_subgraphs_<model>.dot`` draws one cluster per subgraph (with its
pipeline stage memory) and labels the transfers between them with their bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import onnx_ir as ir

from inferplex.placement.graph import name_of
from inferplex.placement.plan import HeteroPlan, format_bytes

__all__ = ["VISUALIZE_ENV", "render_svg", "visualize_requested", "write_affinity_dot",
           "write_subgraphs_dot"]

VISUALIZE_ENV = ("INFERPLEX_HETERO_VISUALIZE", "OPENVINO_HETERO_VISUALIZE")
_COLOURS = ("lightblue", "lightsalmon", "palegreen", "khaki", "plum", "lightpink", "wheat",
            "lightcyan")


def visualize_requested() -> bool:
    """True when an environment variable of VISUALIZE_ENV is set to a true value."""
    return any(os.environ.get(k, "").strip().upper() in ("1", "YES", "TRUE", "ON")
               for k in VISUALIZE_ENV)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _colours(devices: list[str]) -> dict[str, str]:
    return {d: _COLOURS[i % len(_COLOURS)] for i, d in enumerate(dict.fromkeys(devices))}


def _edges(model: ir.Model) -> list[tuple[str, str, str]]:
    """(producer node, consumer node, value name) for every edge of the main graph."""
    edges: list[tuple[str, str, str]] = []
    for node in model.graph:
        for value in node.inputs:
            if value is None:  # an omitted optional input
                continue
            producer = value.producer()
            if producer is not None and producer.graph is model.graph:
                edges.append((name_of(producer), name_of(node), name_of(value)))
    return edges


def write_affinity_dot(model: ir.Model, affinity: Mapping[str, str], path: str | os.PathLike) -> Path:
    """Write ``path``: every op of ``model`` labelled with its type and filled by device."""
    colours = _colours(list(affinity.values()))
    lines = [f"digraph {_quote('hetero_affinity_' + (model.graph.name or 'model'))} {{",
             "  node [shape=box, style=filled];"]
    for device, colour in colours.items():
        lines.append(f"  {_quote('legend ' + device)} [label={_quote(device)}, fillcolor={colour}, "
                     "shape=note];")
    for node in model.graph:
        device = affinity.get(name_of(node), "")
        label = _quote("\n".join((name_of(node), node.op_type, device)))
        lines.append(f"  {_quote(name_of(node))} [label={label}, "
                     f"fillcolor={colours.get(device, 'white')}];")
    lines.extend(f"  {_quote(a)} -> {_quote(b)};" for a, b, _ in _edges(model))
    lines.append("}")
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def write_subgraphs_dot(model: ir.Model, plan: HeteroPlan, path: str | os.PathLike) -> Path:
    """Write ``path``: one cluster per subgraph, transfers labelled with their bytes."""
    colours = _colours([s.device for s in plan.subgraphs])
    owner = {n: s.index for s in plan.subgraphs for n in s.nodes}
    lines = [f"digraph {_quote('hetero_subgraphs_' + (model.graph.name or 'model'))} {{",
             "  compound=true; node [shape=box, style=filled];"]
    for sub, stage in zip(plan.subgraphs, plan.stages or [None] * len(plan.subgraphs), strict=True):
        label = f"subgraph{sub.index}: {sub.device} ({len(sub.nodes)} ops)"
        if stage is not None:
            label += (f"\nweights {format_bytes(stage.weight_bytes)}, "
                      f"activations {format_bytes(stage.activation_bytes)}")
        lines.append(f"  subgraph cluster_{sub.index} {{ label={_quote(label)}; "
                     f"color={colours[sub.device]};")
        lines.extend(f"    {_quote(n)} [fillcolor={colours[sub.device]}];" for n in sub.nodes)
        lines.append("  }")
    sizes = {(t.value, t.target): t.nbytes for t in plan.transfers}
    for a, b, value in _edges(model):
        if a not in owner or b not in owner:
            continue
        if owner[a] == owner[b]:
            lines.append(f"  {_quote(a)} -> {_quote(b)};")
        else:
            size = format_bytes(sizes.get((value, owner[b]), 0))
            lines.append(f"  {_quote(a)} -> {_quote(b)} [color=red, penwidth=2, "
                         f"label={_quote(f'{value} ({size})')}];")
    lines.append("}")
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def render_svg(dot_path: str | os.PathLike, svg_path: str | os.PathLike) -> bool:
    """Render with GraphViz's ``dot`` when it is installed; False when it is not."""
    dot = shutil.which("dot")
    if dot is None:
        return False
    subprocess.run([dot, "-Tsvg", str(dot_path), "-o", str(svg_path)], check=True,
                   capture_output=True, timeout=120)
    return True
