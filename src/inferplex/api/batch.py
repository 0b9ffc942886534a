"""``ov.get_batch`` and ``ov.set_batch``: the batch dimension named by the inputs' layouts.

As in OpenVINO, the batch is the dimension named ``N`` in an input's layout
(``param.set_layout("NCHW")``, or a PrePostProcessor's model layout); inputs
without a layout or without ``N`` in it keep their shapes.  A model where no
input has a layout with ``N`` has no batch to read or set: the error lists the
inputs and says how to set one, rather than guessing dimension 0; where an input's
rank is unknown (declared with no shape), it names that input and says that a
full shape (``model.reshape``), or a rank and then a layout, is what works.
"""

from __future__ import annotations

from typing import Any

from inferplex.api.layout import Layout
from inferplex.api.nodes import LAYOUT_KEY, dims_of
from inferplex.api.reshape import Dim, as_dimension, format_dims, parse_shape
from inferplex.api.shapes import Dimension
from inferplex.errors import InputError

__all__ = ["batch_index", "get_batch", "set_batch"]


def batch_index(layout: str | Layout, rank: int | None) -> int | None:
    """Index of ``N`` in ``layout`` for an input of ``rank`` dims; None when the layout has no ``N``."""
    layout = Layout(layout)
    if not layout.has_name("N"):
        return None
    index = layout.get_index_by_name("N")  # negative when counted from the end ("...N")
    if index >= 0:
        return index
    return None if rank is None else rank + index


def _batched_inputs(model: Any) -> list[tuple[int, int, list[Dim]]]:
    """``(input index, batch index, dims)`` of every input whose layout names N (and has a known rank)."""
    found: list[tuple[int, int, list[Dim]]] = []
    for index, value in enumerate(model.ir.graph.inputs):
        layout = value.metadata_props.get(LAYOUT_KEY)
        dims = dims_of(value)
        if not layout or dims is None:
            continue
        axis = batch_index(layout, len(dims))
        if axis is not None and 0 <= axis < len(dims):
            found.append((index, axis, dims))
    return found


def _no_batch_error(model: Any) -> InputError:
    inputs = model.ir.graph.inputs
    unranked = [value.name for value in inputs if dims_of(value) is None]
    if unranked:
        names = ", ".join(repr(name) for name in unranked)
        which = f"input {names} has" if len(unranked) == 1 else f"inputs {names} have"
        return InputError(
            f"the model's batch size is unknown: {which} an unknown rank ([...]), so no layout "
            f"can place a batch dimension N in it; give it a full shape with model.reshape, e.g. "
            f"model.reshape({{{unranked[0]!r}: [2, 3, 224, 224]}}), or give it a rank first "
            f"(model.reshape({{{unranked[0]!r}: '?,?,?,?'}})) and then a layout "
            f"(model.get_parameters()[0].set_layout('NCHW')) for set_batch")
    listed = "; ".join(
        f"{value.name!r} {format_dims(dims_of(value))} layout "
        f"{value.metadata_props.get(LAYOUT_KEY) or 'not set'}" for value in inputs)
    return InputError(f"the model's batch size is unknown: no input has a layout with a batch "
                      f"dimension N (inputs: {listed}); set one first, e.g. "
                      f"model.get_parameters()[0].set_layout('NCHW')")


def get_batch(model: Any) -> Dimension:
    """The batch size as OpenVINO gives it: a ``Dimension``, static, ranged (``1..8``) or ``?``.

    Every input with ``N`` in its layout must agree on it.
    """
    found = _batched_inputs(model)
    if not found:
        raise _no_batch_error(model)
    batch: Dim = None
    for index, axis, dims in found:
        size = dims[axis]
        if batch is None or (isinstance(size, int) and not isinstance(batch, int)):
            batch = size if size is not None else batch
        elif isinstance(size, int) and size != batch:
            name = model.ir.graph.inputs[index].name
            raise InputError(f"inputs disagree on the batch size: {batch} elsewhere but {size} in "
                             f"input {name!r} {format_dims(dims)}")
    return as_dimension(batch)


def set_batch(model: Any, batch_size: Any = -1) -> None:
    """Set the batch dimension of every input with ``N`` in its layout (-1: dynamic; ranges accepted)."""
    get_batch(model)  # the same checks as OpenVINO: a batch exists and the inputs agree
    parsed = parse_shape([batch_size])
    assert parsed is not None
    shapes: dict[int, Any] = {}
    for index, axis, dims in _batched_inputs(model):
        new = list(dims)
        new[axis] = parsed[0]
        shapes[index] = new
    try:
        model.reshape(shapes)
    except InputError as error:
        raise InputError(f"cannot set the batch size to {batch_size}: {error}") from error
