"""Turn one input's or output's records into planned ops and splice them into the graph.

Planning walks the steps with the element type and layout (which do not depend
on shapes), adds OpenVINO's implicit steps (convert the element type and the
layout to the model's), and derives the user's tensor shape backward from the
model's when it was not set.  Emitting then adds the ops as ONNX nodes between
a new graph input and the model's old input's consumers (or after an output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx_ir as ir

from inferplex.api import layout_helpers
from inferplex.api.layout import Layout
from inferplex.api.shapes import Dimension, PartialShape
from inferplex.api.types import Type, type_name
from inferplex.errors import InputError, ModelError
from inferplex.preprocess._enums import ColorFormat, PaddingMode, ResizeAlgorithm
from inferplex.preprocess._info import InputInfo, OutputInfo, Step
from inferplex.preprocess._ops import Emitter, PlannedOp, custom_result, ir_shape
from inferplex.preprocess._pad import check_pad
from inferplex.preprocess._yuv import COLOR_NAMES, PLANES, check_element, is_yuv, plane_shapes, planes_of

_COLORS_BUILT = (ColorFormat.RGB, ColorFormat.BGR, ColorFormat.RGBX, ColorFormat.BGRX)

_RESIZE_MODES = {
    ResizeAlgorithm.RESIZE_LINEAR: "linear",
    ResizeAlgorithm.RESIZE_NEAREST: "nearest",
    ResizeAlgorithm.RESIZE_CUBIC: "cubic",
    ResizeAlgorithm.RESIZE_BILINEAR_PILLOW: "bilinear_pillow",
    ResizeAlgorithm.RESIZE_BICUBIC_PILLOW: "bicubic_pillow",
}
"""The resize mode each algorithm is planned as (ONNX Resize's mode, or one of Pillow's)."""


State = tuple[Layout, Type, "ColorFormat | None"]
"""A tensor's layout, element type and colour format at one step."""


@dataclass(frozen=True)
class Segment:
    """The ops one step (or one implicit conversion) planned, for printing the steps."""

    text: str
    """OpenVINO's description of the step, e.g. ``convert type (f32)``."""
    implicit: bool
    start: int
    """The index of its first op in the planned ops (before resizes are moved to the last axes)."""
    end: int
    before: State
    after: State


class _Tracker:
    """Element type, layout, rank and colour while planning one tensor's steps."""

    def __init__(self, element: Type, layout: Layout, rank: int | None,
                 color: ColorFormat | None) -> None:
        self.element, self.layout, self.rank, self.color = element, layout, rank, color
        self.ops: list[PlannedOp] = []
        self.raw_ops: list[PlannedOp] = []
        """The ops as planned, before resizes are moved to the last axes (the segments index them)."""
        self.segments: list[Segment] = []
        self.initial: State = (layout, element, color)
        self.model_layout = layout
        """The model's layout, as printed (empty where it is not set, nor named by the steps)."""
        self.failed: tuple[str, State] | None = None
        """While a step is planned: its description and the state before it."""

    def state(self) -> State:
        return self.layout, self.element, self.color

    def record(self, text: str, implicit: bool, start: int, before: State) -> None:
        if not implicit or len(self.ops) > start:
            self.segments.append(Segment(text, implicit, start, len(self.ops), before, self.state()))

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


def plan_input(info: InputInfo, port: Any,
               progress: list[_Tracker] | None = None) -> tuple[_Tracker, PartialShape, Type, Layout]:
    """The planned ops, the user's tensor shape, type and layout for one model input (``progress``
    gets the tracker as soon as it is made, so a failed plan still shows its first steps)."""
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
    shown = info.model().layout or (stored if not stored.empty else None)
    if shown is None and any(s.name == "convert_layout" and s.args[0] is not None
                             for s in info.preprocess().steps):
        shown = model_layout
    track.model_layout = shown or Layout()
    if progress is not None:
        progress.append(track)
    for step in info.preprocess().steps:
        start, before = len(track.ops), track.state()
        track.failed = describe(step, model_layout), before
        _plan_pre_step(track, step, model_type, model_layout, model_shape)
        track.record(describe(step, model_layout), False, start, before)
    track.failed = None
    if facts.color is not None and planes_of(facts.color) > 1 and is_yuv(track.color):
        raise ModelError(f"a {facts.color.name} tensor has several planes, which the model cannot take "
                         "as one input: add convert_color(ColorFormat.RGB) (or BGR) to its steps")
    start, before = len(track.ops), track.state()
    track.cast(model_type)
    track.record(f"convert type ({model_type.get_type_name()})", True, start, before)
    start, before = len(track.ops), track.state()
    track.transpose_to(model_layout, implicit=True)
    track.record(f"convert layout {model_layout}", True, start, before)
    track.raw_ops = list(track.ops)
    track.ops = _resize_on_last_axes(track.ops, rank)
    shape = facts.shape
    if shape is None:
        shape = PartialShape(model_shape)
        for op in reversed(track.ops):
            shape = op.backward(shape)
        shape = _with_spatial(shape, tensor_layout, facts.spatial, facts.color)
    return track, shape, user_type, tensor_layout


def _numbers(values: Any) -> str:
    items = values if isinstance(values, (list, tuple)) else [values]
    return ",".join(f"{float(v):g}" for v in items)


def describe(step: Step, model_layout: Layout) -> str:
    """OpenVINO's description of a step, as its PrePostProcessor prints it."""
    args = step.args
    if step.name == "convert_element_type":
        return f"convert type ({type_name(args[0]) if args[0] else 'dynamic'})"
    if step.name == "convert_layout":
        target = model_layout if args[0] is None else args[0]
        return f"convert layout {target}" if isinstance(target, Layout) else \
            f"convert layout ({','.join(str(i) for i in target)})"
    if step.name in ("mean", "scale"):
        return f"{step.name} ({_numbers(args[0])})"
    if step.name == "convert_color":
        return f"convert color ({color_name(args[0])})"
    if step.name == "crop":
        return "Crop ([ {} ],[ {} ])".format(*(", ".join(str(i) for i in a) for a in args))
    if step.name == "pad":
        fill = {PaddingMode.CONSTANT: f"with ({_numbers(args[2])})", PaddingMode.EDGE: "copied from edge",
                PaddingMode.REFLECT: "reflected from tensor",
                PaddingMode.SYMMETRIC: "symmetrically added from tensor"}[args[3]]
        return f"pad(begin ({_numbers(args[0])}), end ({_numbers(args[1])}), {fill})"
    if step.name == "resize":
        return "resize to model width/height" if args[1] is None else f"resize to ({args[1]}, {args[2]})"
    return step.name.replace("_", " ")


def color_name(color: ColorFormat) -> str:
    """OpenVINO's name of a colour format (``NV12 (single plane)``, ``RGB``)."""
    return COLOR_NAMES.get(color, color.name)


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


def _with_spatial(shape: PartialShape, layout: Layout, spatial: Any,
                  color: ColorFormat | None) -> PartialShape:
    if spatial is None:
        return shape
    if not (layout.has_name("H") and layout.has_name("W")) or shape.rank.is_dynamic:
        raise ModelError(f"set_spatial_*_shape needs a tensor layout with H and W, got {layout}")
    dims = list(shape)
    rows = 3 if is_yuv(color) and planes_of(color) == 1 else 2  # one YUV plane has H * 3 / 2 rows
    for name, length in zip("HW", spatial, strict=True):
        if length is not None and name == "H" and rows == 3:
            if length % 2:
                raise ModelError(f"a {getattr(color, 'name', color)} image has an even height, got "
                                 f"set_spatial_static_shape({length}, ...)")
            length = length * 3 // 2
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
    if is_yuv(source) and target in (ColorFormat.RGB, ColorFormat.BGR, ColorFormat.GRAY):
        return _plan_yuv(track, source, target)
    if source in (ColorFormat.RGB, ColorFormat.BGR) and target == ColorFormat.GRAY:
        why = check_element(track.element, "convert_color to GRAY")
        if why is not None:
            raise ModelError(why)
        if track.rank is None:
            raise ModelError("convert_color to GRAY needs the tensor's rank: set its shape with "
                             "tensor().set_shape(...), or give the model an input of known rank")
        track.ops.append(PlannedOp("gray", (track.axis("C", "convert_color"), source == ColorFormat.BGR)))
        track.color = target
        return None
    if source not in _COLORS_BUILT or target not in (ColorFormat.RGB, ColorFormat.BGR):
        raise ModelError(f"convert_color: {source.name} is not convertible to {target.name}; accepted: "
                         "RGB, BGR, RGBX, BGRX, NV12_SINGLE_PLANE, NV12_TWO_PLANES, I420_SINGLE_PLANE "
                         "and I420_THREE_PLANES to RGB or BGR, and RGB, BGR and the NV12 and I420 "
                         "formats to GRAY")
    axis = track.axis("C", "convert_color")
    if source in (ColorFormat.RGBX, ColorFormat.BGRX):
        track.ops.append(PlannedOp("first3", (axis,)))
    if source.name[:3] != target.name:
        track.ops.append(PlannedOp("reverse", (axis,)))
    track.color = target
    return None


def _plan_yuv(track: _Tracker, source: ColorFormat, target: ColorFormat) -> None:
    """NV12/I420 to RGB/BGR or GRAY: the tensor must be NHWC with one channel; on several planes, only
    element type conversions may come before (they apply to every plane)."""
    names = track.layout.names(4) if track.rank == 4 and not track.layout.empty else []
    if track.rank != 4 or (names and (names[3] != "C" or "H" not in names or "W" not in names)):
        raise ModelError(f"convert_color from {source.name} takes an NHWC tensor of one channel "
                         f"([N, H, W, 1]); the tensor's layout there is {track.layout}: leave its layout "
                         "unset (NHWC) or set it to NHWC, and convert the layout after convert_color")
    why = check_element(track.element)
    if why is not None:
        raise ModelError(why)
    if len(PLANES[source]) > 1 and any(op.kind != "cast" for op in track.ops):
        raise ModelError(f"a {source.name} tensor has several planes: before convert_color only "
                         "convert_element_type applies to them; move the other steps after convert_color")
    track.ops.append(PlannedOp("yuv", (source, target)))
    track.color = target


def plan_output(info: OutputInfo, port: Any) -> _Tracker:
    """The planned ops after one model output, implicit conversions included."""
    facts = info.tensor().facts
    stored = layout_helpers.get_layout(port)
    model_layout = info.model().layout or stored
    layouts = [step.args[0] for step in info.postprocess().steps if step.name == "convert_layout"]
    named = model_layout.empty and bool(layouts) and isinstance(layouts[0], Layout)
    if named:  # As OpenVINO: an output of unknown layout has the layout the first conversion names.
        model_layout = layouts[0]
    shape = port.get_partial_shape()
    rank = len(shape) if shape.rank.is_static else None
    track = _Tracker(port.get_element_type(), model_layout, rank, None)
    track.model_layout = Layout() if named else model_layout
    tensor_layout = facts.layout or Layout()
    for step in info.postprocess().steps:
        start, before = len(track.ops), track.state()
        if step.name == "convert_element_type":
            track.cast(step.args[0] or facts.element_type or track.element)
        elif step.name == "custom":
            track.ops.append(PlannedOp("custom", step.args))
        else:
            track.convert_layout(step.args[0], tensor_layout)
        track.record(describe(step, tensor_layout), False, start, before)
    if facts.element_type is not None:
        start, before = len(track.ops), track.state()
        track.cast(facts.element_type)
        track.record(f"convert type ({facts.element_type.get_type_name()})", True, start, before)
    start, before = len(track.ops), track.state()
    track.transpose_to(tensor_layout, implicit=True)
    track.record(f"convert layout {tensor_layout}", True, start, before)
    track.raw_ops = list(track.ops)
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


def input_planes(name: str, facts: Any, shape: PartialShape) -> list[tuple[str, PartialShape]]:
    """The names and shapes of the inputs an input becomes: itself, or one per plane of a multi-plane
    colour format (``<name>/<plane>``), from the tensor's shape (the Y plane's for several planes)."""
    color = facts.color
    if color is None or planes_of(color) == 1:
        return [(name, shape)]
    subs = facts.sub_names or PLANES[color]
    return [(f"{name}/{sub}", plane) for sub, plane in zip(subs, plane_shapes(color, shape), strict=True)]


def emit_planes(out: Emitter, ops: list[PlannedOp], planes: list[ir.Value], element: Type,
                shape: PartialShape) -> tuple[ir.Value, Type, PartialShape]:
    """Emit ``ops`` after the tensor's planes (one, or several for multi-plane formats, whose steps
    before the colour conversion apply to every plane); returns the last value, its type and shape."""
    if len(planes) == 1:
        return emit(out, ops, planes[0], element, shape)
    split = next(i for i, op in enumerate(ops) if op.kind == "yuv")
    values = []
    for plane, plane_shape in zip(planes, plane_shapes(ops[split].args[0], shape), strict=True):
        value, plane_type, _ = emit(out, ops[:split], plane, element, plane_shape)
        values.append(value)
    image = ops[split].emit(out, values, plane_type, shape)
    return emit(out, ops[split + 1:], image, plane_type, ops[split].forward(shape))


def new_input(name: str, element: Type, shape: PartialShape) -> ir.Value:
    if element.is_dynamic():
        raise InputError(f"input {name!r}: the tensor's element type is dynamic; "
                         "set it with tensor().set_element_type(...)")
    return ir.Value(name=name, type=ir.TensorType(element.data_type), shape=ir_shape(shape))
