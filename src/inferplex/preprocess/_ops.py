"""Planned pre/postprocessing operations, and the ONNX nodes each one becomes.

A plan is a list of :class:`PlannedOp`, made from the recorded steps once
layouts and element types are known (they do not depend on shapes).  Each op
then maps a shape forward (to check the result against the model), backward
(to derive the user's tensor shape when it was not set), and emits its ONNX
nodes through an :class:`Emitter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex.api.shapes import Dimension, PartialShape
from inferplex.api.types import Type
from inferplex.errors import ModelError
from inferplex.preprocess._custom import emit_custom
from inferplex.preprocess._pad import emit_pad, padded
from inferplex.preprocess._yuv import emit_yuv, yuv_backward, yuv_forward

_INT64_MIN = int(np.iinfo(np.int64).min)

_PILLOW: dict[str, dict[str, Any]] = {
    "bilinear_pillow": {"mode": "linear", "antialias": 1, "exclude_outside": 1},
    "bicubic_pillow": {"mode": "cubic", "antialias": 1, "exclude_outside": 1, "cubic_coeff_a": -0.5},
}
"""ONNX Resize attributes of Pillow's resampling (OpenVINO's ``RESIZE_*_PILLOW``): a filter widened
by the downscaling factor, weights renormalised inside the image, and Pillow's cubic a = -0.5."""


class Emitter:
    """Builds nodes and initializers for one input or output, with unique names."""

    def __init__(self, prefix: str, opset: int) -> None:
        self.prefix = prefix
        self.opset = opset
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []

    def _name(self, what: str) -> str:
        return f"{self.prefix}/{what}_{len(self.nodes) + len(self.initializers)}"

    def const(self, array: np.ndarray) -> ir.Value:
        tensor = ir.tensor(array)
        value = ir.Value(name=self._name("const"), const_value=tensor, shape=ir.Shape(array.shape),
                         type=ir.TensorType(tensor.dtype))
        self.initializers.append(value)
        return value

    def ints(self, values: Any) -> ir.Value:
        return self.const(np.asarray(values, dtype=np.int64))

    def op(self, op_type: str, inputs: Sequence[ir.Value | None], element: Type,
           shape: PartialShape, **attributes: Any) -> ir.Value:
        name = self._name(op_type)
        node = ir.Node("", op_type, inputs, ir.convenience.convert_attributes(attributes),
                       name=name, num_outputs=1)
        out = node.outputs[0]
        out.name, out.type, out.shape = name, ir.TensorType(element.data_type), ir_shape(shape)
        self.nodes.append(node)
        return out

    def need_opset(self, version: int, what: str) -> None:
        if self.opset < version:
            raise ModelError(f"{what} needs ONNX opset >= {version} (it is built as ONNX ops); "
                             f"the model imports opset {self.opset}")


def ir_shape(shape: PartialShape) -> ir.Shape | None:
    """An onnx-ir shape (dynamic dims as None; ONNX keeps no intervals)."""
    if shape.rank.is_dynamic:
        return None
    return ir.Shape([d.get_length() if d.is_static else None for d in shape])


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


@dataclass(frozen=True)
class PlannedOp:
    """One operation: ``kind`` and its arguments (axes may be negative, from the end)."""

    kind: str
    """cast, transpose, resize, sub, div, reverse, first3, crop, pad, yuv (NV12/I420 to RGB, BGR or
    GRAY: the two formats), gray (RGB or BGR to GRAY: the channel axis and whether from BGR) or
    custom (its shape and type are those of the value its function returns: see
    :func:`custom_result`)."""
    args: tuple[Any, ...] = ()

    @property
    def min_opset(self) -> int:
        """The ONNX opset its nodes need: Resize 11 (18 for Pillow's antialiased modes), Pad with
        its pads as an input 11, NV12/I420 conversion (Clip and Round) 11, Slice with steps 10, the
        others 1."""
        if self.kind == "resize":
            return 18 if self.args[0] in _PILLOW else 11
        if self.kind in ("pad", "yuv"):
            return 11
        return 10 if self.kind in ("reverse", "first3", "crop", "gray") else 1

    def forward(self, shape: PartialShape) -> PartialShape:
        """The shape this op makes from ``shape``."""
        if self.kind in ("cast", "sub", "div", "reverse", "custom") or shape.rank.is_dynamic:
            return PartialShape(shape)
        if self.kind == "pad":
            return padded(shape, self.args[0], self.args[1])
        if self.kind == "yuv":
            return yuv_forward(self.args[0], self.args[1], shape)
        dims, rank = list(shape), len(shape)
        if self.kind == "transpose":
            return PartialShape([dims[p] for p in self.args[0]])
        if self.kind == "resize":
            _, h_axis, w_axis, height, width = self.args
            dims[_axis(h_axis, rank)], dims[_axis(w_axis, rank)] = Dimension(height), Dimension(width)
        elif self.kind in ("first3", "gray"):
            dims[_axis(self.args[0], rank)] = Dimension(3 if self.kind == "first3" else 1)
        elif self.kind == "crop":
            dims = [_cropped(d, b, e) for d, b, e in zip(dims, *self.args, strict=True)]
        return PartialShape(dims)

    def backward(self, shape: PartialShape) -> PartialShape:
        """The shape of this op's input, given its output (for an unset tensor shape); a custom
        function is taken to keep the shape (set the tensor's shape where it does not), and so is
        pad, as in OpenVINO, which takes the model's shape for an unset tensor's: a pad that
        grows a static dimension then needs the tensor's shape set."""
        if self.kind in ("cast", "sub", "div", "reverse", "custom", "pad") or shape.rank.is_dynamic:
            return PartialShape(shape)
        if self.kind == "yuv":
            return yuv_backward(self.args[0], shape)
        dims, rank = list(shape), len(shape)
        if self.kind == "transpose":
            before = [Dimension()] * rank
            for index, source in enumerate(self.args[0]):
                before[source] = dims[index]
            return PartialShape(before)
        if self.kind == "resize":
            dims[_axis(self.args[1], rank)] = dims[_axis(self.args[2], rank)] = Dimension()
        elif self.kind in ("first3", "gray"):
            dims[_axis(self.args[0], rank)] = Dimension(4 if self.kind == "first3" else 3)
        elif self.kind == "crop":
            raise ModelError("crop needs the input tensor's shape: call "
                             "ppp.input().tensor().set_shape(...) first")
        return PartialShape(dims)

    def emit(self, out: Emitter, value: ir.Value | list[ir.Value], element: Type,
             shape: PartialShape) -> ir.Value:
        """Add this op's nodes after ``value`` (of ``element`` type and ``shape``; a yuv op takes the
        list of its planes, and ``shape`` is its first plane's)."""
        result = self.forward(shape)
        if self.kind == "yuv":
            out.need_opset(self.min_opset, "NV12/I420 conversion")
            return emit_yuv(out, self.args[0], self.args[1], value if isinstance(value, list) else [value],
                            element, result)
        if isinstance(value, list):
            raise ModelError(f"a {self.kind} step takes one tensor, not {len(value)} planes")
        if self.kind == "custom":
            return emit_custom(out, value, self.args[0])
        if self.kind == "pad":
            return emit_pad(out, value, element, shape, self.args)
        if self.kind == "cast":
            return out.op("Cast", [value], self.args[0], result, to=int(self.args[0].data_type))
        if self.kind == "transpose":
            return out.op("Transpose", [value], element, result, perm=list(self.args[0]))
        if self.kind in ("sub", "div"):
            constant = out.const(_per_channel(self.args, element, shape, self.kind))
            return out.op("Sub" if self.kind == "sub" else "Div", [value, constant], element, result)
        if self.kind == "gray":
            return _gray(out, value, element, shape, result, *self.args)
        if self.kind in ("reverse", "first3", "crop"):
            out.need_opset(10, "reversing channels or cropping")
            starts, ends, axes, steps = self._slice()
            inputs = [value, out.ints(starts), out.ints(ends), out.ints(axes), out.ints(steps)]
            return out.op("Slice", inputs, element, result)
        return self._resize(out, value, element, shape, result)

    def _slice(self) -> tuple[list[int], list[int], list[int], list[int]]:
        if self.kind == "reverse":
            return [-1], [_INT64_MIN], [self.args[0]], [-1]
        if self.kind == "first3":
            return [0], [3], [self.args[0]], [1]
        begin, end = self.args
        return list(begin), list(end), list(range(len(begin))), [1] * len(begin)

    def _resize(self, out: Emitter, value: ir.Value, element: Type, shape: PartialShape,
                result: PartialShape) -> ir.Value:
        mode = self.args[0]
        out.need_opset(self.min_opset, f"resize ({mode})")
        attributes = _PILLOW.get(mode, {"mode": mode})
        if shape.rank.is_dynamic:
            raise ModelError("resize needs a tensor of known rank; set the tensor's shape")
        if result.is_static:
            sizes = out.ints(list(result.to_shape()))
        else:
            rank = len(shape)
            wanted = [d.get_length() if d.is_static else 0 for d in result]
            mask = np.zeros(rank, dtype=bool)
            mask[[_axis(self.args[1], rank), _axis(self.args[2], rank)]] = True
            mask |= np.array([d.is_static for d in shape])
            current = out.op("Shape", [value], Type.i64, PartialShape([rank]))
            sizes = out.op("Where", [out.const(mask), out.ints(wanted), current], Type.i64,
                           PartialShape([rank]))
        empty = out.const(np.zeros(0, dtype=np.float32)) if out.opset < 13 else None
        return out.op("Resize", [value, empty, empty, sizes], element, result,
                      coordinate_transformation_mode="half_pixel", **attributes)


GRAY_WEIGHTS = (0.299, 0.587, 0.114)
"""OpenVINO's weights of R, G and B in ``convert_color(ColorFormat.GRAY)``."""


def _gray(out: Emitter, value: ir.Value, element: Type, shape: PartialShape, result: PartialShape,
          axis: int, bgr: bool) -> ir.Value:
    """RGB or BGR to GRAY on the channel ``axis``: the channels weighed by :data:`GRAY_WEIGHTS` and
    summed in float32 (float64 for f64 data), rounded half to even for u8 data (as OpenVINO's
    convolution, Round and Convert do)."""
    rank = len(shape)
    compute = Type.f64 if element == Type.f64 else Type.f32
    weights = np.asarray(GRAY_WEIGHTS[::-1] if bgr else GRAY_WEIGHTS, dtype=compute.to_dtype())
    weights = weights.reshape([3] + [1] * (rank - _axis(axis, rank) - 1))
    if element != compute:
        value = out.op("Cast", [value], compute, shape, to=int(compute.data_type))
    weighed = out.op("Mul", [value, out.const(weights)], compute, shape)
    if out.opset >= 13:
        total = out.op("ReduceSum", [weighed, out.ints([axis])], compute, result, keepdims=1)
    else:
        total = out.op("ReduceSum", [weighed], compute, result, axes=[axis], keepdims=1)
    if element == compute:
        return total
    if element == Type.u8:
        total = out.op("Round", [total], compute, result)
    return out.op("Cast", [total], element, result, to=int(element.data_type))


def custom_result(value: ir.Value) -> tuple[Type, PartialShape]:
    """The element type and shape of the value a custom step returned."""
    if value.dtype is None:
        raise ModelError(f"a custom step returned {value.name!r}, whose element type is not known")
    dims = None if value.shape is None else \
        [d if isinstance(d, int) else Dimension() for d in value.shape]
    return Type(value.dtype), PartialShape.dynamic() if dims is None else PartialShape(dims)


def _cropped(dim: Dimension, begin: int, end: int) -> Dimension:
    if dim.is_dynamic:
        return Dimension()
    return Dimension(len(range(*slice(begin, end).indices(dim.get_length()))))


def _per_channel(args: tuple[Any, ...], element: Type, shape: PartialShape, kind: str) -> np.ndarray:
    values, channel_axis = args
    if not element.is_real():
        raise ModelError(f"{'mean' if kind == 'sub' else 'scale'} applies to float tensors; this "
                         f"one is {element.get_type_name()} there: add convert_element_type(Type.f32) "
                         "before it")
    array = np.asarray(values, dtype=element.to_dtype())
    if len(values) == 1:
        return array.reshape(())
    if channel_axis is None:
        raise ModelError(f"per-channel values {list(values)} need a layout with C: set the "
                         "tensor's layout (tensor().set_layout) or the model's (model().set_layout)")
    rank = len(shape)
    axis = _axis(channel_axis, rank)
    channels = shape[axis]
    if channels.is_static and channels.get_length() != len(values):
        raise ModelError(f"{len(values)} per-channel values for a tensor with "
                         f"{channels.get_length()} channels (shape {shape})")
    return array.reshape([len(values)] + [1] * (rank - axis - 1))
