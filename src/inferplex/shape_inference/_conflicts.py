"""Shape conflicts ONNX's shape inference lets through, found after it has run.

ONNX's inference infers a Conv's output from its input and weight shapes without comparing the
input's channels with the weight's, and gives a window larger than its input an output of size 0;
it does not compare a Reshape's constant target with its input's element count either.  Such a
model fails only when run.  OpenVINO refuses these shapes when they are set (``Model.reshape``), so
:func:`find_conflicts` reads the shapes inference wrote into the graph and describes each conflict,
for the reshape to refuse.  Only static dims are compared: a dynamic one may take any size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

__all__ = ["find_conflicts"]

Dims = list[int | str | None]


def find_conflicts(graph: ir.Graph) -> list[str]:
    """One line per node of the main graph whose input shapes (as inferred) do not fit together."""
    problems = []
    for node in graph:
        check = _CHECKS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        problem = check(node) if check is not None else None
        if problem:
            problems.append(problem)
    return problems


def _dims(node: ir.Node, position: int) -> Dims | None:
    if position >= len(node.inputs) or node.inputs[position] is None:
        return None
    value = node.inputs[position]
    shape = value.shape if value is not None else None
    if shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in shape]


def _show(dims: Sequence[int | str | None]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _named(node: ir.Node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def _ints(node: ir.Node, name: str, default: Sequence[int]) -> list[int]:
    attribute = node.attributes.get(name)
    return list(attribute.as_ints()) if attribute is not None else list(default)


def _conv_channels(data: int, weight: int, position: int) -> Callable[[ir.Node], str | None]:
    """A convolution whose input channels must equal ``groups`` times the weight's dim 1
    (``Conv``, ``ConvInteger``, ``QLinearConv``: inputs ``data`` and ``weight``) or the weight's
    dim 0 (``ConvTranspose``: ``position`` 0)."""

    def check(node: ir.Node) -> str | None:
        x, w = _dims(node, data), _dims(node, weight)
        if x is None or w is None or len(x) < 2 or len(w) < 2:
            return None
        group = node.attributes.get_int("group", 1)
        channels, per_group = x[1], w[position]
        if not isinstance(channels, int) or not isinstance(per_group, int):
            return None
        wanted = per_group * group if position == 1 else per_group
        if channels != wanted:
            return (f"{_named(node)} takes {wanted} input channels (its weight is {_show(w)}"
                    f"{f', group {group}' if group != 1 else ''}), not the {channels} of {_show(x)}")
        return _window(node, x, w[2:]) if node.op_type != "ConvTranspose" else None

    return check


def _pool(node: ir.Node) -> str | None:
    x = _dims(node, 0)
    kernel = _ints(node, "kernel_shape", [])
    return _window(node, x, kernel) if x is not None and kernel else None


def _window(node: ir.Node, x: Dims, kernel: Sequence[int | str | None]) -> str | None:
    """A sliding window (after dilation) larger than its padded input (auto_pad SAME never is)."""
    auto_pad = node.attributes.get_string("auto_pad", "NOTSET")
    if auto_pad.startswith("SAME") or len(x) != len(kernel) + 2:
        return None
    spatial = len(kernel)
    pads = [0] * (2 * spatial) if auto_pad == "VALID" else _ints(node, "pads", [0] * (2 * spatial))
    dilations = _ints(node, "dilations", [1] * spatial)
    for axis, (size, window) in enumerate(zip(x[2:], kernel, strict=True)):
        if not isinstance(size, int) or not isinstance(window, int) or axis >= len(dilations) \
                or axis + spatial >= len(pads):
            continue
        span = (window - 1) * dilations[axis] + 1
        padded = size + pads[axis] + pads[axis + spatial]
        if span > padded:
            return (f"{_named(node)} has a window of {span} on spatial axis {axis}, larger than its "
                    f"input {_show(x)} there ({padded} after padding)")
    return None


def _instance_norm(node: ir.Node) -> str | None:
    x, scale = _dims(node, 0), _dims(node, 1)
    if x is None or scale is None or len(x) < 2 or len(scale) != 1:
        return None
    if isinstance(x[1], int) and isinstance(scale[0], int) and x[1] != scale[0]:
        return f"{_named(node)} has a scale of {scale[0]} channels, but its input {_show(x)} has {x[1]}"
    return None


def _layer_norm(node: ir.Node) -> str | None:
    x, scale = _dims(node, 0), _dims(node, 1)
    if x is None or scale is None:
        return None
    axis = node.attributes.get_int("axis", -1)
    normalized = x[axis % len(x):] if x else []
    if len(scale) > len(normalized):
        return f"{_named(node)} has a scale {_show(scale)} of higher rank than its normalized dims"
    for have, want in zip(reversed(scale), reversed(normalized), strict=False):
        if isinstance(have, int) and isinstance(want, int) and have not in (1, want):
            return (f"{_named(node)} has a scale {_show(scale)} that does not fit the normalized dims "
                    f"{_show(normalized)} of its input {_show(x)}")
    return None


def _reshape(node: ir.Node) -> str | None:
    """A Reshape whose constant target cannot hold its (static) input's elements."""
    if len(node.inputs) < 2 or node.inputs[1] is None or node.inputs[0] is None:
        return None
    target = node.inputs[1].const_value
    dims = _dims(node, 0)
    if target is None or dims is None or not all(isinstance(d, int) for d in dims):
        return None
    static = [int(d) for d in dims if isinstance(d, int)]
    wanted = [int(v) for v in target.numpy().reshape(-1)]
    allowzero = node.attributes.get_int("allowzero", 0)
    sizes = [static[i] if v == 0 and not allowzero and i < len(static) else v
             for i, v in enumerate(wanted)]
    have, known = int(np.prod(static)), int(np.prod([v for v in sizes if v != -1]))
    if (-1 not in sizes and known != have) or (-1 in sizes and (known == 0 or have % known)):
        return (f"{_named(node)} turns {_show(dims)} ({have} elements) into the constant shape "
                f"{wanted}")
    return None


_CHECKS: dict[str, Callable[[ir.Node], str | None]] = {
    "Conv": _conv_channels(0, 1, 1),
    "ConvInteger": _conv_channels(0, 1, 1),
    "QLinearConv": _conv_channels(0, 3, 1),
    "ConvTranspose": _conv_channels(0, 1, 0),
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
    "InstanceNormalization": _instance_norm,
    "LayerNormalization": _layer_norm,
    "Reshape": _reshape,
}
"""The check of each op type (ONNX domain) whose shape conflicts ONNX's inference lets through."""
