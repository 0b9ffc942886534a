"""``str(ppp)``: the steps of each input and output, printed as OpenVINO's PrePostProcessor prints them.

Per input: the user's tensor (or one line per plane of a multi-plane colour format), the model's, then
the steps and the implicit conversions, each with the shape, layout, element type (and colour format)
before and after it.  Per output: the model's tensor, the steps, the implicit conversions and the
user's tensor.  A step that cannot be planned ends its input's or output's part with
``Error occurred: <why>``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from inferplex.api.layout import Layout
from inferplex.api.shapes import PartialShape
from inferplex.api.types import type_name
from inferplex.errors import InputError, ModelError
from inferplex.preprocess._build import State, color_name, input_planes, plan_input, plan_output
from inferplex.preprocess._info import InputInfo, OutputInfo

__all__ = ["dump"]


def dump(model: Any, inputs: dict[int, InputInfo], outputs: dict[int, OutputInfo]) -> str:
    """The text of every input and output that has something set, inputs first."""
    lines: list[str] = []
    for index, input_info in sorted(inputs.items()):
        lines += _input(model.inputs[index], input_info)
    for index, output_info in sorted(outputs.items()):
        lines += _output(model.outputs[index], output_info)
    return "".join(line + "\n" for line in lines)


def _layout(layout: Layout | None) -> str:
    return "<no layout>" if layout is None or layout.empty else str(layout)


def _element(element: Any) -> str:
    return "<no type>" if element is None else type_name(element)


def _tensor(shape: PartialShape, state: State) -> str:
    layout, element, color = state
    text = f"{shape}, {_layout(layout)}, {_element(element)}"
    return f"{text}, {color_name(color)}" if color is not None else text


def _steps(track: Any, shape: PartialShape, titles: tuple[str, str]) -> tuple[list[str], PartialShape]:
    """The lines of the steps and of the implicit steps; and the final shape."""
    shapes = [shape]
    for op in track.raw_ops:
        shapes.append(op.forward(shapes[-1]))
    lines: list[str] = []
    for implicit, title in zip((False, True), titles, strict=True):
        segments = [s for s in track.segments if s.implicit == implicit]
        if segments:
            lines.append(f"    {title} ({len(segments)}):")
        lines += [f"      {s.text}: ({_tensor(shapes[s.start], s.before)}) -> "
                  f"({_tensor(shapes[s.end], s.after)})" for s in segments]
    return lines, shapes[-1]


def _failed(progress: list[Any], shape: PartialShape | None, model: str, count: int,
            error: Exception) -> list[str]:
    """The lines of an input whose planning failed: the steps up to the failed one, and why."""
    lines: list[str] = []
    if progress:
        track = progress[0]
        layout, element, _ = track.initial
        shown = PartialShape.dynamic() if shape is None else shape
        if shape is not None:
            lines.append(f"    User's input tensor: {shape}, {_layout(layout)}, {_element(element)}")
        lines.append(model.format(_layout(track.model_layout)))
        track.raw_ops = list(track.ops)
        steps, last = _steps(track, shown, ("Pre-processing steps", "Implicit pre-processing steps"))
        if track.failed is not None:
            if not steps:
                steps.append(f"    Pre-processing steps ({count}):")
            steps[0] = f"    Pre-processing steps ({count}):"
            steps.append(f"      {track.failed[0]}: ({_tensor(last, track.failed[1])}")
        lines += steps
    return [*lines, f"Error occurred: {error}"]


def _set(info: InputInfo) -> bool:
    facts = info.tensor().facts
    return bool(info.preprocess().steps) or info.model().layout is not None or any(
        value is not None for value in (facts.element_type, facts.layout, facts.shape, facts.spatial,
                                        facts.color, facts.memory_type))


def _input(port: Any, info: InputInfo) -> list[str]:
    if not _set(info):
        return []
    facts = info.tensor().facts
    name = port.any_name
    head = f'Input "{name}"'
    if facts.color is not None:
        head += f" (color {color_name(facts.color)})"
    if facts.memory_type is not None:
        head += f" memory type={facts.memory_type}"
    lines = [head + ":"]
    model = (f"    Model's expected tensor: {port.get_partial_shape()}, {{}}, "
             f"{port.get_element_type().get_type_name()}")
    progress: list[Any] = []
    try:
        track, shape, element, layout = plan_input(info, port, progress)
    except (ModelError, InputError) as error:
        return lines + _failed(progress, facts.shape, model, len(info.preprocess().steps), error)
    planes = input_planes(name, facts, shape)
    if len(planes) > 1:
        lines.append(f"    {len(planes)} user's tensors expected for each plane:")
        lines += [f"       {i}: {plane + ' ' if facts.sub_names else ''}{plane_shape}, {_layout(layout)}, "
                  f"{_element(element)}" for i, (plane, plane_shape) in enumerate(planes)]
    else:
        lines.append(f"    User's input tensor: {shape}, {_layout(layout)}, {_element(element)}")
    lines.append(model.format(_layout(track.model_layout)))
    steps, _ = _steps(track, shape, ("Pre-processing steps", "Implicit pre-processing steps"))
    return lines + steps


def _unnamed_until_converted(track: Any) -> None:
    for index, segment in enumerate(track.segments):
        converts = segment.text.startswith("convert layout")
        after = segment.after if converts else (Layout(), *segment.after[1:])
        track.segments[index] = replace(segment, before=(Layout(), *segment.before[1:]), after=after)
        if converts:
            return


def _output(port: Any, info: OutputInfo) -> list[str]:
    if not (info.postprocess().steps or info.model().layout is not None
            or info.tensor().facts.element_type is not None or info.tensor().facts.layout is not None):
        return []
    lines = [f'Output "{port.any_name}":']
    try:
        track = plan_output(info, port)
    except (ModelError, InputError) as error:
        return [*lines, f"Error occurred: {error}"]
    if track.model_layout.empty:  # as OpenVINO: no layout until the first convert_layout names one
        _unnamed_until_converted(track)
    start = track.segments[0].before if track.segments else track.state()
    shape = port.get_partial_shape()
    lines.append(f"    Model's data tensor: {_tensor(shape, start)}")
    steps, final = _steps(track, shape, ("Post-processing steps", "Post-processing implicit steps"))
    return [*lines, *steps, f"    User's output tensor: {_tensor(final, track.state())}"]
