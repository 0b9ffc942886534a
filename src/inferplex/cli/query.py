"""``inferplex query``: which ops of a model a device takes (``core.query_model``).

For one device: op types with their counts and how many the device supports,
then every unsupported op.  For ``HETERO:<devices>``: the ops each device gets.
``--dot`` / ``--svg`` draw the placement with ``inferplex.placement.visualize``
(for HETERO also ``FILE.subgraphs.dot``/``.svg``: one cluster per subgraph);
``--policy PIPELINE_PARALLEL`` queries with that MODEL_DISTRIBUTION_POLICY.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from inferplex._core import Core
from inferplex._model import Model
from inferplex.cli.inputs import sample_model_path
from inferplex.config.devices import parse_device_string
from inferplex.errors import InferplexError, PropertyError

__all__ = ["add_arguments", "run_query"]

_NO_GRAPHVIZ = ("--svg needs Graphviz's 'dot' program on PATH (e.g. apt install graphviz); "
                "--dot FILE writes the graph without it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("-m", "--path_to_model", dest="model",
        help="ONNX model (default: the onnx wheel's light_resnet50 sample model)")
    add("-d", "--target_device", dest="device", default="CPU",
        help="a device (CPU, GPU.1) or HETERO:<devices> (default: CPU)")
    add("--policy", choices=("PIPELINE_PARALLEL",), type=str.upper,
        help="MODEL_DISTRIBUTION_POLICY for HETERO")
    add("--dot", metavar="FILE", help="write the op placement as a Graphviz .dot file")
    add("--svg", metavar="FILE", help="write the op placement as an SVG image")


def run_query(args: argparse.Namespace, out: Console, err: Console) -> int:
    spec = parse_device_string(args.device)
    if args.policy and spec.virtual != "HETERO":
        raise PropertyError(f"--policy {args.policy} applies to HETERO:<devices>, not {args.device!r}")
    if args.svg and shutil.which("dot") is None:
        raise InferplexError(_NO_GRAPHVIZ)
    core = Core()
    path = Path(args.model) if args.model else sample_model_path()
    if not args.model:
        out.print(f"No -m given: querying the onnx wheel's sample model {path.stem}")
    model = core.read_model(path)
    config = {"MODEL_DISTRIBUTION_POLICY": args.policy} if args.policy else None
    affinities = core.query_model(model, args.device, config)
    plan = None
    if spec.virtual is None:
        _print_single(out, model, affinities, args.device)
    else:
        _print_hetero(out, model, affinities, args.device)
        plan = _hetero_plan(core, model, args.device, config)
        if plan is not None:
            describe = getattr(plan, "describe", None)
            out.print(str(describe() if callable(describe) else plan))
    for target, kind in ((args.dot, "dot"), (args.svg, "svg")):
        if target:
            for path in _draw(model, affinities, plan, Path(target), kind):
                out.print(f"Placement written to {path}")
    return 0


def _print_single(out: Console, model: Model, affinities: Mapping[str, str], device: str) -> None:
    ops = model.get_ops()
    total: Counter[str] = Counter(op.get_type_name() for op in ops)
    taken: Counter[str] = Counter(op.get_type_name() for op in ops
                                  if op.get_friendly_name() in affinities)
    table = Table(title=f"{model.friendly_name} on {device}", title_justify="left")
    for column in ("op type", "ops", "supported"):
        table.add_column(column, justify="left" if column == "op type" else "right")
    for op_type in sorted(total, key=lambda t: (-total[t], t)):
        table.add_row(op_type, str(total[op_type]), str(taken[op_type]))
    table.add_row("total", str(len(ops)), str(sum(taken.values())))
    out.print(table)
    unsupported = [op for op in ops if op.get_friendly_name() not in affinities]
    if not unsupported:
        out.print(f"{device} supports all {len(ops)} ops")
        return
    listing = Table(title=f"{len(unsupported)} ops {device} does not support", title_justify="left")
    listing.add_column("op type")
    listing.add_column("name", overflow="fold")
    for op in unsupported:
        listing.add_row(op.get_type_name(), op.get_friendly_name())
    out.print(listing)


def _print_hetero(out: Console, model: Model, affinities: Mapping[str, str], device: str) -> None:
    types = {op.get_friendly_name(): op.get_type_name() for op in model.get_ops()}
    per_device: dict[str, Counter[str]] = {}
    for name, target in affinities.items():
        per_device.setdefault(target, Counter())[types.get(name, "?")] += 1
    table = Table(title=f"{model.friendly_name} on {device}", title_justify="left")
    table.add_column("device")
    table.add_column("ops", justify="right")
    table.add_column("op types", overflow="fold")
    for target, counts in per_device.items():
        listed = ", ".join(f"{t} x{n}" for t, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
        table.add_row(target, str(sum(counts.values())), listed)
    table.add_row("total", str(len(affinities)), "")
    out.print(table)


def _hetero_plan(core: Core, model: Model, device: str, config: Mapping[str, Any] | None) -> Any:
    """The HeteroPlan a compilation would use, or None when this inferplex cannot tell."""
    names = parse_device_string(device).names
    try:
        from inferplex.hetero import plan_hetero
    except ImportError:
        return None
    if not names:
        return None
    return plan_hetero(core.registry, model.ir, names, dict(config or {}))


def _draw(model: Model, affinities: Mapping[str, str], plan: Any, target: Path, kind: str) -> list[Path]:
    """Write the placement (and, for HETERO, its subgraphs) as .dot or, through Graphviz, .svg."""
    visualize = _visualize_module()
    drawings = [(target, lambda path: visualize.write_affinity_dot(model.ir, dict(affinities), path))]
    if plan is not None and hasattr(visualize, "write_subgraphs_dot"):
        extra = target.with_name(f"{target.stem}.subgraphs{target.suffix or '.' + kind}")
        drawings.append((extra, lambda path: visualize.write_subgraphs_dot(model.ir, plan, path)))
    written = []
    for path, write in drawings:
        if kind == "dot":
            write(path)
        else:
            with tempfile.TemporaryDirectory() as folder:
                source = Path(folder) / "graph.dot"
                write(source)
                if not visualize.render_svg(source, path):
                    raise InferplexError(_NO_GRAPHVIZ)
        written.append(path)
    return written


def _visualize_module() -> Any:
    try:
        from inferplex.placement import visualize
    except ImportError as error:
        raise InferplexError("this inferplex cannot draw placements: inferplex.placement.visualize "
                             f"is not available ({error})") from error
    for name in ("write_affinity_dot", "render_svg"):
        if not hasattr(visualize, name):
            raise InferplexError(f"this inferplex cannot draw placements: "
                                 f"inferplex.placement.visualize has no {name}")
    return visualize
