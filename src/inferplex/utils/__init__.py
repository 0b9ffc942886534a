"""Helpers OpenVINO programs import from ``openvino.utils``: ``types.get_dtype``,
``data_helpers.OVDict``, and the graph edits :func:`replace_node` and
:func:`replace_output_update_name`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inferplex.errors import InputError
from inferplex.utils import data_helpers, types  # importing the package gives these, as openvino's does

__all__ = ["data_helpers", "replace_node", "replace_output_update_name", "types"]


def replace_node(target: Any, replacement: Any, outputs_order: Sequence[int] | None = None) -> None:
    """Every reader of ``target``'s outputs (ops and the model's Results) reads ``replacement``'s
    instead, which take their tensor names: a node (its outputs in order, or in ``outputs_order``)
    or a list of outputs, one per output of ``target``."""
    if isinstance(replacement, (list, tuple)):
        outputs = list(replacement)
    else:
        count = replacement.get_output_size()
        order = list(outputs_order) if outputs_order is not None else list(range(count))
        if sorted(order) != list(range(count)):
            raise InputError(f"replace_node outputs_order {order} must order each of the replacement's "
                             f"{count} outputs once")
        outputs = [replacement.output(i) for i in order]
    if len(outputs) != target.get_output_size():
        raise InputError(f"replace_node: {target.get_type_name()} {target.get_friendly_name()!r} has "
                         f"{target.get_output_size()} outputs; the replacement gives {len(outputs)}")
    for index, output in enumerate(outputs):
        target.output(index).replace(output)


def replace_output_update_name(output: Any, replacement: Any) -> bool:
    """Readers of ``output`` read ``replacement`` instead, which takes its tensor names, and the
    replacement's op takes the friendly name of ``output``'s op (as OpenVINO's: so a Result keeps
    the name of the op before it).  False, and nothing changed, where the replacement is a
    Parameter's output and ``output`` feeds a Result (a model input cannot be renamed so)."""
    feeds_result = any(target.get_node().get_type_name() == "Result" for target in output.get_target_inputs())
    if feeds_result and replacement.get_node().get_type_name() == "Parameter":
        return False
    name = output.get_node().get_friendly_name()
    output.replace(replacement)
    if feeds_result:
        replacement.get_node().set_friendly_name(name)
    return True
