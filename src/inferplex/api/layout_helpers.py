"""``ov.layout_helpers``: a port's layout, and where a layout keeps N, C, D, H and W.

A layout set on a model's input or output is stored in the ONNX graph (the
value's ``metadata_props`` under ``layout``), so it survives ``save_model``,
``clone`` and compilation, and ``get_layout`` reads it back.
"""

from __future__ import annotations

from typing import Any

from inferplex.api.layout import Layout

__all__ = ["batch_idx", "channels_idx", "depth_idx", "get_layout", "has_batch", "has_channels",
           "has_depth", "has_height", "has_width", "height_idx", "set_layout", "width_idx"]

LAYOUT_KEY = "layout"
"""Key of a value's ``metadata_props`` that holds its layout (``"[N,C,H,W]"``), saved with the model."""


def get_layout(port: Any) -> Layout:
    """The layout set on ``port`` (a model input or output), or the empty layout."""
    text = port.get_rt_info().get(LAYOUT_KEY)
    return Layout(text) if text else Layout()


def set_layout(port: Any, layout: Layout | str) -> None:
    """Record ``layout`` on ``port``; InputError when it does not fit the port's rank."""
    layout = Layout(layout)
    shape = port.get_partial_shape()
    if shape.rank.is_static:
        layout.names(shape.rank.get_length())  # raises when the ranks disagree
    if layout.empty:
        port.get_rt_info().pop(LAYOUT_KEY, None)
    else:
        port.get_rt_info()[LAYOUT_KEY] = layout.to_string()


def has_batch(layout: Layout) -> bool:
    return Layout(layout).has_name("N")


def has_channels(layout: Layout) -> bool:
    return Layout(layout).has_name("C")


def has_depth(layout: Layout) -> bool:
    return Layout(layout).has_name("D")


def has_height(layout: Layout) -> bool:
    return Layout(layout).has_name("H")


def has_width(layout: Layout) -> bool:
    return Layout(layout).has_name("W")


def batch_idx(layout: Layout) -> int:
    return Layout(layout).get_index_by_name("N")


def channels_idx(layout: Layout) -> int:
    return Layout(layout).get_index_by_name("C")


def depth_idx(layout: Layout) -> int:
    return Layout(layout).get_index_by_name("D")


def height_idx(layout: Layout) -> int:
    return Layout(layout).get_index_by_name("H")


def width_idx(layout: Layout) -> int:
    return Layout(layout).get_index_by_name("W")

