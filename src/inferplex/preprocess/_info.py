"""What a user records on a PrePostProcessor: tensor and model facts, and the steps.

These classes only record; :mod:`inferplex.preprocess._build` turns the records
into ONNX ops.  Every setter returns its object, so calls chain as in OpenVINO:
``ppp.input().tensor().set_element_type(Type.u8).set_layout(Layout("NHWC"))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferplex.api.layout import Layout
from inferplex.api.shapes import PartialShape
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError
from inferplex.preprocess._enums import ColorFormat, PaddingMode, ResizeAlgorithm, member
from inferplex.preprocess._pad import pad_arguments
from inferplex.preprocess._yuv import PLANES


@dataclass(frozen=True)
class Step:
    """One recorded step: its name (``mean``, ``resize``, ...) and its arguments."""

    name: str
    """The step's method name, e.g. ``convert_element_type``."""
    args: tuple[Any, ...] = ()
    """Its arguments, already checked and converted (Type, Layout, floats, ...)."""


def _floats(values: float | Sequence[float], what: str) -> tuple[float, ...]:
    items = [values] if isinstance(values, (int, float)) else list(values)
    try:
        return tuple(float(v) for v in items)
    except (TypeError, ValueError) as error:
        raise InputError(f"{what} takes a number or a list of numbers (one per channel), "
                         f"got {values!r}") from error


def _layout_or_order(layout: Any) -> Layout | tuple[int, ...] | None:
    if layout is None or isinstance(layout, Layout):
        return layout
    if isinstance(layout, str):
        return Layout(layout)
    order = tuple(int(i) for i in layout)
    if sorted(order) != list(range(len(order))):
        raise InputError(f"convert_layout order {list(order)} is not a permutation of "
                         f"0..{len(order) - 1}")
    return order


def _one_of(value: Any, values: Any, what: str) -> Any:
    if (value is None) == (values is None):
        raise InputError(f"{what} takes value (one number) or values (one per channel), one of them")
    return value if values is None else values


class _Steps:
    def __init__(self) -> None:
        self.steps: list[Step] = []

    def _add(self, name: str, *args: Any) -> Any:
        self.steps.append(Step(name, args))
        return self

    def convert_element_type(self, type: Type | None = None) -> Any:
        """Cast to ``type`` (default: the model's element type)."""
        return self._add("convert_element_type", None if type is None else Type(type))

    def convert_layout(self, dst_layout: Layout | str | Sequence[int] | None = None,
                       dims: Sequence[int] | None = None, *,
                       layout: Layout | str | Sequence[int] | None = None) -> Any:
        """Transpose to ``dst_layout`` (default: the model's), or by a dimension order ``[0, 3, 1, 2]``
        (``dims``, as OpenVINO names it; ``layout`` is taken too).

        On an input whose model layout is not set, the tensor's layout (``tensor().set_layout``)
        carried through these conversions is the model's, as in OpenVINO: an NHWC tensor with
        ``convert_layout(Layout("NCHW"))`` feeds an NCHW model."""
        given = [v for v in (dst_layout, dims, layout) if v is not None]
        if len(given) > 1:
            raise InputError("convert_layout takes one of dst_layout (a Layout) or dims (a dimension "
                             f"order), got {len(given)}")
        return self._add("convert_layout", _layout_or_order(given[0] if given else None))

    def custom(self, operation: Callable[[Any], Any]) -> Any:
        """Apply ``operation``, a function from an output port to an output port built with
        ``inferplex.opset`` functions: ``custom(lambda node: opset.abs(node).output(0))``.
        Its ops join the graph with the other steps (:mod:`inferplex.preprocess._custom`)."""
        if not callable(operation):
            raise InputError(f"custom takes a function from an output to an output (e.g. "
                             f"lambda node: opset.abs(node).output(0)), got {type(operation).__name__}")
        return self._add("custom", operation)


class PreProcessSteps(_Steps):
    """The preprocessing steps of one input, applied in the order they are added."""

    def mean(self, value: float | Sequence[float] | None = None,
             values: Sequence[float] | None = None) -> PreProcessSteps:
        """Subtract ``value`` (one number) or ``values`` (one per channel: needs a layout with ``C``)."""
        return self._add("mean", _floats(_one_of(value, values, "mean"), "mean"))

    def scale(self, value: float | Sequence[float] | None = None,
              values: Sequence[float] | None = None) -> PreProcessSteps:
        """Divide by ``value`` (one number) or ``values`` (one per channel)."""
        values = _floats(_one_of(value, values, "scale"), "scale")
        if 0.0 in values:
            raise InputError(f"scale values must be non-zero, got {list(values)}")
        return self._add("scale", values)

    def resize(self, alg: ResizeAlgorithm | None = None, dst_height: int | None = None,
               dst_width: int | None = None, *, algorithm: ResizeAlgorithm | None = None) -> PreProcessSteps:
        """Resize H and W to the model's (or to ``dst_height`` x ``dst_width``) with ``alg`` (OpenVINO's
        keyword; ``algorithm`` is taken too)."""
        if (alg is None) == (algorithm is None):
            raise InputError("resize takes one ResizeAlgorithm, as alg (or algorithm)")
        algorithm = alg if algorithm is None else algorithm
        if not isinstance(algorithm, ResizeAlgorithm):
            names = ", ".join(a.name for a in ResizeAlgorithm)
            raise InputError(f"resize takes a ResizeAlgorithm ({names}), got {algorithm!r}")
        if (dst_height is None) != (dst_width is None):
            raise InputError("resize takes both dst_height and dst_width, or neither")
        return self._add("resize", algorithm, dst_height, dst_width)

    def reverse_channels(self) -> PreProcessSteps:
        """Reverse the order of the channels (``C`` must be in the layout)."""
        return self._add("reverse_channels")

    def convert_color(self, dst_format: ColorFormat) -> PreProcessSteps:
        """Convert from the tensor's colour format (``set_color_format``) to ``dst_format``."""
        return self._add("convert_color", member(ColorFormat, dst_format, "convert_color"))

    def crop(self, begin: Sequence[int], end: Sequence[int]) -> PreProcessSteps:
        """Keep ``begin[i]:end[i]`` of every dimension (negative ends count from the end)."""
        if len(begin) != len(end):
            raise InputError(f"crop begin {list(begin)} and end {list(end)} differ in length")
        return self._add("crop", tuple(int(b) for b in begin), tuple(int(e) for e in end))

    def pad(self, pads_begin: Sequence[int], pads_end: Sequence[int], value: float | Sequence[float],
            mode: PaddingMode) -> PreProcessSteps:
        """Add ``pads_begin[i]`` elements before and ``pads_end[i]`` after dimension ``i`` (one pad
        per dimension of the tensor at this step; negative pads remove elements), filled as
        ``mode`` says: with ``value`` (CONSTANT; other modes ignore it), the edge element (EDGE),
        or a mirror without the edge (REFLECT) or with it (SYMMETRIC).  The tensor must be a
        float one there; its shape grows, so set the tensor's shape (``tensor().set_shape``)."""
        return self._add("pad", *pad_arguments(pads_begin, pads_end, value, mode))


class PostProcessSteps(_Steps):
    """The postprocessing steps of one output, applied in the order they are added."""


@dataclass
class TensorFacts:
    """What the user's tensor is; None where not set (then the model's is used)."""

    element_type: Type | None = None
    layout: Layout | None = None
    shape: PartialShape | None = None
    spatial: tuple[Any, Any] | None = None
    """(height, width) from ``set_spatial_*_shape``: ints, or None for dynamic."""
    color: ColorFormat | None = None
    memory_type: str | None = None
    """From ``set_memory_type``: the built input's rt_info holds it; the graph does not change."""
    sub_names: tuple[str, ...] = ()
    """The plane names of a multi-plane colour format, as given (empty: not given)."""


class InputTensorInfo:
    """The tensor a user will feed (``ppp.input().tensor()``)."""

    def __init__(self) -> None:
        self.facts = TensorFacts()

    def set_element_type(self, type: Type) -> InputTensorInfo:
        self.facts.element_type = Type(type)
        return self

    def set_layout(self, layout: Layout | str) -> InputTensorInfo:
        self.facts.layout = Layout(layout)
        return self

    def set_shape(self, shape: Any) -> InputTensorInfo:
        self.facts.shape = PartialShape(shape)
        return self

    def set_from(self, tensor: Any) -> InputTensorInfo:
        """The element type and shape of ``tensor`` (an ``ov.Tensor`` or a numpy array)."""
        element, shape = getattr(tensor, "element_type", None), getattr(tensor, "shape", None)
        if not isinstance(element, Type) or shape is None:
            if not hasattr(tensor, "__array__"):
                raise InputError(f"set_from takes an ov.Tensor or a numpy array, got "
                                 f"{type(tensor).__name__}")
            array = np.asarray(tensor)
            element, shape = Type(array.dtype), array.shape
        return self.set_element_type(element).set_shape(list(shape))

    def set_spatial_dynamic_shape(self) -> InputTensorInfo:
        """Height and width are dynamic: any image size is accepted (resize it)."""
        self.facts.spatial = (None, None)
        return self

    def set_spatial_static_shape(self, height: int, width: int) -> InputTensorInfo:
        self.facts.spatial = (int(height), int(width))
        return self

    def set_color_format(self, format: ColorFormat,
                         sub_names: Sequence[str] = ()) -> InputTensorInfo:
        """The tensor's colour format; ``sub_names`` name the planes of NV12_TWO_PLANES (2) and
        I420_THREE_PLANES (3), whose inputs are then ``<input>/<sub name>`` (default: ``y``, ``uv``
        or ``y``, ``u``, ``v``)."""
        color = member(ColorFormat, format, "set_color_format")
        if isinstance(sub_names, str) or not all(isinstance(n, str) for n in sub_names):
            raise InputTypeError(f"set_color_format's sub_names is a list of strings, got {sub_names!r}")
        names = tuple(sub_names)
        planes = len(PLANES.get(color, ("",)))
        if names and planes == 1:
            raise InputError(f"plane names {list(names)} are only for the multi-plane formats "
                             f"NV12_TWO_PLANES (2 names) and I420_THREE_PLANES (3 names), not {color.name}")
        if names and len(names) != planes:
            raise InputError(f"{color.name} has {planes} planes: give {planes} sub_names, got {list(names)}")
        if len(set(names)) != len(names):
            raise InputError(f"set_color_format's sub_names must differ, got {list(names)}")
        self.facts.color = color
        self.facts.sub_names = names
        return self

    def set_memory_type(self, memory_type: str) -> InputTensorInfo:
        """The memory the tensor lives in (OpenVINO's ``"GPU_SURFACE"`` for remote GPU surfaces).

        The built model's input carries it in its rt_info (``memory_type_0``, OpenVINO's key); the
        graph does not change, and tensors are fed as host arrays."""
        if isinstance(memory_type, bytes):
            memory_type = memory_type.decode()
        if not isinstance(memory_type, str):
            raise InputTypeError(f"set_memory_type takes a string (e.g. 'GPU_SURFACE'), got "
                                 f"{type(memory_type).__name__} {memory_type!r}")
        self.facts.memory_type = memory_type
        return self


class OutputTensorInfo:
    """The tensor a user will read (``ppp.output().tensor()``)."""

    def __init__(self) -> None:
        self.facts = TensorFacts()

    def set_element_type(self, type: Type) -> OutputTensorInfo:
        self.facts.element_type = Type(type)
        return self

    def set_layout(self, layout: Layout | str) -> OutputTensorInfo:
        self.facts.layout = Layout(layout)
        return self


class _ModelInfo:
    def __init__(self) -> None:
        self.layout: Layout | None = None

    def set_layout(self, layout: Layout | str) -> Any:
        """The layout the model's tensor has (e.g. ``NCHW``)."""
        self.layout = Layout(layout)
        return self


class InputModelInfo(_ModelInfo):
    """What the model's input is (``ppp.input().model()``)."""


class OutputModelInfo(_ModelInfo):
    """What the model's output is (``ppp.output().model()``)."""


@dataclass
class InputInfo:
    """One input's records: ``tensor()``, ``preprocess()`` and ``model()``."""

    index: int
    _tensor: InputTensorInfo = field(default_factory=InputTensorInfo)
    _steps: PreProcessSteps = field(default_factory=PreProcessSteps)
    _model: InputModelInfo = field(default_factory=InputModelInfo)

    def tensor(self) -> InputTensorInfo:
        return self._tensor

    def preprocess(self) -> PreProcessSteps:
        return self._steps

    def model(self) -> InputModelInfo:
        return self._model


@dataclass
class OutputInfo:
    """One output's records: ``model()``, ``postprocess()`` and ``tensor()``."""

    index: int
    _tensor: OutputTensorInfo = field(default_factory=OutputTensorInfo)
    _steps: PostProcessSteps = field(default_factory=PostProcessSteps)
    _model: OutputModelInfo = field(default_factory=OutputModelInfo)

    def tensor(self) -> OutputTensorInfo:
        return self._tensor

    def postprocess(self) -> PostProcessSteps:
        return self._steps

    def model(self) -> OutputModelInfo:
        return self._model
