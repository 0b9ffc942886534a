"""Turn one input's or output's records into planned ops and splice them into the graph.

Planning walks the steps with the element type and layout (which do not depend
on shapes), adds OpenVINO's implicit steps (convert the element type and the
layout to the model's), and derives the user's tensor shape backward from the
model's when it was not set.  Emitting then adds the ops as ONNX nodes between
a new graph input and the model's old input's consumers (or after an output).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from inferplex.api import layout_helpers
from inferplex.api.layout import Layout
from inferplex.api.shapes import Dimension, PartialShape
from inferplex.api.types import Type
from inferplex.errors import InputError, ModelError
from inferplex.preprocess._enums import ColorFormat, ResizeAlgorithm
from inferplex.preprocess._info import InputInfo, OutputInfo, Step
from inferplex.preprocess._ops import Emitter, PlannedOp, custom_result, ir_shape
from inferplex.preprocess._pad import check_pad

_COLORS_BUILT = (ColorFormat.RGB, ColorFormat.BGR, ColorFormat.RGBX, ColorFormat.BGRX)

_RESIZE_MODES = {
    ResizeAlgorithm.RESIZE_LINEAR: "linear",
    ResizeAlgorithm.RESIZE_NEAREST: "nearest",
    ResizeAlgorithm.RESIZE_CUBIC: "cubic",
    ResizeAlgorithm.RESIZE_BILINEAR_PILLOW: "bilinear_pillow",
    ResizeAlgorithm.RESIZE_BICUBIC_PILLOW: "bicubic_pillow",
}
"""The resize mode each algorithm is planned as (ONNX Resize's mode, or one of Pillow's)."""


class _Tracker:
    """Element type, layout, rank and colour while planning one tensor's steps."""

    def __init__(self, element: Type, layout: Layout, rank: int | None,
                 color: ColorFormat | None) -> None:
        self.element, self.layout, self.rank, self.color = element, layout, rank, color
        self.ops: list[PlannedOp] = []

    def axis(self, name: str, step: str) -> int:
        if not self.layout.has_name(name):
            raise ModelError(f"{step} needs a layout with {name}; the tensor's layout there is "
                             f"{self.layout}: set it with tensor().set_layout(...)")
        return self.layout.get_index_by_name(name)

    def cast(self, element: Type) -> None:
        if element != self.element:
            self.ops.append(PlannedOp("cast", (element,)))
            self.element = element

    def transpose_to(self, target: Layout, implicit: bool = False) -> None:
        if target.empty or target == self.layout or (implicit and self.layout.empty):
            return
        if self.rank is None:
            raise ModelError(f"converting layout {self.layout} to {target} needs a tensor of "
                             "known rank; set the tensor's shape")
        source = self.layout.names(self.rank)
        wanted = target.names(self.rank)
        missing = [n for n in wanted if n is None or n not in source]
        if self.layout.empty or missing:
            raise ModelError(f"cannot convert layout {self.layout} to {target}: every dimension "
                             "of the target must be named in the source layout")
        self.permute([source.index(n) for n in wanted])

    def permute(self, order: tuple[int, ...] | list[int]) -> None:
        if self.rank is not None and len(order) != self.rank:
            raise ModelError(f"layout order {list(order)} has {len(order)} dims; the tensor "
                             f"has {self.rank}")
        self.ops.append(PlannedOp("transpose", (tuple(order),)))
        if not self.layout.empty and self.rank is not None:
            names = self.layout.names(self.rank)
            self.layout = Layout("[" + ",".join(names[i] or "?" for i in order) + "]")
        else:
            self.layout = Layout()

    def convert_layout(self, target: Any, default: Layout) -> None:
        if isinstance(target, tuple):
            self.permute(target)
        else:
            self.transpose_to(default if target is None else target)


def plan_input(info: InputInfo, port: Any) -> tuple[_Tracker, PartialShape, Type, Layout]:
    """The planned ops, the user's tensor shape, type and layout for one model input."""
    facts = info.tensor().facts
    model_type, model_shape = port.get_element_type(), port.get_partial_shape()
    stored = layout_helpers.get_layout(port)
    model_layout = info.model().layout or (stored if not stored.empty else None)
    tensor_layout = facts.layout or (Layout("NHWC") if facts.color else None) \
        or model_layout or Layout()
    user_type = facts.element_type or model_type
    rank = len(facts.shape) if facts.shape is not None and facts.shape.rank.is_static else \
        (len(model_shape) if model_shape.rank.is_static else None)
    if model_layout is None:  # as OpenVINO: the tensor's layout, through the convert_layout steps
        model_layout = _layout_after_steps(tensor_layout, info.preprocess().steps, rank)
    track = _Tracker(user_type, tensor_layout, rank, facts.color)
    for step in info.preprocess().steps:
        _plan_pre_step(track, step, model_type, model_layout, model_shape)
    track.cast(model_type)
    track.transpose_to(model_layout, implicit=True)
    track.ops = _resize_on_last_axes(track.ops, rank)
    shape = facts.shape
    if shape is None:
        shape = PartialShape(model_shape)
        for op in reversed(track.ops):
            shape = op.backward(shape)
        shape = _with_spatial(shape, tensor_layout, facts.spatial)
    return track, shape, user_type, tensor_layout


def _layout_after_steps(layout: Layout, steps: list[Step], rank: int | None) -> Layout:
    """The layout ``convert_layout`` steps turn ``layout`` into: a model input whose layout is not
    set takes it, so ``convert_layout(Layout("NCHW"))`` after an NHWC tensor says the model is NCHW."""
    for step in steps:
        if step.name != "convert_layout" or step.args[0] is None:
            continue
        target = step.args[0]
        if isinstance(target, Layout):
            layout = target
        elif not layout.empty and rank is not None and len(target) == rank:
            names = layout.names(rank)
            layout = Layout("[" + ",".join(names[i] or "?" for i in target) + "]")
        else:
            layout = Layout()
    return layout


def _resize_on_last_axes(ops: list[PlannedOp], rank: int | None) -> list[PlannedOp]:
    """Resize H and W as the last two axes (ONNX Runtime's cubic and the GPU need it there).

    A resize elsewhere is wrapped in two transposes; then neighbouring transposes
    are merged, so that NHWC -> resize -> NCHW costs one transpose, not three.
    """
    if rank is None:
        return ops
    expanded: list[PlannedOp] = []
    for op in ops:
        h_axis, w_axis = (op.args[1] % rank, op.args[2] % rank) if op.kind == "resize" else (0, 0)
        if op.kind != "resize" or (h_axis, w_axis) == (rank - 2, rank - 1):
            expanded.append(op)
            continue
        order = [i for i in range(rank) if i not in (h_axis, w_axis)] + [h_axis, w_axis]
        back = [order.index(i) for i in range(rank)]
        expanded += [PlannedOp("transpose", (tuple(order),)),
                     PlannedOp("resize", (op.args[0], rank - 2, rank - 1, *op.args[3:])),
                     PlannedOp("transpose", (tuple(back),))]
    merged: list[PlannedOp] = []
    for op in expanded:
        if op.kind == "transpose" and merged and merged[-1].kind == "transpose":
            first = merged.pop().args[0]
            combined = tuple(first[i] for i in op.args[0])
            if combined != tuple(range(len(combined))):
                merged.append(PlannedOp("transpose", (combined,)))
        else:
            merged.append(op)
    return merged


def _with_spatial(shape: PartialShape, layout: Layout, spatial: Any) -> PartialShape:
    if spatial is None:
        return shape
    if not (layout.has_name("H") and layout.has_name("W")) or shape.rank.is_dynamic:
        raise ModelError(f"set_spatial_*_shape needs a tensor layout with H and W, got {layout}")
    dims = list(shape)
    for name, length in zip("HW", spatial, strict=True):
        dims[layout.get_index_by_name(name)] = Dimension() if length is None else Dimension(length)
    return PartialShape(dims)


def _plan_pre_step(track: _Tracker, step: Step, model_type: Type, model_layout: Layout,
                   model_shape: PartialShape) -> None:
    if step.name == "convert_element_type":
        track.cast(step.args[0] or model_type)
    elif step.name == "convert_layout":
        track.convert_layout(step.args[0], model_layout)
    elif step.name in ("mean", "scale"):
        values = step.args[0]
        axis = track.axis("C", f"per-channel {step.name}") if len(values) > 1 else None
        track.ops.append(PlannedOp("sub" if step.name == "mean" else "div", (values, axis)))
    elif step.name == "reverse_channels":
        track.ops.append(PlannedOp("reverse", (track.axis("C", "reverse_channels"),)))
    elif step.name == "convert_color":
        _plan_color(track, step.args[0])
    elif step.name == "crop":
        track.ops.append(PlannedOp("crop", step.args))
    elif step.name == "custom":
        track.ops.append(PlannedOp("custom", step.args))
    elif step.name == "pad":
        check_pad(step.args[0], track.element, track.rank)
        track.ops.append(PlannedOp("pad", step.args))
    elif step.name == "resize":
        algorithm, height, width = step.args
        if height is None:
            height, width = _model_spatial(model_layout, model_shape)
        h_axis, w_axis = track.axis("H", "resize"), track.axis("W", "resize")
        mode = _RESIZE_MODES[algorithm]
        track.ops.append(PlannedOp("resize", (mode, h_axis, w_axis, height, width)))


def _model_spatial(layout: Layout, shape: PartialShape) -> tuple[int, int]:
    if not (layout.has_name("H") and layout.has_name("W")):
        raise ModelError(f"resize needs to know the model's height and width: the model's layout "
                         f"{layout} has no H and W; set it with model().set_layout('NCHW'), or "
                         "give resize(algorithm, height, width)")
    dims = [shape[layout.get_index_by_name(n)] for n in "HW"]
    if any(d.is_dynamic for d in dims):
        raise ModelError(f"the model's height and width are dynamic ({shape}); give "
                         "resize(algorithm, height, width)")
    return dims[0].get_length(), dims[1].get_length()


def _plan_color(track: _Tracker, target: ColorFormat) -> None:
    source = track.color
    if source is None:
        raise ModelError("convert_color needs the tensor's colour format: call "
                         "tensor().set_color_format(ColorFormat.BGR) (or another) first")
    if source not in _COLORS_BUILT or target not in (ColorFormat.RGB, ColorFormat.BGR):
        raise ModelError(f"convert_color from {source.name} to {target.name} is not built; "
                         "built: RGB, BGR, RGBX and BGRX to RGB or BGR")
    axis = track.axis("C", "convert_color")
    if source in (ColorFormat.RGBX, ColorFormat.BGRX):
        track.ops.append(PlannedOp("first3", (axis,)))
    if source.name[:3] != target.name:
        track.ops.append(PlannedOp("reverse", (axis,)))
    track.color = target


def plan_output(info: OutputInfo, port: Any) -> _Tracker:
    """The planned ops after one model output, implicit conversions included."""
    facts = info.tensor().facts
    stored = layout_helpers.get_layout(port)
    model_layout = info.model().layout or stored
    layouts = [step.args[0] for step in info.postprocess().steps if step.name == "convert_layout"]
    if model_layout.empty and layouts and isinstance(layouts[0], Layout):
        # As OpenVINO: an output of unknown layout has the layout the first conversion names.
        model_layout = layouts[0]
    shape = port.get_partial_shape()
    rank = len(shape) if shape.rank.is_static else None
    track = _Tracker(port.get_element_type(), model_layout, rank, None)
    tensor_layout = facts.layout or Layout()
    for step in info.postprocess().steps:
        if step.name == "convert_element_type":
            track.cast(step.args[0] or facts.element_type or track.element)
        elif step.name == "custom":
            track.ops.append(PlannedOp("custom", step.args))
        else:
            track.convert_layout(step.args[0], tensor_layout)
    if facts.element_type is not None:
        track.cast(facts.element_type)
    track.transpose_to(tensor_layout, implicit=True)
    return track


def emit(out: Emitter, ops: list[PlannedOp], value: ir.Value, element: Type,
         shape: PartialShape) -> tuple[ir.Value, Type, PartialShape]:
    """Emit ``ops`` after ``value``; returns the last value, its type and shape."""
    for op in ops:
        value = op.emit(out, value, element, shape)
        if op.kind == "custom":
            element, shape = custom_result(value)
            continue
        shape = op.forward(shape)
        element = op.args[0] if op.kind == "cast" else element
    return value, element, shape


def new_input(name: str, element: Type, shape: PartialShape) -> ir.Value:
    if element.is_dynamic():
        raise InputError(f"input {name!r}: the tensor's element type is dynamic; "
                         "set it with tensor().set_element_type(...)")
    return ir.Value(name=name, type=ir.TensorType(element.data_type), shape=ir_shape(shape))
